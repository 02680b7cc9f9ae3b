// Package jsonscan walks JSON bytes without building values: the front
// doors read a request's top-level members and the gateway reads a
// response's usage object this way, because decoding either with
// encoding/json cost more than the rest of the request path.
package jsonscan

import "errors"

// ErrBadJSON reports bytes that are not the JSON expected.
var ErrBadJSON = errors.New("request body must be a JSON object")

// SkipWS returns the index of the first non-space byte at or after b[i].
func SkipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index after the string starting at b[i] == '"'.
func SkipString(b []byte, i int) (int, error) {
	if i >= len(b) || b[i] != '"' {
		return 0, ErrBadJSON
	}
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1, nil
		}
	}
	return 0, ErrBadJSON
}

// skipValue returns the index after the value starting at b[i].
func SkipValue(b []byte, i int) (int, error) {
	if i >= len(b) {
		return 0, ErrBadJSON
	}
	switch b[i] {
	case '"':
		return SkipString(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				e, err := SkipString(b, i)
				if err != nil {
					return 0, err
				}
				i = e - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1, nil
				}
			}
		}
		return 0, ErrBadJSON
	default:
		j := i
		for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] != ' ' && b[j] != '\n' && b[j] != '\t' && b[j] != '\r' {
			j++
		}
		if j == i {
			return 0, ErrBadJSON
		}
		return j, nil
	}
}

// eachMember calls f with every member of the JSON object b (key without
// quotes, raw value), stopping at f's first error.
func EachMember(b []byte, f func(key, val []byte) error) error {
	i := SkipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return ErrBadJSON
	}
	i++
	for {
		i = SkipWS(b, i)
		if i < len(b) && b[i] == '}' {
			return nil
		}
		kEnd, err := SkipString(b, i)
		if err != nil {
			return err
		}
		key := b[i+1 : kEnd-1]
		i = SkipWS(b, kEnd)
		if i >= len(b) || b[i] != ':' {
			return ErrBadJSON
		}
		vStart := SkipWS(b, i+1)
		vEnd, err := SkipValue(b, vStart)
		if err != nil {
			return err
		}
		if err := f(key, b[vStart:vEnd]); err != nil {
			return err
		}
		i = SkipWS(b, vEnd)
		if i >= len(b) {
			return ErrBadJSON
		}
		switch b[i] {
		case ',':
			i++
		case '}':
			return nil
		default:
			return ErrBadJSON
		}
	}
}
