package awsjson_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/internal/awsjson"
	"github.com/capstan-dev/capstan/internal/awsjson/awsjsontest"
)

// errDomain stands for an API's own error, which its ToWire maps.
var errDomain = errors.New("quota spent")

func newServer(t *testing.T, messageMember string, escapeHTML bool) *httptest.Server {
	t.Helper()
	h := &awsjson.Handler{
		Prefix: "Test.", Name: "test API", MaxBodyBytes: 64,
		Ops: map[string]awsjson.Op{
			"Echo": func(_ context.Context, body []byte) (any, error) {
				var in map[string]any
				if err := awsjson.Decode(body, &in); err != nil {
					return nil, err
				}
				return in, nil
			},
			"Nothing": func(context.Context, []byte) (any, error) { return nil, nil },
			"Refuse": func(context.Context, []byte) (any, error) {
				return nil, awsjson.Errorf(http.StatusConflict, "ThingInUse", "The thing is in use.")
			},
			"Validate": func(context.Context, []byte) (any, error) {
				var ve awsjson.Violations
				ve.Required(false, "thingName")
				return nil, fmt.Errorf("checking: %w", ve.Err())
			},
			"Domain": func(context.Context, []byte) (any, error) { return nil, fmt.Errorf("create: %w", errDomain) },
			"Syntax": func(context.Context, []byte) (any, error) {
				var v any
				return nil, fmt.Errorf("stored record: %w", json.Unmarshal([]byte("{"), &v))
			},
			"Broken": func(context.Context, []byte) (any, error) { return nil, errors.New("disk on fire") },
		},
		ToWire: func(err error) *awsjson.Error {
			if errors.Is(err, errDomain) {
				return awsjson.Errorf(http.StatusBadRequest, "QuotaExceeded", "No quota left.")
			}
			return nil
		},
		TooLargeCode: "TooLarge", InternalCode: "InternalFailure",
		MessageMember: messageMember, EscapeHTML: escapeHTML,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

var uuidForm = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

func TestHandler(t *testing.T) {
	srv := newServer(t, "message", true)
	tests := []struct {
		name, target, body string
		status             int
		code, want         string // code "" for success; want is the body, or the error message
	}{
		{"echo", "Test.Echo", `{"a":1}`, 200, "", `{"a":1}` + "\n"},
		{"empty body is {}", "Test.Echo", ``, 200, "", `{}` + "\n"},
		{"nil output is {}", "Test.Nothing", `{}`, 200, "", `{}` + "\n"},
		{"HTML escaped", "Test.Echo", `{"a":"<b>"}`, 200, "", `{"a":"\u003cb\u003e"}` + "\n"},
		{"unknown operation", "Test.Launch", `{}`, 400, "UnknownOperationException", `Operation "Test.Launch" is not supported.`},
		{"other API's prefix", "Other.Echo", `{}`, 400, "UnknownOperationException", `Operation "Other.Echo" is not supported.`},
		{"no target", "", `{}`, 400, "UnknownOperationException", `Operation "" is not supported.`},
		{"malformed body", "Test.Echo", `{"a":`, 400, "SerializationException", "Could not parse the request body: unexpected end of JSON input"},
		{"wrong type", "Test.Echo", `[1]`, 400, "SerializationException", "Could not parse the request body: json: cannot unmarshal array into Go value of type map[string]interface {}"},
		{"wire error passes through", "Test.Refuse", `{}`, 409, "ThingInUse", "The thing is in use."},
		{"violations", "Test.Validate", `{}`, 400, "ValidationException", "1 validation error detected: Value null at 'thingName' failed to satisfy constraint: Member must not be null"},
		{"domain error through ToWire", "Test.Domain", `{}`, 400, "QuotaExceeded", "No quota left."},
		{"JSON error from an op", "Test.Syntax", `{}`, 400, "SerializationException", "Could not parse the request body: stored record: unexpected end of JSON input"},
		{"body over the limit", "Test.Echo", `{"a":"` + strings.Repeat("x", 100) + `"}`, 413, "TooLarge", "Request body is larger than the limit of 64 bytes."},
		{"unmapped error", "Test.Broken", `{}`, 500, "InternalFailure", "An internal error occurred."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, hdr, raw := awsjsontest.Call(t, srv.URL, tt.target, tt.body)
			if status != tt.status {
				t.Fatalf("status %d, want %d: %s", status, tt.status, raw)
			}
			if hdr.Get("Content-Type") != awsjson.ContentType || !uuidForm.MatchString(hdr.Get("x-amzn-RequestId")) {
				t.Fatalf("Content-Type %q, request id %q", hdr.Get("Content-Type"), hdr.Get("x-amzn-RequestId"))
			}
			if tt.code == "" {
				if string(raw) != tt.want {
					t.Fatalf("body %s, want %s", raw, tt.want)
				}
				return
			}
			var e map[string]string
			if err := json.Unmarshal(raw, &e); err != nil {
				t.Fatalf("error body %s: %v", raw, err)
			}
			if e["__type"] != tt.code || hdr.Get("X-Amzn-ErrorType") != tt.code || e["message"] != tt.want || len(e) != 2 {
				t.Fatalf("error %v (header %q), want %s: %s", e, hdr.Get("X-Amzn-ErrorType"), tt.code, tt.want)
			}
		})
	}
}

// TestHandlerWording: what differs between the APIs is configuration: the
// message member's name, HTML escaping, and the API's name in a 405.
func TestHandlerWording(t *testing.T) {
	srv := newServer(t, "Message", false)
	_, _, raw := awsjsontest.Call(t, srv.URL, "Test.Echo", `{"a":"<b>&"}`)
	if string(raw) != `{"a":"<b>&"}`+"\n" {
		t.Fatalf("unescaped body = %s", raw)
	}
	_, _, raw = awsjsontest.Call(t, srv.URL, "Test.Refuse", `{}`)
	if string(raw) != `{"Message":"The thing is in use.","__type":"ThingInUse"}`+"\n" {
		t.Fatalf("error body = %s", raw)
	}
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/", nil)
	req.Header.Set("X-Amz-Target", "Test.Echo")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ = io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusMethodNotAllowed || string(raw) != `{"Message":"The test API accepts only POST /.","__type":"UnknownOperationException"}`+"\n" {
		t.Fatalf("GET: %d %s", resp.StatusCode, raw)
	}
}
