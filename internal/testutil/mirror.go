package testutil

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"testing"
)

// The mirror tests guard the translations from the YAML config's structs
// (package config) to the engines' own types: FillDistinct gives every
// field of a config value its own non-zero value, and RequireCarried checks
// that each of those values reached the translated value and that no field
// of it stayed zero. A field added on either side and not translated fails.

// FillDistinct sets every field reachable from ptr (nested structs, one
// entry in each map and slice) to a value no other field has: strings
// "v1", "v2", …, numbers and durations 1, 2, … (durations in seconds),
// bools true.
func FillDistinct(ptr any) {
	n := 0
	fill(reflect.ValueOf(ptr).Elem(), &n)
}

func fill(v reflect.Value, n *int) {
	*n++
	switch v.Kind() {
	case reflect.String:
		v.SetString("v" + strconv.Itoa(*n))
	case reflect.Int, reflect.Int64:
		if v.Type().String() == "time.Duration" {
			v.SetInt(int64(*n) * 1e9)
		} else {
			v.SetInt(int64(*n))
		}
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Struct:
		for i := range v.NumField() {
			fill(v.Field(i), n)
		}
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(v.Index(0), n)
	case reflect.Map:
		key, val := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(key, n)
		fill(val, n)
		v.Set(reflect.MakeMap(v.Type()))
		v.SetMapIndex(key, val)
	default:
		panic(fmt.Sprintf("FillDistinct: no value for a %s", v.Type()))
	}
}

// RequireSet checks that no field reachable from v is zero.
func RequireSet(t testing.TB, v any) {
	t.Helper()
	var zero []string
	leaves(reflect.ValueOf(v), "", new([]string), &zero)
	for _, z := range zero {
		t.Errorf("%T%s is zero after translation: a field the translation does not set?", v, z)
	}
}

// RequireCarried checks that every leaf value of from (strings, numbers,
// map keys) is a leaf of to, and that no field of to is zero. folded names
// the values of from that the translation turns into something else (an
// enumerated mode into a bool, an environment variable's name into its
// value) and the test checks by other means.
func RequireCarried(t testing.TB, from, to any, folded ...string) {
	t.Helper()
	RequireSet(t, to)
	var want, got []string
	leaves(reflect.ValueOf(from), "", &want, nil)
	leaves(reflect.ValueOf(to), "", &got, nil)
	for _, w := range want {
		if !slices.Contains(got, w) && !slices.Contains(folded, w) {
			t.Errorf("%s of %T is not carried to %T: a field the translation forgets?", w, from, to)
		}
	}
}

// leaves appends the text of every string and number under v to out, and
// the path of every zero field to zero (when not nil).
func leaves(v reflect.Value, path string, out, zero *[]string) {
	if zero != nil && v.IsZero() {
		*zero = append(*zero, path)
		return
	}
	switch v.Kind() {
	case reflect.String:
		*out = append(*out, v.String())
	case reflect.Int, reflect.Int64, reflect.Int32, reflect.Uint8:
		*out = append(*out, fmt.Sprint(v.Interface()))
	case reflect.Pointer, reflect.Interface:
		leaves(v.Elem(), path, out, zero)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				leaves(v.Field(i), path+"."+v.Type().Field(i).Name, out, zero)
			}
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			leaves(v.Index(i), fmt.Sprintf("%s[%d]", path, i), out, zero)
		}
	case reflect.Map:
		for _, k := range v.MapKeys() {
			leaves(k, path, out, nil)
			leaves(v.MapIndex(k), fmt.Sprintf("%s[%v]", path, k), out, zero)
		}
	}
}
