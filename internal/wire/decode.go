package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"
)

// requestFields are the field names of a Request, as they must be spelled.
var requestFields = [...]string{"zone", "key", "keys", "cost"}

// DecodeRequest decodes raw, a whole request body, into a Request. It is
// stricter than encoding/json, so that no two different bodies share a
// counter and no body means something other than what it says:
//
//   - the body is valid UTF-8 and no string escapes a lone surrogate
//     ("\ud800"): encoding/json would turn both into U+FFFD, so that
//     "\xff\xfe", "\x80\x81" and "\ufffd\ufffd" named one key;
//   - it is one JSON object and nothing follows it;
//   - its field names are spelled exactly "zone", "key", "keys" and "cost"
//     (encoding/json also takes "ZONE" and "Zone"), none twice, no other.
//
// The error says what is wrong, quoting at most a field name.
func DecodeRequest(raw []byte) (*Request, error) {
	if !utf8.Valid(raw) {
		return nil, errors.New("the body is not valid UTF-8")
	}
	if err := checkSurrogates(raw); err != nil {
		return nil, err
	}
	if err := checkFields(raw); err != nil {
		return nil, err
	}
	// The names are exact and unique, so encoding/json's case-insensitive
	// matching cannot pick a different field, and none is unknown.
	var req Request
	if err := json.Unmarshal(raw, &req); err != nil {
		return nil, TypeError(err, requestTypes)
	}
	return &req, nil
}

// requestTypes say what each field of a Request holds, for TypeError.
var requestTypes = map[string]string{
	"zone": "a string",
	"key":  "a string",
	"keys": "an array of strings",
	"cost": "an integer",
}

// TypeError rewrites err, an error of encoding/json, when it says that a
// JSON value does not fit a Go type (*json.UnmarshalTypeError), whose text
// names Go types ("cannot unmarshal array into Go value of type
// wire.Request"): as what the body should be, a JSON object with fields,
// or for a field, what fields says it holds. Other errors are returned as
// they are.
func TypeError(err error, fields map[string]string) error {
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) {
		return err
	}
	if te.Field == "" {
		return fmt.Errorf("the body is a JSON %s; want a JSON object such as {\"zone\": \"name\", \"key\": \"k\"}", te.Value)
	}
	if want, ok := fields[te.Field]; ok {
		return fmt.Errorf("field %q is a JSON %s; want %s", te.Field, truncate(te.Value, 40), want)
	}
	return fmt.Errorf("field %q is a JSON %s, which does not fit", truncate(te.Field, 32), truncate(te.Value, 40))
}

// checkFields refuses field names of the top-level object of raw that are
// not requestFields exactly, or repeat one. It only looks at names: what
// is not JSON is left to the decoder to report.
func checkFields(raw []byte) error {
	var seen [len(requestFields)]bool
	depth := 0
	for i := 0; i < len(raw); i++ {
		switch raw[i] {
		case '{', '[':
			depth++
		case '}', ']':
			depth--
		case '"':
			end := stringEnd(raw, i)
			if end < 0 {
				return nil
			}
			if depth == 1 && isNameAt(raw, end+1) {
				if err := checkName(raw[i:end+1], &seen); err != nil {
					return err
				}
			}
			i = end
		}
	}
	return nil
}

// stringEnd returns the index of the quote ending the string that starts
// at raw[start], or -1.
func stringEnd(raw []byte, start int) int {
	for i := start + 1; i < len(raw); i++ {
		switch raw[i] {
		case '\\':
			i++
		case '"':
			return i
		}
	}
	return -1
}

// isNameAt reports whether a ':' follows raw[i:] after white space: the
// string before was an object member's name.
func isNameAt(raw []byte, i int) bool {
	for ; i < len(raw); i++ {
		switch raw[i] {
		case ' ', '\t', '\n', '\r':
		case ':':
			return true
		default:
			return false
		}
	}
	return false
}

// checkName checks one quoted member name against requestFields and the
// names seen so far.
func checkName(quoted []byte, seen *[len(requestFields)]bool) error {
	name := string(quoted[1 : len(quoted)-1]) // no allocation for the comparisons below
	if bytes.IndexByte(quoted, '\\') >= 0 {
		if err := json.Unmarshal(quoted, &name); err != nil {
			return nil // left to the decoder
		}
	}
	i := 0
	for i < len(requestFields) && requestFields[i] != name {
		i++
	}
	switch {
	case i == len(requestFields):
		return fmt.Errorf("unknown field %q (fields: zone, key, keys, cost; names are case-sensitive)", truncate(name, 32))
	case seen[i]:
		return fmt.Errorf("field %q appears twice", name)
	}
	seen[i] = true
	return nil
}

// checkSurrogates refuses a \u escape of a UTF-16 surrogate that is not
// half of a pair: it stands for no character.
func checkSurrogates(raw []byte) error {
	inString := false
	for i := 0; i < len(raw); i++ {
		switch c := raw[i]; {
		case c == '"':
			inString = !inString
		case c == '\\' && inString && i+1 < len(raw):
			if raw[i+1] != 'u' {
				i++ // \", \\ and the like
				continue
			}
			v, ok := hex4(raw, i+2)
			if !ok || v < 0xD800 || v >= 0xE000 {
				i++
				continue
			}
			low, ok := uint16(0), false
			if v < 0xDC00 && i+7 < len(raw) && raw[i+6] == '\\' && raw[i+7] == 'u' {
				low, ok = hex4(raw, i+8)
			}
			if !ok || low < 0xDC00 || low >= 0xE000 {
				return fmt.Errorf(`a string escapes a lone UTF-16 surrogate (\u%04x), which stands for no character`, v)
			}
			i += 11 // both escapes
		}
	}
	return nil
}

// hex4 reads 4 hex digits at raw[i:].
func hex4(raw []byte, i int) (uint16, bool) {
	if i+4 > len(raw) {
		return 0, false
	}
	var v uint16
	for _, c := range raw[i : i+4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		v = v<<4 | uint16(c)
	}
	return v, true
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
