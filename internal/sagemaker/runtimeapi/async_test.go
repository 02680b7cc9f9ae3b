package runtimeapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/internal/asyncinference"
)

type fakeQueue struct {
	got asyncinference.Request
	acc asyncinference.Accepted
	err error
}

func (f *fakeQueue) Submit(_ context.Context, r asyncinference.Request) (asyncinference.Accepted, error) {
	f.got = r
	return f.acc, f.err
}

func TestInvokeEndpointAsyncWire(t *testing.T) {
	q := &fakeQueue{}
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(299) })
	srv := httptest.NewServer(WithAsync(next, q, Options{}))
	defer srv.Close()
	post := func(path string, hdr map[string]string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, srv.URL+path, nil)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	in := map[string]string{hdrInputLocation: "s3://b/in.json"}

	q.acc = asyncinference.Accepted{InferenceID: "i-1", OutputLocation: "s3://b/o/i-1.out", FailureLocation: "s3://b/f/i-1-error.out"}
	resp, body := post("/endpoints/ep/async-invocations", map[string]string{hdrInputLocation: "s3://b/in.json", hdrStreamCType: "application/json",
		hdrStreamAccept: "text/plain", hdrCustomAttributes: "a=1", hdrInferenceID: "i-1", hdrRequestTTL: "120", hdrInvocationTimeout: "30",
		hdrOutputExtension: "day/1", hdrFilename: "x.json"})
	if resp.StatusCode != http.StatusAccepted || body != `{"InferenceId":"i-1"}` ||
		resp.Header.Get(hdrOutputLocation) != "s3://b/o/i-1.out" || resp.Header.Get(hdrFailureLocation) != "s3://b/f/i-1-error.out" {
		t.Fatalf("%d %s %v", resp.StatusCode, body, resp.Header)
	}
	want := asyncinference.Request{Endpoint: "ep", InputLocation: "s3://b/in.json", ContentType: "application/json", Accept: "text/plain",
		CustomAttributes: "a=1", InferenceID: "i-1", OutputExtension: "day/1", Filename: "x.json", RequestTTL: 120e9, Timeout: 30e9}
	if q.got != want {
		t.Fatalf("submitted %+v\nwant %+v", q.got, want)
	}

	q.acc.FailureLocation = ""
	if resp, _ := post("/endpoints/ep/async-invocations", in); resp.StatusCode != 202 || resp.Header.Get(hdrFailureLocation) != "" {
		t.Fatalf("no failure path: %d %v", resp.StatusCode, resp.Header)
	}
	// Other runtime calls go on to the next handler.
	if resp, _ := post("/endpoints/ep/invocations", nil); resp.StatusCode != 299 {
		t.Fatalf("invocations went to %d", resp.StatusCode)
	}

	for _, tc := range []struct {
		name   string
		path   string
		hdr    map[string]string
		err    error
		status int
		code   string
		msg    string
	}{
		{"no input", "/endpoints/ep/async-invocations", nil, nil, 400, "ValidationError",
			"1 validation error detected: Value null at 'inputLocation' failed to satisfy constraint: Member must not be null"},
		{"https input", "/endpoints/ep/async-invocations", map[string]string{hdrInputLocation: "https://b.s3.amazonaws.com/k"}, nil, 400, "ValidationError", "needs an s3:// URI"},
		{"bad filename", "/endpoints/ep/async-invocations", map[string]string{hdrInputLocation: "s3://b/k", hdrFilename: "a.b.c"}, nil, 400, "ValidationError",
			"Value 'a.b.c' at 'filename' failed to satisfy constraint"},
		{"extension with scheme", "/endpoints/ep/async-invocations", map[string]string{hdrInputLocation: "s3://b/k", hdrOutputExtension: "s3://x"}, nil, 400, "ValidationError",
			"at 's3OutputPathExtension' failed to satisfy constraint"},
		{"ttl not a number", "/endpoints/ep/async-invocations", map[string]string{hdrInputLocation: "s3://b/k", hdrRequestTTL: "soon"}, nil, 400, "ValidationError", "requestTTLSeconds"},
		{"bad endpoint name", "/endpoints/bad_name/async-invocations", in, nil, 400, "ValidationError", "at 'endpointName'"},
		{"not async", "/endpoints/ep/async-invocations", in, asyncinference.ErrNotAsync, 400, "ValidationError",
			"Endpoint ep of account 000000000000 is not configured for asynchronous inference"},
		{"unknown", "/endpoints/ep/async-invocations", in, fmt.Errorf("x: %w", asyncinference.ErrUnknownEndpoint), 400, "ValidationError",
			"Endpoint ep of account 000000000000 not found."},
		{"queue full", "/endpoints/ep/async-invocations", in, fmt.Errorf("x: %w", asyncinference.ErrQueueFull), 503, "ServiceUnavailable", "queue of endpoint ep is full"},
		{"store broken", "/endpoints/ep/async-invocations", in, fmt.Errorf("disk on fire"), 500, "InternalFailure", "internal error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q.err = tc.err
			resp, body := post(tc.path, tc.hdr)
			var wb wireBody
			_ = json.Unmarshal([]byte(body), &wb)
			if resp.StatusCode != tc.status || resp.Header.Get("X-Amzn-ErrorType") != tc.code || !strings.Contains(wb.Message, tc.msg) {
				t.Fatalf("%d %s %s; want %d %s %q", resp.StatusCode, resp.Header.Get("X-Amzn-ErrorType"), body, tc.status, tc.code, tc.msg)
			}
		})
	}
}
