package awsauth

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
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

var (
	testNow   = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	testScope = Scope{Service: "sagemaker", MaxBodyBytes: 64, TooLargeCode: "RequestEntityTooLarge"}
)

func testVerifier() *Verifier {
	return &Verifier{Secrets: map[string]string{"AKIDEXAMPLE": "secret"}, Region: "us-east-1", Clock: clock.NewFake(testNow)}
}

// signOpts say how the AWS SDK's own signer signs a request.
type signOpts struct {
	akid, secret, region, service string
	at                            time.Time
	hashHeader                    string // X-Amz-Content-Sha256 to send (and sign); "" = none
	payloadHash                   string // the hash signed; "" = the body's
	chunked                       bool   // send without Content-Length
}

func sha(b []byte) string { h := sha256.Sum256(b); return hex.EncodeToString(h[:]) }

// signed builds a request to url with body, signed by aws-sdk-go-v2's
// signer; zero fields of o take the test verifier's values.
func signed(t testing.TB, url string, body []byte, o signOpts) *http.Request {
	t.Helper()
	def := func(s *string, d string) {
		if *s == "" {
			*s = d
		}
	}
	def(&o.akid, "AKIDEXAMPLE")
	def(&o.secret, "secret")
	def(&o.region, "us-east-1")
	def(&o.service, "sagemaker")
	def(&o.payloadHash, sha(body))
	if o.at.IsZero() {
		o.at = testNow
	}
	var rd io.Reader = bytes.NewReader(body)
	if o.chunked {
		rd = io.MultiReader(rd) // no Len: the client sends it chunked
	}
	req, err := http.NewRequest(http.MethodPost, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-amz-json-1.1")
	if strings.HasSuffix(url, "/") {
		req.Header.Set("X-Amz-Target", "SageMaker.ListEndpoints")
	}
	if o.hashHeader != "" {
		req.Header.Set("X-Amz-Content-Sha256", o.hashHeader)
	}
	if err := v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: o.akid, SecretAccessKey: o.secret},
		req, o.payloadHash, o.service, o.region, o.at); err != nil {
		t.Fatal(err)
	}
	return req
}

func TestMiddleware(t *testing.T) {
	v := testVerifier()
	var calls int
	var gotBody string
	srv := httptest.NewServer(v.Middleware(testScope, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls++
		b, err := ReadBody(w, r, testScope.MaxBodyBytes)
		if err != nil {
			t.Errorf("ReadBody: %v", err)
		}
		gotBody = string(b)
		w.WriteHeader(200)
	})))
	defer srv.Close()
	root, runtime := srv.URL+"/", srv.URL+"/endpoints/my-ep/invocations"
	small := []byte(`{"ModelName":"does-not-exist"}`)
	big := bytes.Repeat([]byte("x"), int(testScope.MaxBodyBytes)+1)
	bodyOf := func(r *http.Request, b []byte) {
		r.Body = io.NopCloser(bytes.NewReader(b))
		r.ContentLength = int64(len(b))
	}

	tests := []struct {
		name     string
		req      func(t *testing.T) *http.Request
		status   int
		code     string
		msg      string // substring of the message
		wantBody string // what the handler reads, for accepted requests
	}{
		{"SDK-signed control call", func(t *testing.T) *http.Request { return signed(t, root, small, signOpts{}) }, 200, "", "", string(small)},
		{"SDK-signed runtime call", func(t *testing.T) *http.Request {
			return signed(t, runtime, []byte("hello"), signOpts{at: testNow.Add(-5 * time.Minute)})
		}, 200, "", "", "hello"},
		{"signed X-Amz-Content-Sha256 that matches", func(t *testing.T) *http.Request {
			return signed(t, root, small, signOpts{hashHeader: sha(small)})
		}, 200, "", "", string(small)},
		{"SDK-signed chunked body", func(t *testing.T) *http.Request { return signed(t, root, small, signOpts{chunked: true}) }, 200, "", "", string(small)},
		{"empty body", func(t *testing.T) *http.Request { return signed(t, root, nil, signOpts{}) }, 200, "", "", ""},
		{"skew just inside 15 min", func(t *testing.T) *http.Request {
			return signed(t, root, small, signOpts{at: testNow.Add(14*time.Minute + 59*time.Second)})
		}, 200, "", "", string(small)},

		{"no authorization", func(t *testing.T) *http.Request {
			r, _ := http.NewRequest(http.MethodPost, root, nil)
			return r
		}, 403, codeMissing, "Missing Authentication Token", ""},
		{"unknown key", func(t *testing.T) *http.Request { return signed(t, root, small, signOpts{akid: "AKIDOTHER"}) }, 403, codeUnknownKey, "security token", ""},
		{"wrong secret", func(t *testing.T) *http.Request { return signed(t, root, small, signOpts{secret: "nope"}) }, 403, codeInvalid, "does not match", ""},
		{"body swapped, original hash header kept", func(t *testing.T) *http.Request {
			r := signed(t, root, small, signOpts{hashHeader: sha(small)})
			bodyOf(r, []byte(`{"ModelName":"victim"}        `))
			return r
		}, 403, codeInvalid, "x-amz-content-sha256", ""},
		{"body swapped, no hash header", func(t *testing.T) *http.Request {
			r := signed(t, root, small, signOpts{})
			bodyOf(r, []byte(`{"ModelName":"victim"}        `))
			return r
		}, 403, codeInvalid, "does not match", ""},
		{"UNSIGNED-PAYLOAD", func(t *testing.T) *http.Request {
			r := signed(t, root, small, signOpts{hashHeader: "UNSIGNED-PAYLOAD", payloadHash: "UNSIGNED-PAYLOAD"})
			bodyOf(r, []byte(`{"ModelName":"victim"}        `))
			return r
		}, 403, codeInvalid, "UNSIGNED-PAYLOAD", ""},
		{"STREAMING payload", func(t *testing.T) *http.Request {
			const h = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"
			return signed(t, root, small, signOpts{hashHeader: h, payloadHash: h})
		}, 403, codeInvalid, "STREAMING", ""},
		{"wrong region", func(t *testing.T) *http.Request { return signed(t, root, small, signOpts{region: "eu-west-1"}) },
			403, codeInvalid, "Credential should be scoped to a valid region, not 'eu-west-1'. ", ""},
		{"wrong service", func(t *testing.T) *http.Request {
			return signed(t, root, small, signOpts{service: "application-autoscaling"})
		}, 403, codeInvalid, "Credential should be scoped to correct service: 'sagemaker'. ", ""},
		{"expired", func(t *testing.T) *http.Request {
			return signed(t, root, small, signOpts{at: testNow.Add(-16 * time.Minute)})
		},
			403, codeInvalid, "Signature expired: 20260102T024805Z is now earlier than 20260102T024905Z (20260102T030405Z - 15 min.)", ""},
		{"in the future", func(t *testing.T) *http.Request {
			return signed(t, root, small, signOpts{at: testNow.Add(16 * time.Minute)})
		},
			403, codeInvalid, "Signature not yet current: 20260102T032005Z is still later than 20260102T031905Z (20260102T030405Z + 15 min.)", ""},
		{"session token", func(t *testing.T) *http.Request {
			r, _ := http.NewRequest(http.MethodPost, root, bytes.NewReader(small))
			r.Header.Set("X-Amz-Target", "SageMaker.ListEndpoints")
			if err := v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "secret", SessionToken: "tok"},
				r, sha(small), "sagemaker", "us-east-1", testNow); err != nil {
				t.Fatal(err)
			}
			return r
		}, 403, codeUnknownKey, "session token", ""},
		{"unsigned X-Amz-Target added", func(t *testing.T) *http.Request {
			r := signed(t, runtime, small, signOpts{})
			r.Header.Set("X-Amz-Target", "SageMaker.DeleteModel")
			return r
		}, 403, codeInvalid, "'X-Amz-Target' must be a 'SignedHeader'", ""},
		{"unsigned target variant added", func(t *testing.T) *http.Request {
			r := signed(t, runtime, small, signOpts{})
			r.Header.Set("X-Amzn-SageMaker-Target-Variant", "other")
			return r
		}, 403, codeInvalid, "must be a 'SignedHeader'", ""},
		{"signed header changed", func(t *testing.T) *http.Request {
			r := signed(t, root, small, signOpts{})
			r.Header.Set("X-Amz-Target", "SageMaker.DeleteEndpoint")
			return r
		}, 403, codeInvalid, "does not match", ""},
		{"host not signed", func(t *testing.T) *http.Request {
			r := signed(t, root, small, signOpts{})
			r.Header.Set("Authorization", strings.Replace(r.Header.Get("Authorization"), "host;", "", 1))
			return r
		}, 403, codeInvalid, "'Host' or ':authority' must be a 'SignedHeader'", ""},
		{"scope date differs from X-Amz-Date", func(t *testing.T) *http.Request {
			r := signed(t, root, small, signOpts{})
			r.Header.Set("Authorization", strings.Replace(r.Header.Get("Authorization"), "/20260102/", "/20260101/", 1))
			return r
		}, 403, codeInvalid, "Date in Credential scope does not match", ""},
		{"malformed header", func(t *testing.T) *http.Request {
			r, _ := http.NewRequest(http.MethodPost, root, nil)
			r.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=x")
			return r
		}, 403, codeIncomplete, "requires 'Signature'", ""},
		{"Content-Length over the limit", func(t *testing.T) *http.Request { return signed(t, root, big, signOpts{}) },
			413, "RequestEntityTooLarge", "limit of 64 bytes", ""},
		{"chunked body over the limit", func(t *testing.T) *http.Request { return signed(t, root, big, signOpts{chunked: true}) },
			413, "RequestEntityTooLarge", "limit of 64 bytes", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			calls, gotBody = 0, ""
			resp, err := http.DefaultClient.Do(tc.req(t))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var body map[string]string
			_ = json.NewDecoder(resp.Body).Decode(&body)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d %v, want %d", resp.StatusCode, body, tc.status)
			}
			if tc.status == 200 {
				if calls != 1 || gotBody != tc.wantBody {
					t.Fatalf("handler called %d times with body %q, want once with %q", calls, gotBody, tc.wantBody)
				}
				return
			}
			if calls != 0 {
				t.Fatal("a refused request reached the handler")
			}
			if body["__type"] != tc.code || resp.Header.Get("X-Amzn-ErrorType") != tc.code || !strings.Contains(body["message"], tc.msg) {
				t.Fatalf("code %q / header %q / message %q, want %s with %q", body["__type"], resp.Header.Get("X-Amzn-ErrorType"), body["message"], tc.code, tc.msg)
			}
		})
	}
}

// countingBody records whether anything read it.
type countingBody struct{ reads int }

func (c *countingBody) Read(p []byte) (int, error) { c.reads++; return 0, io.EOF }
func (c *countingBody) Close() error               { return nil }

// Every check the headers allow happens before a byte of the body is read: a
// refused request costs no body buffering however large it claims to be.
func TestHeaderChecksPrecedeBodyRead(t *testing.T) {
	v := testVerifier()
	tests := []struct {
		name string
		o    signOpts
		edit func(r *http.Request)
		code string
	}{
		{"unknown key", signOpts{akid: "AKIDOTHER"}, nil, codeUnknownKey},
		{"wrong region", signOpts{region: "us-west-2"}, nil, codeInvalid},
		{"wrong service", signOpts{service: "s3"}, nil, codeInvalid},
		{"expired", signOpts{at: testNow.Add(-time.Hour)}, nil, codeInvalid},
		{"unsigned payload", signOpts{hashHeader: "UNSIGNED-PAYLOAD", payloadHash: "UNSIGNED-PAYLOAD"}, nil, codeInvalid},
		{"malformed authorization", signOpts{}, func(r *http.Request) { r.Header.Set("Authorization", "AWS4-HMAC-SHA256 x") }, codeIncomplete},
		{"oversized Content-Length", signOpts{}, func(r *http.Request) { r.ContentLength = 100 << 20 }, "RequestEntityTooLarge"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := signed(t, "http://capstan.test/", nil, tc.o)
			if tc.edit != nil {
				tc.edit(r)
			}
			cb := &countingBody{}
			r.Body = cb
			_, err := v.verify(r, testScope)
			if err == nil || err.Code != tc.code {
				t.Fatalf("Verify = %v, want %s", err, tc.code)
			}
			if cb.reads != 0 {
				t.Fatalf("body read %d times before the refusal", cb.reads)
			}
		})
	}
}

func TestReadBody(t *testing.T) {
	// Behind Middleware, ReadBody returns the verified slice itself.
	v := testVerifier()
	var first, second []byte
	h := v.Middleware(testScope, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		first, _ = ReadBody(w, r, 64)
		second, _ = ReadBody(w, r, 64)
		if _, err := ReadBody(w, r, 3); err == nil {
			t.Error("ReadBody under a smaller limit: no error")
		}
	}))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, signed(t, "http://capstan.test/", []byte("hello"), signOpts{}))
	if w.Code != 200 || string(first) != "hello" || &first[0] != &second[0] {
		t.Fatalf("status %d, bodies %q %q: want the same verified array twice", w.Code, first, second)
	}
	// Without it, ReadBody reads r.Body under the limit.
	r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader("0123456789"))
	var mbe *http.MaxBytesError
	if _, err := ReadBody(httptest.NewRecorder(), r, 5); !errors.As(err, &mbe) {
		t.Fatalf("unverified body over the limit: %v, want *http.MaxBytesError", err)
	}
}
