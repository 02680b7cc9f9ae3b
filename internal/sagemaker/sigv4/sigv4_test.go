package sigv4

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/capstan-dev/capstan/internal/clock"
)

func TestVerify(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	v := &Verifier{Secrets: map[string]string{"AKIDEXAMPLE": "secret"}, Clock: clock.NewFake(now)}
	var gotBody string
	srv := httptest.NewServer(v.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		gotBody = string(b)
		w.WriteHeader(200)
	})))
	defer srv.Close()

	sign := func(t *testing.T, akid, secret, path, body string, at time.Time, tamper func(*http.Request)) *http.Request {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/x-amz-json-1.1")
		req.Header.Set("X-Amz-Target", "SageMaker.ListEndpoints")
		h := sha256.Sum256([]byte(body))
		err := v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: akid, SecretAccessKey: secret},
			req, hex.EncodeToString(h[:]), "sagemaker", "us-east-1", at)
		if err != nil {
			t.Fatal(err)
		}
		if tamper != nil {
			tamper(req)
		}
		return req
	}
	tests := []struct {
		name   string
		req    func(t *testing.T) *http.Request
		status int
		code   string
	}{
		{"valid control call", func(t *testing.T) *http.Request { return sign(t, "AKIDEXAMPLE", "secret", "/", `{"a":1}`, now, nil) }, 200, ""},
		{"valid runtime path with escapes", func(t *testing.T) *http.Request {
			return sign(t, "AKIDEXAMPLE", "secret", "/endpoints/my-ep/invocations", `hello`, now.Add(-5*time.Minute), nil)
		}, 200, ""},
		{"no authorization", func(t *testing.T) *http.Request {
			r, _ := http.NewRequest(http.MethodPost, srv.URL+"/", nil)
			return r
		}, 403, "MissingAuthenticationTokenException"},
		{"unknown key", func(t *testing.T) *http.Request { return sign(t, "AKIDOTHER", "secret", "/", `{}`, now, nil) }, 403, "UnrecognizedClientException"},
		{"wrong secret", func(t *testing.T) *http.Request { return sign(t, "AKIDEXAMPLE", "nope", "/", `{}`, now, nil) }, 403, "InvalidSignatureException"},
		{"body changed after signing", func(t *testing.T) *http.Request {
			return sign(t, "AKIDEXAMPLE", "secret", "/", `{}`, now, func(r *http.Request) {
				r.Body = io.NopCloser(bytes.NewReader([]byte(`{"x":2}`)))
				r.ContentLength = 7
			})
		}, 403, "InvalidSignatureException"},
		{"signed header changed", func(t *testing.T) *http.Request {
			return sign(t, "AKIDEXAMPLE", "secret", "/", `{}`, now, func(r *http.Request) { r.Header.Set("X-Amz-Target", "SageMaker.DeleteEndpoint") })
		}, 403, "InvalidSignatureException"},
		{"expired", func(t *testing.T) *http.Request {
			return sign(t, "AKIDEXAMPLE", "secret", "/", `{}`, now.Add(-20*time.Minute), nil)
		}, 403, "InvalidSignatureException"},
		{"malformed header", func(t *testing.T) *http.Request {
			r, _ := http.NewRequest(http.MethodPost, srv.URL+"/", nil)
			r.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=x")
			return r
		}, 403, "IncompleteSignatureException"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := http.DefaultClient.Do(tc.req(t))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.status)
			}
			if tc.code != "" {
				var body map[string]string
				_ = json.NewDecoder(resp.Body).Decode(&body)
				if body["__type"] != tc.code || resp.Header.Get("X-Amzn-ErrorType") != tc.code {
					t.Fatalf("code %q / header %q, want %s", body["__type"], resp.Header.Get("X-Amzn-ErrorType"), tc.code)
				}
			}
		})
	}
	if gotBody != "hello" {
		t.Fatalf("handler saw body %q after verification", gotBody)
	}
}
