package openai_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"

	"github.com/capstan-dev/capstan/internal/gateway"
	"github.com/capstan-dev/capstan/internal/gateway/openai"
)

// BenchmarkFrontDoor measures one small non-streaming completion through the
// OpenAI handler and the gateway to a trivial backend over loopback HTTP
// (the client side is in-process: the handler is called directly).
func BenchmarkFrontDoor(b *testing.B) {
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"cmpl-1","object":"text_completion","choices":[{"index":0,"text":" one two three four","finish_reason":"length"}],"usage":{"prompt_tokens":32,"completion_tokens":4,"total_tokens":36,"prompt_tokens_details":{"cached_tokens":0}}}`)
	}))
	defer be.Close()
	gw := gateway.New(gateway.Options{Seed: 1})
	gw.SetRoute(gateway.Route{Endpoint: "m", Variants: []gateway.VariantRoute{{Name: "A", Weight: 1,
		Backends: []gateway.Backend{{ID: "a", Addr: strings.TrimPrefix(be.URL, "http://")}}}}})
	h := openai.NewHandler(gw, openai.Options{})
	body := `{"model":"m","prompt":"` + strings.Repeat("abc ", 32) + `","max_tokens":4,"ignore_eos":true}`
	b.ReportAllocs()
	cpu0 := processCPU()
	for b.Loop() {
		req := httptest.NewRequest(http.MethodPost, "/v1/completions", strings.NewReader(body))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != 200 {
			b.Fatal(rec.Code, rec.Body.String())
		}
	}
	// CPU time (this process: front door, gateway and test backend) is
	// steadier than wall time on a shared machine.
	b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
}

// processCPU is the user+system CPU time this process has used, in ns.
func processCPU() int64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}
