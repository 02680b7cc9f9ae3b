package openai

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/capstan-dev/capstan/internal/gateway"
)

// StandaloneOptions configure a gateway-only server: the OpenAI front door
// and /metrics over a fixed set of backends, for benchmarks and tests of
// routing without the control plane (`capstan gateway`).
type StandaloneOptions struct {
	Listen   string // host:port
	Endpoint string // the model name clients send
	Model    string // catalog model id the backends serve (hash seed); optional
	Strategy string
	// Backends are "id=host:port"; KVEvents "id=tcp://host:port" and
	// KVReplay "id=tcp://host:port" attach event endpoints to them.
	Backends       []string
	KVEvents       []string
	KVReplay       []string
	ScrapeInterval time.Duration
	MaxConcurrency int
	MaxQueue       int
}

func parsePairs(flag string, vals []string) (map[string]string, []string, error) {
	out := map[string]string{}
	var order []string
	for _, v := range vals {
		for _, item := range strings.Split(v, ",") {
			id, addr, ok := strings.Cut(strings.TrimSpace(item), "=")
			if !ok || id == "" || addr == "" {
				return nil, nil, fmt.Errorf("--%s %q: want id=address", flag, item)
			}
			if _, dup := out[id]; dup {
				return nil, nil, fmt.Errorf("--%s: id %q given twice", flag, id)
			}
			out[id] = addr
			order = append(order, id)
		}
	}
	return out, order, nil
}

// Route builds the gateway route the options describe.
func (o StandaloneOptions) Route() (gateway.Route, error) {
	addrs, order, err := parsePairs("backend", o.Backends)
	if err != nil {
		return gateway.Route{}, err
	}
	if len(order) == 0 {
		return gateway.Route{}, errors.New("--backend: at least one backend is required")
	}
	kvs, _, err := parsePairs("kv-events", o.KVEvents)
	if err != nil {
		return gateway.Route{}, err
	}
	replays, _, err := parsePairs("kv-events-replay", o.KVReplay)
	if err != nil {
		return gateway.Route{}, err
	}
	for id := range kvs {
		if _, ok := addrs[id]; !ok {
			return gateway.Route{}, fmt.Errorf("--kv-events: no backend %q", id)
		}
	}
	if o.Endpoint == "" {
		return gateway.Route{}, errors.New("--endpoint is required")
	}
	v := gateway.VariantRoute{Name: "AllTraffic", Weight: 1, RoutingStrategy: o.Strategy, Model: o.Model}
	for _, id := range order {
		v.Backends = append(v.Backends, gateway.Backend{ID: id, Addr: addrs[id], KVEventsEndpoint: kvs[id], KVEventsReplay: replays[id]})
	}
	return gateway.Route{Endpoint: o.Endpoint, Variants: []gateway.VariantRoute{v},
		MaxConcurrency: o.MaxConcurrency, MaxQueue: o.MaxQueue}, nil
}

// ServeStandalone runs the gateway-only server until ctx ends. It prints
// "listening on http://HOST:PORT" to out once bound.
func ServeStandalone(ctx context.Context, o StandaloneOptions, out io.Writer, log *slog.Logger) error {
	route, err := o.Route()
	if err != nil {
		return err
	}
	if o.Strategy != "" {
		known := false
		for _, s := range gateway.NewRegistry().Strategies() {
			known = known || s == strings.NewReplacer("_", "", "-", "").Replace(strings.ToLower(o.Strategy))
		}
		if !known {
			return fmt.Errorf("--strategy %q: want one of %s", o.Strategy, strings.Join(gateway.NewRegistry().Strategies(), ", "))
		}
	}
	// The proxy path allocates little that lives long; trading memory for
	// less frequent GC buys throughput on small machines. GOGC, when set,
	// wins.
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	gw := gateway.New(gateway.Options{Logger: log, Registerer: reg, ScrapeInterval: o.ScrapeInterval})
	gw.SetRoute(route)
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	front := NewHandler(gw, Options{Logger: log})
	for _, p := range Paths() {
		mux.Handle(p, front)
	}
	l, err := net.Listen("tcp", o.Listen)
	if err != nil {
		return fmt.Errorf("listen %s: %w", o.Listen, err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { _ = gw.Run(ctx) }()
	go func() {
		<-ctx.Done()
		sctx, c := context.WithTimeout(context.Background(), 5*time.Second)
		defer c()
		_ = srv.Shutdown(sctx)
	}()
	fmt.Fprintf(out, "listening on http://%s\n", l.Addr())
	log.Info("gateway listening", "addr", l.Addr().String(), "endpoint", o.Endpoint, "strategy", o.Strategy, "backends", len(route.Variants[0].Backends))
	if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
