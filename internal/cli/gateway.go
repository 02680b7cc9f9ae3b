package cli

import (
	"errors"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/capstan-dev/capstan/internal/gateway/openai"
)

// newGatewayCommand is the hidden `capstan gateway`: the gateway alone (the
// OpenAI front door and the same routing code `capstan serve` uses) over a
// fixed list of backends, for the routing and overhead benchmarks.
func newGatewayCommand(_ *globalOptions) *cobra.Command {
	var o openai.StandaloneOptions
	var logLevel string
	cmd := &cobra.Command{
		Use:    "gateway",
		Short:  "Run the inference gateway alone in front of fixed backends (benchmarks)",
		Hidden: true,
		Long: `Serve the OpenAI API (/v1/chat/completions, /v1/completions, /v1/models) and
/metrics, routing one endpoint's requests over --backend replicas with --strategy
(roundrobin, random, least_outstanding_requests, prefixaware, kvaware, session).
Prints "listening on http://HOST:PORT" on stdout once bound.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var lvl slog.Level
			if err := lvl.UnmarshalText([]byte(logLevel)); err != nil {
				return errors.New("--log-level: want debug, info, warn or error")
			}
			log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))
			return openai.ServeStandalone(cmd.Context(), o, cmd.OutOrStdout(), log)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Listen, "listen", "127.0.0.1:8090", "address to listen on (port 0 picks a free one)")
	f.StringVar(&o.Endpoint, "endpoint", "default", "endpoint name: the model clients send")
	f.StringVar(&o.Model, "model", "", "catalog model id the backends serve (seeds block hashes; default: asked from the backends)")
	f.StringVar(&o.Strategy, "strategy", "", "routing strategy (default least_outstanding_requests)")
	f.StringArrayVar(&o.Backends, "backend", nil, "backend id=host:port (repeatable or comma-separated)")
	f.StringArrayVar(&o.KVEvents, "kv-events", nil, "backend id=tcp://host:port of its KV events publisher")
	f.StringArrayVar(&o.KVReplay, "kv-events-replay", nil, "backend id=tcp://host:port of its KV events replay socket")
	f.DurationVar(&o.ScrapeInterval, "scrape-interval", time.Second, "how often to read backends' /metrics and /health")
	f.IntVar(&o.MaxConcurrency, "max-concurrency", 0, "requests in flight for the endpoint (0: unbounded)")
	f.IntVar(&o.MaxQueue, "max-queue", 0, "requests waiting beyond --max-concurrency before 429")
	f.StringVar(&logLevel, "log-level", "warn", "log level: debug, info, warn, error (logs go to stderr)")
	return cmd
}
