package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/capstan-dev/capstan/internal/gateway/internal/jsonscan"
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

// errBadJSON is the scanner's error for a body that is not a JSON object.
var errBadJSON = jsonscan.ErrBadJSON

// scanTop reads the top-level members "model" and "stream" of a JSON object
// and where the model member sits, so it can be cut out cheaply. Nested
// values are skipped by matching brackets outside strings; full validation
// is the engine's job.
func scanTop(b []byte) (topLevel, error) {
	var t topLevel
	i := jsonscan.SkipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return t, errBadJSON
	}
	i++
	prevComma := -1 // position of the comma before the current member
	for {
		i = jsonscan.SkipWS(b, i)
		if i >= len(b) {
			return t, errBadJSON
		}
		if b[i] == '}' {
			if jsonscan.SkipWS(b, i+1) != len(b) {
				return t, errBadJSON
			}
			return t, nil
		}
		memberStart := i
		kEnd, err := jsonscan.SkipString(b, i)
		if err != nil {
			return t, err
		}
		key := b[i+1 : kEnd-1]
		if bytes.IndexByte(key, '\\') >= 0 {
			// An escaped key ("temp\u0065rature") names the same member
			// for every JSON decoder behind the door.
			var k string
			if json.Unmarshal(b[i:kEnd], &k) != nil {
				return t, errBadJSON
			}
			key = []byte(k)
		}
		i = jsonscan.SkipWS(b, kEnd)
		if i >= len(b) || b[i] != ':' {
			return t, errBadJSON
		}
		vStart := jsonscan.SkipWS(b, i+1)
		vEnd, err := jsonscan.SkipValue(b, vStart)
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
		case "temperature", "top_p", "frequency_penalty", "presence_penalty", "max_tokens", "max_completion_tokens",
			"n", "best_of", "seed", "top_logprobs":
			if err := checkNumber(string(key), b[vStart:vEnd]); err != nil {
				return t, err
			}
		}
		i = jsonscan.SkipWS(b, vEnd)
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

// paramError is a request parameter of the wrong type or out of range; the
// handler answers it as OpenAI does, a 400 naming the parameter.
type paramError struct {
	param, code, msg string
}

func (e *paramError) Error() string { return e.msg }

// numberRule is the type and range of a numeric request parameter.
type numberRule struct {
	integer  bool
	min, max float64
}

// numberRules are OpenAI's ranges for the numeric parameters. Checked here
// because engines differ in what they do with a string or a NaN-like value
// (the simulated engine ignored them); OpenAI refuses them.
var numberRules = map[string]numberRule{
	"temperature":           {min: 0, max: 2},
	"top_p":                 {min: 0, max: 1},
	"frequency_penalty":     {min: -2, max: 2},
	"presence_penalty":      {min: -2, max: 2},
	"max_tokens":            {integer: true, min: 1, max: math.MaxInt32},
	"max_completion_tokens": {integer: true, min: 1, max: math.MaxInt32},
	"n":                     {integer: true, min: 1, max: 128},
	"best_of":               {integer: true, min: 1, max: 128},
	"seed":                  {integer: true, min: math.MinInt64, max: math.MaxInt64},
	"top_logprobs":          {integer: true, min: 0, max: 20},
}

// checkNumber checks one numeric parameter's raw JSON value; null means
// unset, as OpenAI takes it.
func checkNumber(param string, v []byte) error {
	if string(v) == "null" {
		return nil
	}
	rule := numberRules[param]
	kind := "decimal"
	if rule.integer {
		kind = "integer"
	}
	if !isJSONNumber(v) {
		got := "a " + jsonKind(v)
		return &paramError{param: param, code: "invalid_type",
			msg: fmt.Sprintf("Invalid type for '%s': expected %s, but got %s instead.", param, article(kind), got)}
	}
	var x float64
	if rule.integer {
		n, err := strconv.ParseInt(string(v), 10, 64)
		switch {
		case errors.Is(err, strconv.ErrRange):
			return rangeError(param, kind, rule, v, v[0] == '-')
		case err != nil: // a fraction or an exponent
			return &paramError{param: param, code: "invalid_type",
				msg: fmt.Sprintf("Invalid type for '%s': expected an integer, but got a decimal instead.", param)}
		}
		x = float64(n)
	} else {
		// Past float64's range ParseFloat gives ±Inf, which the bounds catch.
		x, _ = strconv.ParseFloat(string(v), 64)
	}
	if x < rule.min || x > rule.max {
		return rangeError(param, kind, rule, v, x < rule.min)
	}
	return nil
}

func rangeError(param, kind string, rule numberRule, v []byte, below bool) error {
	if below {
		return &paramError{param: param, code: kind + "_below_min_value",
			msg: fmt.Sprintf("Invalid '%s': %s below minimum value. Expected a value >= %g, but got %s instead.", param, kind, rule.min, v)}
	}
	return &paramError{param: param, code: kind + "_above_max_value",
		msg: fmt.Sprintf("Invalid '%s': %s above maximum value. Expected a value <= %g, but got %s instead.", param, kind, rule.max, v)}
}
func article(kind string) string {
	if kind == "integer" {
		return "an integer"
	}
	return "a decimal"
}

// jsonKind names the JSON type of a raw value for an error message.
func jsonKind(v []byte) string {
	switch {
	case len(v) == 0:
		return "nothing"
	case v[0] == '"':
		return "string"
	case v[0] == '{':
		return "object"
	case v[0] == '[':
		return "array"
	case string(v) == "true" || string(v) == "false":
		return "boolean"
	default:
		return "malformed value"
	}
}

// isJSONNumber reports whether v is exactly a JSON number (RFC 8259):
// strconv alone would also take "Inf", "NaN", hex and underscores.
func isJSONNumber(v []byte) bool {
	i := 0
	if i < len(v) && v[i] == '-' {
		i++
	}
	switch {
	case i < len(v) && v[i] == '0':
		i++
	case i < len(v) && v[i] >= '1' && v[i] <= '9':
		for i < len(v) && v[i] >= '0' && v[i] <= '9' {
			i++
		}
	default:
		return false
	}
	if i < len(v) && v[i] == '.' {
		i++
		if i >= len(v) || v[i] < '0' || v[i] > '9' {
			return false
		}
		for i < len(v) && v[i] >= '0' && v[i] <= '9' {
			i++
		}
	}
	if i < len(v) && (v[i] == 'e' || v[i] == 'E') {
		i++
		if i < len(v) && (v[i] == '+' || v[i] == '-') {
			i++
		}
		if i >= len(v) || v[i] < '0' || v[i] > '9' {
			return false
		}
		for i < len(v) && v[i] >= '0' && v[i] <= '9' {
			i++
		}
	}
	return i == len(v)
}

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
