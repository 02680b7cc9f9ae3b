package openai_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/capstan-dev/capstan/internal/gateway"
	"github.com/capstan-dev/capstan/internal/gateway/openai"
)

// bounds are OpenAI's documented ranges, written out independently of the
// door's table so the fuzzer checks one against the other.
var bounds = map[string]struct {
	integer  bool
	min, max float64
}{
	"temperature": {false, 0, 2}, "top_p": {false, 0, 1}, "frequency_penalty": {false, -2, 2}, "presence_penalty": {false, -2, 2},
	"max_tokens": {true, 1, 1<<31 - 1}, "max_completion_tokens": {true, 1, 1<<31 - 1}, "n": {true, 1, 128}, "best_of": {true, 1, 128},
	"seed": {true, -1 << 63, 1<<63 - 1}, "top_logprobs": {true, 0, 20},
}

// invalidParam is the first parameter of body (as encoding/json reads it)
// whose value the door must refuse; "" when none is or body is not a JSON
// object encoding/json accepts.
func invalidParam(body []byte) string {
	var top map[string]json.RawMessage
	if json.Unmarshal(body, &top) != nil {
		return ""
	}
	for p, b := range bounds {
		raw, ok := top[p]
		if !ok || string(raw) == "null" {
			continue
		}
		d := json.NewDecoder(bytes.NewReader(raw))
		d.UseNumber()
		var v any
		if d.Decode(&v) != nil {
			return p
		}
		num, ok := v.(json.Number)
		if !ok {
			return p
		}
		if b.integer {
			n, err := strconv.ParseInt(string(num), 10, 64)
			if err != nil || float64(n) < b.min || float64(n) > b.max {
				return p
			}
			continue
		}
		f, err := num.Float64()
		if err != nil || f < b.min || f > b.max {
			return p
		}
	}
	return ""
}

// FuzzOpenAIRequest sends fuzzed bodies through the door's decoding and
// validation. No route exists, so nothing is ever forwarded: every answer
// is an error, which must be OpenAI's JSON shape, and a body with an
// out-of-range or wrongly typed number must be a 400.
func FuzzOpenAIRequest(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","messages":[{"role":"user","content":"hi"}],"temperature":0.7,"max_tokens":16}`,
		`{"model":"m","prompt":"x","temperature":"0.7"}`,
		`{"model":"m","prompt":"x","top_p":1.5,"n":0}`,
		`{"model":"m","seed":-9223372036854775808,"max_tokens":2147483647}`,
		`{"model":"m","max_tokens":1e3}`,
		`{"temp\u0065rature":5,"model":"m"}`,
		`{"model":"m","temperature":1,"temperature":-1}`,
		`{"model":null,"stream":true,"stream_options":{"include_usage":true}}`,
		`{"model":5}`, `[]`, `{`, ``, `{"model":"m"} x`,
	} {
		f.Add([]byte(s))
	}
	h := openai.NewHandler(gateway.New(gateway.Options{}), openai.Options{MaxBodyBytes: 1 << 16})
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, path := range []string{"/v1/chat/completions", "/v1/completions"} {
			req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			var e struct {
				Error *struct {
					Message string  `json:"message"`
					Type    string  `json:"type"`
					Param   *string `json:"param"`
				} `json:"error"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Error == nil || e.Error.Message == "" || e.Error.Type == "" {
				t.Fatalf("%s: answer is not an OpenAI error: %d %q", path, rec.Code, rec.Body.String())
			}
			if rec.Code < 400 {
				t.Fatalf("%s: status %d with no route", path, rec.Code)
			}
			if p := invalidParam(body); p != "" && rec.Code != http.StatusBadRequest && rec.Code != http.StatusRequestEntityTooLarge {
				t.Fatalf("%s: invalid %s accepted: %d %s", path, p, rec.Code, rec.Body.String())
			}
		}
	})
}
