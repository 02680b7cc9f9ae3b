package gateway

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/metricstore"
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
// trivial local backend (includes the loopback HTTP round trip), over the
// gateway's own upstream client and over net/http's Transport.
func BenchmarkInvoke(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, `[{"generated_text":"ok"}]`)
	}))
	defer srv.Close()
	for _, tr := range []struct {
		name string
		rt   http.RoundTripper
		cw   bool // record into a metric store
	}{{"upstream=lean", nil, false}, {"upstream=net-http", defaultTransport(), false}, {"upstream=lean/metricstore", nil, true}} {
		b.Run(tr.name, func(b *testing.B) {
			o := Options{Seed: 1, Transport: tr.rt}
			if tr.cw {
				o.MetricStore = metricstore.New(clock.Real{}, metricstore.Options{})
			}
			g := New(o)
			g.SetRoute(Route{Endpoint: "ep", Variants: []VariantRoute{{Name: "A", Weight: 1,
				Backends: []Backend{{ID: "a", Addr: strings.TrimPrefix(srv.URL, "http://")}}}}})
			body := []byte(`{"inputs":"hello","parameters":{"max_new_tokens":8}}`)
			hdr := http.Header{"Content-Type": {"application/json"}, "X-Request-Id": {"abc"}}
			b.ReportAllocs()
			cpu0 := processCPU()
			for b.Loop() {
				res, err := g.Invoke(context.Background(), Invocation{Endpoint: "ep", Path: "/invocations", Header: hdr, Body: body})
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, res.Response.Body)
				res.Response.Body.Close()
			}
			// CPU time (this process: gateway, client and test backend) is
			// steadier than wall time on a shared machine.
			b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

// processCPU is the user+system CPU time this process has used, in ns.
func processCPU() int64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// cannedTransport answers every request at once, so a benchmark measures the
// gateway, not a network.
type cannedTransport struct{}

func (cannedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: 200, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
}

type nopActivator struct{}

func (nopActivator) Activate(string) {}

// BenchmarkHoldRelease measures the activator's release path: the time from
// the SetRoute that gives a cold endpoint its first backend until every held
// request has been routed and answered (ns/op), and per held request
// (ns/request). Setting up the hold is outside the timer.
func BenchmarkHoldRelease(b *testing.B) {
	for _, held := range []int{1, 100} {
		b.Run(fmt.Sprintf("held=%d", held), func(b *testing.B) {
			g := New(Options{Seed: 1, Transport: cannedTransport{}})
			cold := Route{Endpoint: "cold", Activator: nopActivator{}, MaxHeld: held,
				Variants: []VariantRoute{{Name: "A", Weight: 1, RoutingStrategy: "roundrobin"}}}
			warm := cloneRoute(cold)
			warm.Variants[0].Backends = []Backend{{ID: "a", Addr: "a:1"}, {ID: "b", Addr: "b:1"}}
			done := make(chan error, held)
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				g.SetRoute(cold)
				for range held {
					go func() {
						res, err := g.Invoke(context.Background(), Invocation{Endpoint: "cold", Path: "/x"})
						if err == nil {
							res.Response.Body.Close()
						}
						done <- err
					}()
				}
				for g.Snapshot("cold").Held < held {
					runtime.Gosched()
				}
				b.StartTimer()
				g.SetRoute(warm)
				for range held {
					if err := <-done; err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*held), "ns/request")
		})
	}
	// The same work without a hold: SetRoute, then one request from a fresh
	// goroutine. held=1 minus this is what holding adds.
	b.Run("baseline", func(b *testing.B) {
		g := New(Options{Seed: 1, Transport: cannedTransport{}})
		warm := Route{Endpoint: "warm", Variants: []VariantRoute{{Name: "A", Weight: 1, RoutingStrategy: "roundrobin",
			Backends: []Backend{{ID: "a", Addr: "a:1"}, {ID: "b", Addr: "b:1"}}}}}
		done := make(chan error, 1)
		b.ReportAllocs()
		for b.Loop() {
			g.SetRoute(warm)
			go func() {
				res, err := g.Invoke(context.Background(), Invocation{Endpoint: "warm", Path: "/x"})
				if err == nil {
					res.Response.Body.Close()
				}
				done <- err
			}()
			if err := <-done; err != nil {
				b.Fatal(err)
			}
		}
	})
}
