package kube

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/client-go/rest"

	"github.com/capstan-dev/capstan/internal/gateway"
	"github.com/capstan-dev/capstan/internal/gateway/openai"
	"github.com/capstan-dev/capstan/internal/sagemaker/runtimeapi"
)

// ServerOptions configure a Server.
type ServerOptions struct {
	Namespace string // "" watches every namespace
	// ScrapeInterval is how often the gateway reads the pods' /metrics and
	// /health (default 1s).
	ScrapeInterval time.Duration
	// HoldTimeout is how long a request to a deployment with no ready
	// replica waits for one while the gateway activates it (default
	// gateway.DefaultHoldTimeout); MaxHeld bounds the waiting requests per
	// deployment (default gateway.DefaultMaxHeld).
	HoldTimeout time.Duration
	MaxHeld     int
	Logger      *slog.Logger
}

// Server is the gateway in the cluster: the OpenAI API (/v1/...), the
// SageMaker runtime API (/endpoints/NAME/invocations[-response-stream]),
// /metrics and /readyz over routes a Discovery keeps.
type Server struct {
	gw      *gateway.Gateway
	disc    *Discovery
	handler http.Handler
}

// NewServer builds the server; Run starts its watches and scrapes.
func NewServer(cfg *rest.Config, o ServerOptions) (*Server, error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	gw := gateway.New(gateway.Options{Logger: o.Logger, Registerer: reg, ScrapeInterval: o.ScrapeInterval})
	d, err := New(cfg, gw, Options{Namespace: o.Namespace, Logger: o.Logger, HoldTimeout: o.HoldTimeout, MaxHeld: o.MaxHeld})
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	front := openai.NewHandler(gw, openai.Options{Logger: o.Logger})
	for _, p := range openai.Paths() {
		mux.Handle(p, front)
	}
	mux.Handle("/endpoints/", runtimeapi.NewHandler(gw, runtimeapi.Options{Logger: o.Logger}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		// Ready once the routes reflect the cluster: a new replica behind
		// the gateway's Service must not answer 404 for existing routes.
		select {
		case <-d.Synced():
			fmt.Fprintln(w, "ok")
		default:
			http.Error(w, "routes not yet synced", http.StatusServiceUnavailable)
		}
	})
	return &Server{gw: gw, disc: d, handler: mux}, nil
}

// Gateway is the server's gateway (tests read its KV index).
func (s *Server) Gateway() *gateway.Gateway { return s.gw }

// Synced is closed once the routes reflect the first complete listing.
func (s *Server) Synced() <-chan struct{} { return s.disc.Synced() }

// Handler serves the APIs.
func (s *Server) Handler() http.Handler { return s.handler }

// Run watches the cluster and scrapes and follows the pods until ctx ends.
func (s *Server) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { _ = s.gw.Run(ctx) }()
	return s.disc.Run(ctx)
}

// Serve runs the server on l until ctx ends; a watch that cannot run (no
// access to the CRDs) ends it with the watch's error.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	srv := &http.Server{Handler: s.handler, ReadHeaderTimeout: 10 * time.Second}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	runErr := make(chan error, 1)
	go func() {
		err := s.Run(ctx)
		runErr <- err
		cancel()
	}()
	go func() {
		<-ctx.Done()
		sctx, c := context.WithTimeout(context.Background(), 5*time.Second)
		defer c()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	cancel()
	return <-runErr
}
