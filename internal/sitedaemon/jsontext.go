package sitedaemon

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// checkJSONText refuses what decoding a request would quietly change: text
// that is not valid UTF-8, as raw bytes or as an escaped lone UTF-16
// surrogate ("\udc00"), which encoding/json replaces with U+FFFD, and a
// key given twice in one object, of which it keeps the last. body holds
// one JSON value encoding/json has decoded, so its syntax is sound. The
// error names the field as the SDK's errors do ("params.o.lines[1]"): the
// SDK refuses the same text in Go strings, where nothing replaced it yet.
func checkJSONText(body []byte) error {
	s := textScanner{data: body}
	return s.value("")
}

// textScanner walks a request's JSON text.
type textScanner struct {
	data []byte
	pos  int
}

func (s *textScanner) value(field string) error {
	s.skipSpace()
	switch s.data[s.pos] {
	case '{':
		return s.object(field)
	case '[':
		return s.array(field)
	case '"':
		if _, reason := s.str(); reason != "" {
			return invalidText(fieldOr(field) + ": " + reason)
		}
		return nil
	}
	for s.pos < len(s.data) && strings.IndexByte(",]} \t\r\n", s.data[s.pos]) < 0 {
		s.pos++ // a number, true, false or null
	}
	return nil
}

func (s *textScanner) object(field string) error {
	s.pos++
	seen := map[string]bool{}
	for {
		s.skipSpace()
		switch s.data[s.pos] {
		case '}':
			s.pos++
			return nil
		case ',':
			s.pos++
			s.skipSpace()
		}
		key, reason := s.str()
		if reason != "" {
			return invalidText(fieldOr(field) + ": a field name " + reason)
		}
		child := key
		if field != "" {
			child = field + "." + key
		}
		if seen[key] {
			return invalidText(child + ": given twice; a request gives each field once")
		}
		seen[key] = true
		s.skipSpace()
		s.pos++ // ':'
		if err := s.value(child); err != nil {
			return err
		}
	}
}

func (s *textScanner) array(field string) error {
	s.pos++
	for i := 0; ; i++ {
		s.skipSpace()
		switch s.data[s.pos] {
		case ']':
			s.pos++
			return nil
		case ',':
			s.pos++
		}
		if err := s.value(fmt.Sprintf("%s[%d]", field, i)); err != nil {
			return err
		}
	}
}

// str reads the string at s.pos and returns it decoded, or the reason it
// is not valid text.
func (s *textScanner) str() (string, string) {
	start, escaped := s.pos, false
	s.pos++
	for {
		c := s.data[s.pos]
		switch {
		case c == '"':
			s.pos++
			return s.decoded(start, escaped), ""
		case c == '\\' && s.data[s.pos+1] == 'u':
			escaped = true
			if reason := s.unicodeEscape(); reason != "" {
				return "", reason
			}
		case c == '\\':
			escaped = true
			s.pos += 2
		case c < utf8.RuneSelf:
			s.pos++
		default:
			r, size := utf8.DecodeRune(s.data[s.pos:])
			if r == utf8.RuneError && size == 1 {
				return "", fmt.Sprintf("must be valid UTF-8 (byte 0x%02x at offset %d of the request is not)", c, s.pos)
			}
			s.pos += size
		}
	}
}

// unicodeEscape reads a \uXXXX escape, and the low half after a high
// surrogate: a surrogate alone is no character.
func (s *textScanner) unicodeEscape() string {
	r := s.hex4(s.pos + 2)
	s.pos += 6
	if !utf16.IsSurrogate(r) {
		return ""
	}
	if r < 0xdc00 && s.pos+6 <= len(s.data) && s.data[s.pos] == '\\' && s.data[s.pos+1] == 'u' {
		if low := s.hex4(s.pos + 2); low >= 0xdc00 && low <= 0xdfff {
			s.pos += 6
			return ""
		}
	}
	return fmt.Sprintf(`must be valid UTF-8 (\u%04x is half of a UTF-16 surrogate pair, not a character)`, r)
}

// hex4 is the value of the four hex digits at i (sound: decoded already),
// or -1 where there are none (a "\u" not followed by four digits).
func (s *textScanner) hex4(i int) rune {
	if i+4 > len(s.data) {
		return -1
	}
	var r rune
	for _, c := range s.data[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return -1
		}
	}
	return r
}

// decoded is the string from start to s.pos: as it stands, or through
// encoding/json when it has escapes.
func (s *textScanner) decoded(start int, escaped bool) string {
	raw := s.data[start:s.pos]
	if !escaped {
		return string(raw[1 : len(raw)-1])
	}
	var out string
	_ = json.Unmarshal(raw, &out) // valid: decoded once already
	return out
}

func (s *textScanner) skipSpace() {
	for s.pos < len(s.data) && strings.IndexByte(" \t\r\n", s.data[s.pos]) >= 0 {
		s.pos++
	}
}

func fieldOr(field string) string {
	if field == "" {
		return "request"
	}
	return field
}

func invalidText(msg string) error { return &requestError{http.StatusBadRequest, msg} }
