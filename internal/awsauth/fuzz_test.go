package awsauth

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// fuzzRequest is the request FuzzVerify sends: a fixed control API call whose
// Authorization, X-Amz-Date, X-Amz-Content-Sha256 and body are fuzzed.
func fuzzRequest(authz, amzDate, hash string, body []byte) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "http://capstan.test/", bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/x-amz-json-1.1")
	r.Header.Set("X-Amz-Target", "SageMaker.DeleteModel")
	for k, v := range map[string]string{"Authorization": authz, "X-Amz-Date": amzDate, "X-Amz-Content-Sha256": hash} {
		if v != "" {
			r.Header.Set(k, v)
		}
	}
	return r
}

// sdkSigned is fuzzRequest's request as aws-sdk-go-v2's signer signs it.
func sdkSigned(t testing.TB, at time.Time, hash string, body []byte) *http.Request {
	r := fuzzRequest("", "", hash, body)
	payload := sha(body)
	if hash != "" {
		payload = hash
	}
	if err := v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "secret"},
		r, payload, "sagemaker", "us-east-1", at); err != nil {
		t.Fatal(err)
	}
	return r
}

// FuzzVerify: verify never panics, and accepts only a request whose
// signature is the one the AWS SDK's signer computes for exactly that
// request, returning exactly its body.
func FuzzVerify(f *testing.F) {
	body := []byte(`{"ModelName":"does-not-exist"}`)
	for _, seed := range []struct {
		at   time.Time
		hash string
		body []byte
	}{
		{testNow, "", body},
		{testNow, sha(body), body},
		{testNow.Add(-10 * time.Minute), "", nil},
		{testNow, "UNSIGNED-PAYLOAD", body},
	} {
		r := sdkSigned(f, seed.at, seed.hash, seed.body)
		f.Add(r.Header.Get("Authorization"), r.Header.Get("X-Amz-Date"), seed.hash, seed.body)
	}
	f.Add("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20260102/us-east-1/sagemaker/aws4_request,SignedHeaders=host,Signature=00", "20260102T030405Z", "", []byte("{}"))
	f.Add("AWS4-HMAC-SHA256 Credential=,SignedHeaders=;;,Signature=", "2026", "STREAMING-x", []byte{})
	v := testVerifier()
	scope := Scope{Service: "sagemaker", MaxBodyBytes: 1 << 10, TooLargeCode: "RequestEntityTooLarge"}
	f.Fuzz(func(t *testing.T, authz, amzDate, hash string, body []byte) {
		if !validHeaderValue(authz) || !validHeaderValue(amzDate) || !validHeaderValue(hash) {
			t.Skip() // net/http never delivers such a header value
		}
		got, err := v.verify(fuzzRequest(authz, amzDate, hash, body), scope)
		if err != nil {
			if err.Code == "" || err.Message == "" || err.Status != http.StatusForbidden && err.Status != http.StatusBadRequest && err.Status != http.StatusRequestEntityTooLarge {
				t.Fatalf("refusal %+v is not an AWS error", err)
			}
			return
		}
		at, perr := time.Parse(amzDateFmt, amzDate)
		if perr != nil {
			t.Fatalf("accepted an unparsable X-Amz-Date %q", amzDate)
		}
		want := sdkSigned(t, at, hash, body).Header.Get("Authorization")
		sig := want[strings.LastIndex(want, "Signature=")+len("Signature="):]
		if !strings.Contains(authz, "Signature="+sig) {
			t.Fatalf("accepted %q; the SDK signs this request as %q", authz, want)
		}
		if !bytes.Equal(got, body) {
			t.Fatalf("returned body %q, sent %q", got, body)
		}
	})
}

// validHeaderValue reports whether net/http's server would pass v through
// (no control characters other than tab).
func validHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return strings.TrimSpace(v) == v
}
