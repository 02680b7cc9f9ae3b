package runtimeapi

import (
	"flag"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

// golden compares got with testdata/<name>, rewriting it under -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if string(want) != string(got) {
		t.Fatalf("%s differs:\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// SDKHTTPClient is the HTTP client SDK tests give aws-sdk-go-v2. It works
// around a client-side race (aws/aws-sdk-go-v2 issues #1825, #2737): smithy
// closes the request body as soon as response headers arrive, and when
// net/http's write loop has not yet finished with that body it closes the
// connection, so reading a streamed response fails with "use of closed
// network connection". Servers that answer quickly after reading the body
// (as this one does) make the race likely; shielding the body from that
// early Close removes it without changing what goes on the wire.
var SDKHTTPClient = &http.Client{Transport: nopCloseBody{http.DefaultTransport}}

type nopCloseBody struct{ rt http.RoundTripper }

func (n nopCloseBody) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		r.Body = io.NopCloser(r.Body)
	}
	return n.rt.RoundTrip(r)
}
