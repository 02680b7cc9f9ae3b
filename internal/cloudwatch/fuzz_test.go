package cloudwatch

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
)

// FuzzHandler sends arbitrary bodies in each protocol: the handler never
// panics and answers a success or one of its error statuses.
func FuzzHandler(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.request")
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		_, body, _ := bytes.Cut(raw, []byte("\n"))
		for proto := range uint8(3) {
			f.Add(proto, "GetMetricData", body)
		}
	}
	f.Add(uint8(2), "ListMetrics", []byte("Action=ListMetrics&Version=2010-08-01&Dimensions.member.1.Name=a&Dimensions.member.1000.Value=b"))
	_, st, clk := fixture(f)
	h := NewHandler(st, HandlerOptions{Clock: clk, MaxBodyBytes: 64 << 10})
	f.Fuzz(func(t *testing.T, proto uint8, op string, body []byte) {
		var req *http.Request
		switch proto % 3 {
		case 0:
			req = httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
			req.URL.Path = CBORPathPrefix + op
			req.Header.Set("smithy-protocol", "rpc-v2-cbor")
		case 1:
			req = httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
			req.Header.Set("X-Amz-Target", TargetPrefix+op)
		default:
			req = httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		switch rec.Code {
		case 200, 400, 404, 413:
		default:
			t.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
	})
}
