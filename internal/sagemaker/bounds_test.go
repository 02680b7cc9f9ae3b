package sagemaker

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
)

// TestPageTokenBounds: a NextToken whose offset is past the list (up to
// MaxInt64, where offset+MaxResults wraps) is refused, never turned into a
// page or a wrapped token.
func TestPageTokenBounds(t *testing.T) {
	srv, _ := newPlansAPI(t)
	token := func(raw string) string { return base64.RawURLEncoding.EncodeToString([]byte(raw)) }
	for _, tc := range []struct{ op, body string }{
		{"ListTrainingPlans", `{"NextToken":"` + token(`{"o":9223372036854775807}`) + `"}`},
		{"ListTrainingPlans", `{"NextToken":"` + token(`{"o":1}`) + `"}`},
		{"ListEndpoints", `{"NextToken":"` + token(`{"o":9223372036854775807}`) + `"}`},
		{"ListModels", `{"NextToken":"` + token(`{"o":-1}`) + `","MaxResults":100}`},
	} {
		status, _, raw := call(t, srv.URL, tc.op, tc.body)
		var e map[string]string
		_ = json.Unmarshal(raw, &e)
		if status != 400 || e["__type"] != CodeValidation || !strings.Contains(e["message"], "pagination token") {
			t.Errorf("%s %s: %d %s", tc.op, tc.body, status, raw)
		}
	}
}
