package openai

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestScanTop(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		model   string
		stream  bool
		without string
		wantErr bool
	}{
		{name: "first member", body: `{"model":"m1","prompt":"hi"}`, model: "m1", without: `{"prompt":"hi"}`},
		{name: "middle member", body: `{"a":1, "model" : "m2" ,"stream":true}`, model: "m2", stream: true, without: `{"a":1, "stream":true}`},
		{name: "last member", body: `{"stream":false,"model":"m3"}`, model: "m3", without: `{"stream":false}`},
		{name: "only member", body: ` {"model":"m4"} `, model: "m4", without: ` {} `},
		{name: "nested model untouched", body: `{"messages":[{"content":"\"model\": x","model":"no"}],"model":"top"}`, model: "top",
			without: `{"messages":[{"content":"\"model\": x","model":"no"}]}`},
		{name: "escaped name", body: `{"model":"a\u00e9\"b"}`, model: "aé\"b", without: `{}`},
		{name: "no model", body: `{"prompt":"x"}`, without: `{"prompt":"x"}`},
		{name: "null model", body: `{"model":null,"prompt":"x"}`, without: `{"prompt":"x"}`},
		{name: "model not a string", body: `{"model":5}`, wantErr: true},
		{name: "array", body: `[1,2]`, wantErr: true},
		{name: "truncated", body: `{"model":"m","prompt":"x`, wantErr: true},
		{name: "trailing garbage", body: `{"model":"m"} x`, wantErr: true},
		{name: "empty", body: ``, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			top, err := scanTop([]byte(tt.body))
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if tt.wantErr {
				return
			}
			if top.model != tt.model || top.stream != tt.stream {
				t.Fatalf("model %q stream %v", top.model, top.stream)
			}
			got := string(top.cutModel([]byte(tt.body)))
			if got != tt.without {
				t.Fatalf("without model = %s, want %s", got, tt.without)
			}
			if !json.Valid([]byte(got)) {
				t.Fatalf("rewritten body is not JSON: %s", got)
			}
		})
	}
}

func BenchmarkScanTop(b *testing.B) {
	body := []byte(`{"model":"qwen","messages":[{"role":"user","content":"` + string(make([]byte, 0)) + `hello there, how are you doing today?"}],"max_tokens":16,"stream":false}`)
	scratch := make([]byte, 0, len(body))
	b.ReportAllocs()
	for b.Loop() {
		top, err := scanTop(body)
		if err != nil {
			b.Fatal(err)
		}
		_ = top.cutModel(append(scratch[:0], body...))
	}
}

// Wrongly typed or out-of-range numeric parameters are refused naming the
// parameter (a string temperature used to pass straight through).
func TestScanTopChecksNumericParams(t *testing.T) {
	tests := []struct {
		body, param, code string // param "" = accepted
	}{
		{`{"model":"m","temperature":0.7,"top_p":1,"max_tokens":16,"n":1,"seed":-5,"presence_penalty":-2}`, "", ""},
		{`{"model":"m","temperature":null,"max_tokens":null}`, "", ""},
		{`{"model":"m","temperature":1e0,"frequency_penalty":2.0}`, "", ""},
		{`{"model":"m","seed":9223372036854775807}`, "", ""},
		{`{"model":"m","temperature":"0.7"}`, "temperature", "invalid_type"},
		{`{"model":"m","temperature":true}`, "temperature", "invalid_type"},
		{`{"model":"m","temperature":[1]}`, "temperature", "invalid_type"},
		{`{"model":"m","temperature":NaN}`, "temperature", "invalid_type"},
		{`{"model":"m","temperature":Infinity}`, "temperature", "invalid_type"},
		{`{"model":"m","temperature":0x1}`, "temperature", "invalid_type"},
		{`{"model":"m","temperature":01}`, "temperature", "invalid_type"},
		{`{"model":"m","temperature":-0.1}`, "temperature", "decimal_below_min_value"},
		{`{"model":"m","temperature":2.5}`, "temperature", "decimal_above_max_value"},
		{`{"model":"m","temperature":1e400}`, "temperature", "decimal_above_max_value"},
		{`{"model":"m","top_p":"1"}`, "top_p", "invalid_type"},
		{`{"model":"m","top_p":1.01}`, "top_p", "decimal_above_max_value"},
		{`{"model":"m","max_tokens":"16"}`, "max_tokens", "invalid_type"},
		{`{"model":"m","max_tokens":1.5}`, "max_tokens", "invalid_type"},
		{`{"model":"m","max_tokens":0}`, "max_tokens", "integer_below_min_value"},
		{`{"model":"m","max_tokens":99999999999999999999}`, "max_tokens", "integer_above_max_value"},
		{`{"model":"m","max_completion_tokens":-1}`, "max_completion_tokens", "integer_below_min_value"},
		{`{"model":"m","n":"2"}`, "n", "invalid_type"},
		{`{"model":"m","n":1000}`, "n", "integer_above_max_value"},
		{`{"model":"m","seed":-99999999999999999999}`, "seed", "integer_below_min_value"},
		{`{"model":"m","presence_penalty":-3}`, "presence_penalty", "decimal_below_min_value"},
		{`{"model":"m","temperature":1,"temperature":"x"}`, "temperature", "invalid_type"},
	}
	for _, tc := range tests {
		t.Run(tc.body, func(t *testing.T) {
			_, err := scanTop([]byte(tc.body))
			if tc.param == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			pe, ok := err.(*paramError)
			if !ok || pe.param != tc.param || pe.code != tc.code || !strings.Contains(pe.msg, tc.param) {
				t.Fatalf("err = %#v, want param %s code %s", err, tc.param, tc.code)
			}
		})
	}
}
