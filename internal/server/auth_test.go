package server

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/retry"
	sm "github.com/aws/aws-sdk-go-v2/service/sagemaker"

	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/config"
)

const (
	testSecret = "s3cret-access-key-0123456789"
	testAPIKey = "inference-key-0123456789"
	testAdmin  = "admin-token-0123456789"
	manifests  = "/apis/inference.sagemaker.aws.amazon.com/v1/namespaces/default/inferenceendpointconfigs"
)

func decodeJSON(r io.Reader, v any) error { return json.NewDecoder(r).Decode(v) }

// call sends method path with auth as the Authorization header.
func (h *harness) call(t *testing.T, method, path, auth, body string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(method, h.url+path, strings.NewReader(body))
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp, string(raw)
}

// Each surface takes its own kind of key: the AWS secret is never a bearer
// key, an inference key does not administer, an admin token does not
// infer, and a surface whose key list is empty refuses everything, naming
// the field to set. Before, the SigV4 secret opened the OpenAI door and
// the manifests API, and the dev clock and /metrics needed nothing.
func TestEachSurfaceTakesItsOwnKey(t *testing.T) {
	creds := []config.Credential{{AccessKeyID: "AKIDREAL", SecretAccessKey: testSecret}}
	clockBody := `{"advance":"1h"}`
	type check struct {
		method, path, auth, body string
		want                     int
		mention                  string // in the body; "" = anything
	}
	tests := []struct {
		name   string
		cfg    config.Config
		checks []check
	}{
		{"credentials only", config.Config{Credentials: creds, DevClock: true}, []check{
			{"GET", "/v1/models", "Bearer " + testSecret, "", 401, "set apiKeys"},
			{"GET", manifests, "Bearer " + testSecret, "", 401, "set adminTokens"},
			{"POST", "/_capstan/clock", "", clockBody, 401, "set adminTokens"},
			{"POST", "/_capstan/clock", "Bearer " + testSecret, clockBody, 401, "adminTokens"},
			{"GET", "/metrics", "", "", 401, "adminTokens"},
			{"GET", "/healthz", "", "", 200, "ok"},
		}},
		{"all keys", config.Config{Credentials: creds, DevClock: true, APIKeys: []string{testAPIKey}, AdminTokens: []string{testAdmin}}, []check{
			{"GET", "/v1/models", "Bearer " + testAPIKey, "", 200, `"object":"list"`},
			{"GET", "/v1/models", "bearer " + testAPIKey, "", 200, `"object":"list"`},
			{"GET", "/v1/models", "BEARER  " + testAPIKey, "", 200, `"object":"list"`},
			{"GET", "/v1/models", "Bearer " + testSecret, "", 401, "invalid_api_key"},
			{"GET", "/v1/models", "Bearer " + testAdmin, "", 401, "invalid_api_key"},
			{"GET", "/v1/models", "Basic " + testAPIKey, "", 401, "invalid_api_key"},
			{"GET", manifests, "Bearer " + testAdmin, "", 200, "List"},
			{"GET", manifests, "bearer " + testAdmin, "", 200, "List"},
			{"GET", manifests, "Bearer " + testAPIKey, "", 401, `"reason":"Unauthorized"`},
			{"POST", "/_capstan/clock", "Bearer " + testAdmin, clockBody, 200, `"offset":"1h0m0s"`},
			{"POST", "/_capstan/clock", "Bearer " + testAPIKey, clockBody, 401, ""},
			{"GET", "/metrics", "Bearer " + testAdmin, "", 200, "capstan_endpoints"},
			{"GET", "/metrics", "Bearer " + testAPIKey, "", 401, ""},
		}},
		{"api keys only", config.Config{APIKeys: []string{testAPIKey}}, []check{
			{"GET", "/v1/models", "Bearer " + testAPIKey, "", 200, ""},
			{"POST", "/", "", "{}", 403, "set credentials"},
			{"POST", "/endpoints/ep/invocations", "", "{}", 403, "set credentials"},
			{"GET", manifests, "Bearer " + testAPIKey, "", 401, "set adminTokens"},
		}},
		{"no auth", config.Config{DevClock: true}, []check{
			{"GET", "/v1/models", "", "", 200, ""},
			{"GET", manifests, "", "", 200, ""},
			{"GET", "/metrics", "", "", 200, ""},
			{"POST", "/_capstan/clock", "", clockBody, 200, ""},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := startHarness(t, tc.cfg)
			for _, c := range tc.checks {
				resp, body := h.call(t, c.method, c.path, c.auth, c.body)
				if resp.StatusCode != c.want || !strings.Contains(body, c.mention) {
					t.Errorf("%s %s (%q): %d %s, want %d mentioning %q", c.method, c.path, c.auth, resp.StatusCode, body, c.want, c.mention)
				}
			}
		})
	}
}

// Over the rate limit each door answers in its own shape: AWS's
// ThrottlingException (which the SDK treats as a throttle and retries),
// OpenAI's 429 rate_limit_exceeded, a Kubernetes Status 429. Buckets are
// per credential: spending one key's does not touch another's.
func TestRateLimitPerCredential(t *testing.T) {
	cfg := config.Config{Credentials: []config.Credential{{AccessKeyID: "AKIDREAL", SecretAccessKey: testSecret}},
		APIKeys: []string{testAPIKey, testAPIKey + "-b"}, AdminTokens: []string{testAdmin}}
	cfg.Limits.RateLimit = config.RateLimit{RequestsPerSecond: 0.001, Burst: 2}
	h := startHarness(t, cfg)
	ctx := context.Background()
	for i := 0; i < 2; i++ {
		if _, err := h.sm.ListEndpoints(ctx, &sm.ListEndpointsInput{}); err != nil {
			t.Fatalf("call %d within the burst: %v", i, err)
		}
	}
	_, err := h.sm.ListEndpoints(ctx, &sm.ListEndpointsInput{})
	if code, _ := apiCode(err); code != "ThrottlingException" {
		t.Fatalf("third SigV4 call: %v, want ThrottlingException", err)
	}
	if !retry.IsErrorThrottles(retry.DefaultThrottles).IsErrorThrottle(err).Bool() {
		t.Fatalf("the SDK does not see %v as a throttle", err)
	}
	resp, body := h.call(t, "POST", "/", "AWS4-HMAC-SHA256 Credential=AKIDREAL/20260101/us-east-1/sagemaker/aws4_request, SignedHeaders=host, Signature=00", "{}")
	if resp.StatusCode != 400 || resp.Header.Get("X-Amzn-ErrorType") != "ThrottlingException" || !strings.Contains(body, `"__type":"ThrottlingException"`) {
		t.Fatalf("raw throttled AWS answer: %d %v %s", resp.StatusCode, resp.Header, body)
	}

	for i := 0; i < 2; i++ {
		if resp, body := h.call(t, "GET", "/v1/models", "Bearer "+testAPIKey, ""); resp.StatusCode != 200 {
			t.Fatalf("OpenAI call %d: %d %s", i, resp.StatusCode, body)
		}
	}
	resp, body = h.call(t, "GET", "/v1/models", "Bearer "+testAPIKey, "")
	var oe struct {
		Error struct {
			Message, Type, Code string
			Param               *string
		}
	}
	_ = json.Unmarshal([]byte(body), &oe)
	if resp.StatusCode != 429 || oe.Error.Type != "rate_limit_error" || oe.Error.Code != "rate_limit_exceeded" || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("throttled OpenAI answer: %d %s", resp.StatusCode, body)
	}
	if resp, body := h.call(t, "GET", "/v1/models", "Bearer "+testAPIKey+"-b", ""); resp.StatusCode != 200 {
		t.Fatalf("a second API key shares the first one's bucket: %d %s", resp.StatusCode, body)
	}

	for i := 0; i < 2; i++ {
		h.call(t, "GET", manifests, "Bearer "+testAdmin, "")
	}
	resp, body = h.call(t, "GET", manifests, "Bearer "+testAdmin, "")
	if resp.StatusCode != 429 || !strings.Contains(body, `"kind":"Status"`) || !strings.Contains(body, `"reason":"TooManyRequests"`) {
		t.Fatalf("throttled manifests answer: %d %s", resp.StatusCode, body)
	}
	if resp, _ := h.call(t, "GET", "/healthz", "", ""); resp.StatusCode != 200 {
		t.Fatalf("/healthz throttled: %d", resp.StatusCode)
	}
}

// Without credentials the bucket is the client's address.
// Without a configured credential a request is counted against its remote
// address, except from loopback (this host). The requests are handed to the
// limiter directly, so no packet goes to the documentation address
// 192.0.2.1.
func TestRateLimitPerAddressWithoutCredentials(t *testing.T) {
	cfg := config.Config{}
	cfg.Limits.RateLimit = config.RateLimit{RequestsPerSecond: 0.001, Burst: 3}
	rl := newRateLimiter(cfg, clock.NewFake(time.Unix(0, 0)))
	h := rl.middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	send := func(remote, path, auth string) int {
		r := httptest.NewRequest("GET", path, nil)
		r.RemoteAddr = remote
		if auth != "" {
			r.Header.Set("Authorization", auth)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	for i, p := range []string{"/v1/models", manifests, "/metrics"} {
		if code := send("192.0.2.1:4000", p, ""); code != http.StatusOK {
			t.Fatalf("request %d within the burst: %d", i, code)
		}
	}
	for _, c := range []struct{ path, auth string }{
		{"/v1/models", "Bearer made-up-key-0123456789"},
		{"/metrics", ""},
		{"/", "AWS4-HMAC-SHA256 Credential=AKIDUNKNOWN/20260101/us-east-1/sagemaker/aws4_request, SignedHeaders=host, Signature=00"},
	} {
		if code := send("192.0.2.1:4001", c.path, c.auth); code != http.StatusTooManyRequests && code != http.StatusBadRequest {
			t.Fatalf("%s past the address's burst: %d", c.path, code)
		}
	}
	if code := send("192.0.2.2:4000", "/v1/models", ""); code != http.StatusOK {
		t.Fatalf("another address shares the first one's bucket: %d", code)
	}
	for i := 0; i < 10; i++ {
		if code := send("127.0.0.1:4000", "/v1/models", ""); code != http.StatusOK {
			t.Fatalf("loopback request %d was limited: %d", i, code)
		}
	}
}
