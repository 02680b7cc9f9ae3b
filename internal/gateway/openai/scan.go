package openai

import (
	"bytes"
	"errors"
	"strconv"
)

// topLevel is what the front door needs from a request body, found by one
// pass over the bytes without building a value tree.
type topLevel struct {
	model    string
	hasModel bool
	stream   bool
	cutFrom  int // the model member's bytes (with one adjacent comma)
	cutTo    int
}

var errBadJSON = errors.New("request body must be a JSON object")

// scanTop reads the top-level members "model" and "stream" of a JSON object
// and where the model member sits, so it can be cut out cheaply. Nested
// values are skipped by matching brackets outside strings; full validation
// is the engine's job.
func scanTop(b []byte) (topLevel, error) {
	var t topLevel
	i := skipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return t, errBadJSON
	}
	i++
	prevComma := -1 // position of the comma before the current member
	for {
		i = skipWS(b, i)
		if i >= len(b) {
			return t, errBadJSON
		}
		if b[i] == '}' {
			if skipWS(b, i+1) != len(b) {
				return t, errBadJSON
			}
			return t, nil
		}
		memberStart := i
		kEnd, err := skipString(b, i)
		if err != nil {
			return t, err
		}
		key := b[i+1 : kEnd-1]
		i = skipWS(b, kEnd)
		if i >= len(b) || b[i] != ':' {
			return t, errBadJSON
		}
		vStart := skipWS(b, i+1)
		vEnd, err := skipValue(b, vStart)
		if err != nil {
			return t, err
		}
		switch string(key) {
		case "model":
			if b[vStart] == '"' {
				s, err := strconv.Unquote(string(b[vStart:vEnd]))
				if err != nil {
					return t, errBadJSON
				}
				t.model = s
			} else if string(b[vStart:vEnd]) != "null" {
				return t, errModelType
			}
			t.hasModel = true
			t.cutFrom, t.cutTo = memberStart, vEnd
		case "stream":
			t.stream = string(b[vStart:vEnd]) == "true"
		}
		i = skipWS(b, vEnd)
		if i >= len(b) {
			return t, errBadJSON
		}
		switch b[i] {
		case ',':
			if t.hasModel && t.cutFrom == memberStart {
				t.cutTo = i + 1 // take the following comma
			}
			prevComma = i
			i++
		case '}':
			if t.hasModel && t.cutFrom == memberStart && prevComma >= 0 {
				t.cutFrom = prevComma // last member: take the comma before it
			}
		default:
			return t, errBadJSON
		}
	}
}

var errModelType = errors.New("model must be a string")

// cutModel returns b with the model member cut out (b itself when there is
// none): the engines behind an endpoint accept an absent model. It works in
// place, moving b's own bytes over the member, so b must not be used
// afterwards.
func (t topLevel) cutModel(b []byte) []byte {
	if !t.hasModel {
		return b
	}
	n := copy(b[t.cutFrom:], b[t.cutTo:])
	return b[:t.cutFrom+n]
}

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index after the string starting at b[i] == '"'.
func skipString(b []byte, i int) (int, error) {
	if i >= len(b) || b[i] != '"' {
		return 0, errBadJSON
	}
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1, nil
		}
	}
	return 0, errBadJSON
}

// skipValue returns the index after the value starting at b[i].
func skipValue(b []byte, i int) (int, error) {
	if i >= len(b) {
		return 0, errBadJSON
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				e, err := skipString(b, i)
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
		return 0, errBadJSON
	default:
		j := i
		for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] != ' ' && b[j] != '\n' && b[j] != '\t' && b[j] != '\r' {
			j++
		}
		if j == i {
			return 0, errBadJSON
		}
		return j, nil
	}
}

// eachMember calls f with every member of the JSON object b (key without
// quotes, raw value), stopping at f's first error.
func eachMember(b []byte, f func(key, val []byte) error) error {
	i := skipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return errBadJSON
	}
	i++
	for {
		i = skipWS(b, i)
		if i < len(b) && b[i] == '}' {
			return nil
		}
		kEnd, err := skipString(b, i)
		if err != nil {
			return err
		}
		key := b[i+1 : kEnd-1]
		i = skipWS(b, kEnd)
		if i >= len(b) || b[i] != ':' {
			return errBadJSON
		}
		vStart := skipWS(b, i+1)
		vEnd, err := skipValue(b, vStart)
		if err != nil {
			return err
		}
		if err := f(key, b[vStart:vEnd]); err != nil {
			return err
		}
		i = skipWS(b, vEnd)
		if i >= len(b) {
			return errBadJSON
		}
		switch b[i] {
		case ',':
			i++
		case '}':
			return nil
		default:
			return errBadJSON
		}
	}
}

// parseUsage reads prompt_tokens, completion_tokens and
// prompt_tokens_details.cached_tokens from an OpenAI usage object without
// building a value (json.Unmarshal here was the front door's largest own
// cost per request). ok is false for anything unexpected (a non-integer
// count, escapes in keys, bad JSON): the caller then decodes it properly.
func parseUsage(b []byte) (prompt, completion, cached int, ok bool) {
	num := func(v []byte, dst *int) error {
		if string(v) == "null" {
			return nil
		}
		n, err := strconv.Atoi(string(v))
		if err != nil {
			return err
		}
		*dst = n
		return nil
	}
	err := eachMember(b, func(key, val []byte) error {
		switch string(key) {
		case "prompt_tokens":
			return num(val, &prompt)
		case "completion_tokens":
			return num(val, &completion)
		case "prompt_tokens_details":
			if string(val) == "null" {
				return nil
			}
			return eachMember(val, func(k, v []byte) error {
				if string(k) == "cached_tokens" {
					return num(v, &cached)
				}
				return nil
			})
		}
		if bytes.IndexByte(key, '\\') >= 0 {
			return errBadJSON // an escaped key could spell one of the above
		}
		return nil
	})
	return prompt, completion, cached, err == nil
}
