package targets

import (
	"cmp"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// A request's values are buffered as JSON and decoded for every attempt.
// What JSON cannot bring back unchanged is refused before anything is
// tracked: text that is not valid UTF-8 (encoding/json replaces it with
// U+FFFD), an integer past int64 or a number past float64's range (it
// would come back rounded, or as ±Inf, which no attempt can send), a
// number longer than maxNumberChars.

// invalidUTF8 is the reason given for text that is not valid UTF-8.
const invalidUTF8 = "must be valid UTF-8"

// maxNumberChars bounds a number's text: a float64 holds 17 significant
// digits, so a longer number cannot be meant as one.
const maxNumberChars = 64

// checkValues checks what Validate and Encode both need: every argument
// of a supported type, every parameter encodable as JSON, and each value
// one the buffer brings back unchanged.
func checkValues(req Request) error {
	for i, a := range req.Args {
		if reason := argProblem(a); reason != "" {
			return &InvalidError{Field: fmt.Sprintf("args[%d]", i), Reason: reason}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(req.Params)) {
		if !utf8.ValidString(k) {
			return &InvalidError{Field: "params", Reason: "a field name " + invalidUTF8}
		}
		// Marshal first: it refuses a cycle, which paramProblem would follow forever.
		if _, err := json.Marshal(req.Params[k]); err != nil {
			return &InvalidError{Field: "params." + k, Reason: "cannot be encoded as JSON: " + err.Error()}
		}
		if field, reason := paramProblem(reflect.ValueOf(req.Params[k]), "params."+k); reason != "" {
			return &InvalidError{Field: field, Reason: reason}
		}
	}
	return nil
}

// argProblem says why a SQL argument cannot be buffered and bound, or "".
func argProblem(v any) string {
	switch x := v.(type) {
	case nil, time.Time:
		return ""
	case json.Number:
		return numberProblem(x)
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.String:
		if !utf8.ValidString(rv.String()) {
			return invalidUTF8
		}
		return ""
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return ""
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return uintProblem(rv.Uint())
	case reflect.Float32, reflect.Float64:
		if f := rv.Float(); math.IsNaN(f) || math.IsInf(f, 0) {
			return fmt.Sprintf("%v cannot be buffered as JSON", f)
		}
		return ""
	}
	return fmt.Sprintf("type %T is not supported: use a string, number, bool, nil or time.Time", v)
}

// numberProblem says why a JSON number cannot be buffered and sent as
// given, or "".
func numberProblem(n json.Number) string {
	s := n.String()
	if len(s) > maxNumberChars {
		return fmt.Sprintf("a number of %d characters is longer than %d: send it as a string", len(s), maxNumberChars)
	}
	f, err := strconv.ParseFloat(s, 64)
	mantissa, _, _ := strings.Cut(strings.ToLower(s), "e")
	switch {
	case err != nil && !errors.Is(err, strconv.ErrRange):
		return fmt.Sprintf("%q is not a number", s)
	case math.IsInf(f, 0) || (f == 0 && strings.ContainsAny(mantissa, "123456789")):
		// Past float64's range: ±Inf, which no attempt can encode, or 0.
		return fmt.Sprintf("%s is out of the range of a float64: send it as a string", s)
	case isInteger(n):
		if _, err := n.Int64(); err != nil {
			// As a float it would be rounded: refuse rather than store another number.
			return fmt.Sprintf("%s does not fit in an int64: send it as a string", s)
		}
	}
	return ""
}

// uintProblem refuses an unsigned integer past MaxInt64: it would come
// back from the buffer as a rounded float.
func uintProblem(u uint64) string {
	if u > math.MaxInt64 {
		return fmt.Sprintf("%d does not fit in an int64: send it as a string", u)
	}
	return ""
}

// isInteger reports a JSON number written without a fraction or exponent.
func isInteger(n json.Number) bool { return !strings.ContainsAny(n.String(), ".eE") }

var (
	jsonMarshaler = reflect.TypeFor[json.Marshaler]()
	textMarshaler = reflect.TypeFor[encoding.TextMarshaler]()
)

// paramProblem finds what in a call parameter, however deep, the buffer
// would not bring back unchanged: text or a field name that is not valid
// UTF-8, a number that does not fit. It returns the field, named as the
// JSON names it ("params.order.lines[1]"), and the reason; "" and "" when
// there is none. A value that encodes itself (time.Time) is left to its
// encoder.
func paramProblem(v reflect.Value, field string) (string, string) {
	if !v.IsValid() || v.Type().Implements(jsonMarshaler) || v.Type().Implements(textMarshaler) {
		return "", ""
	}
	if n, ok := v.Interface().(json.Number); ok {
		return field, numberProblem(n)
	}
	switch v.Kind() {
	case reflect.String:
		if !utf8.ValidString(v.String()) {
			return field, invalidUTF8
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return field, uintProblem(v.Uint())
	case reflect.Interface, reflect.Pointer:
		if !v.IsNil() {
			return paramProblem(v.Elem(), field)
		}
	case reflect.Map:
		return mapProblem(v, field)
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return "", "" // bytes: encoded as base64 text
		}
		for i := range v.Len() {
			if f, reason := paramProblem(v.Index(i), fmt.Sprintf("%s[%d]", field, i)); reason != "" {
				return f, reason
			}
		}
	case reflect.Struct:
		return structProblem(v, field)
	}
	return "", ""
}

// mapProblem is paramProblem for a map, its keys in order.
func mapProblem(v reflect.Value, field string) (string, string) {
	keys := v.MapKeys()
	slices.SortFunc(keys, func(a, b reflect.Value) int { return cmp.Compare(fmt.Sprint(a), fmt.Sprint(b)) })
	for _, k := range keys {
		if k.Kind() == reflect.String && !utf8.ValidString(k.String()) {
			return field, "a field name " + invalidUTF8
		}
		if f, reason := paramProblem(v.MapIndex(k), fmt.Sprintf("%s.%v", field, k)); reason != "" {
			return f, reason
		}
	}
	return "", ""
}

// structProblem is paramProblem for a struct: the fields JSON encodes,
// by their JSON names.
func structProblem(v reflect.Value, field string) (string, string) {
	for i := range v.NumField() {
		sf := v.Type().Field(i)
		name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if !sf.IsExported() || name == "-" {
			continue
		}
		if name == "" {
			name = sf.Name
		}
		if f, reason := paramProblem(v.Field(i), field+"."+name); reason != "" {
			return f, reason
		}
	}
	return "", ""
}
