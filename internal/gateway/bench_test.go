package gateway

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// BenchmarkPick measures one routing decision over 16 backends per strategy.
func BenchmarkPick(b *testing.B) {
	reg := NewRegistry()
	cs := make([]Candidate, 16)
	for i := range cs {
		cs[i] = Candidate{Backend: Backend{ID: fmt.Sprint(i)}, InFlight: i % 5}
	}
	for _, strategy := range []string{"LEAST_OUTSTANDING_REQUESTS", "RANDOM", "roundrobin"} {
		b.Run(strategy, func(b *testing.B) {
			p, _ := reg.profile(strategy)
			g := New(Options{Seed: 1})
			s, err := reg.newScheduler(p, Deps{Rand: g.randFloat})
			if err != nil {
				b.Fatal(err)
			}
			req := &SchedRequest{Tried: map[string]bool{}}
			b.ReportAllocs()
			for b.Loop() {
				if _, ok := s.pick(context.Background(), req, cs); !ok {
					b.Fatal("no pick")
				}
			}
		})
	}
}

// BenchmarkInvoke measures the gateway's overhead per request against a
// trivial local backend (includes the loopback HTTP round trip).
func BenchmarkInvoke(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, `[{"generated_text":"ok"}]`)
	}))
	defer srv.Close()
	g := New(Options{Seed: 1})
	g.SetRoute(Route{Endpoint: "ep", Variants: []VariantRoute{{Name: "A", Weight: 1,
		Backends: []Backend{{ID: "a", Addr: strings.TrimPrefix(srv.URL, "http://")}}}}})
	body := []byte(`{"inputs":"hello","parameters":{"max_new_tokens":8}}`)
	b.ReportAllocs()
	for b.Loop() {
		res, err := g.Invoke(context.Background(), Invocation{Endpoint: "ep", Path: "/invocations", Body: body})
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Response.Body)
		res.Response.Body.Close()
	}
}
