package cli

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/capstan-dev/capstan/internal/gateway"
	"github.com/capstan-dev/capstan/internal/gateway/kube"
	"github.com/capstan-dev/capstan/internal/gateway/openai"
)

// newGatewayCommand is the hidden `capstan gateway`: the gateway alone (the
// OpenAI front door and the same routing code `capstan serve` uses) over a
// fixed list of backends, for the routing and overhead benchmarks, or, with
// no --backend, over the operator's deployments in a Kubernetes cluster.
func newGatewayCommand(_ *globalOptions) *cobra.Command {
	var o openai.StandaloneOptions
	var logLevel, kubeconfig, namespace string
	var holdTimeout time.Duration
	var maxHeld int
	cmd := &cobra.Command{
		Use:    "gateway",
		Short:  "Run the inference gateway alone in front of fixed backends (benchmarks)",
		Hidden: true,
		Long: `Serve the OpenAI API (/v1/chat/completions, /v1/completions, /v1/models) and
/metrics, routing one endpoint's requests over --backend replicas with --strategy
(roundrobin, random, least_outstanding_requests, prefixaware, kvaware, session).

Without --backend it is the gateway in a Kubernetes cluster: it watches the
operator's InferenceEndpointConfigs and JumpStartModels and the EndpointSlices
of their Services (--kubeconfig, else $KUBECONFIG, in-cluster, ~/.kube/config;
--namespace limits the watch) and serves one route per deployment over its
ready pods, with the manifest's routing strategy, on the OpenAI API and the
SageMaker runtime API (/endpoints/NAME/invocations), plus /metrics, /healthz
and /readyz (ready once the routes are synced). A request to a deployment with
no ready pod is held (up to --max-held per deployment, for --hold-timeout)
while the gateway sets the object's replicas from 0 to its minimum (at least
1) through its scale subresource; it goes on once a pod is ready.
Prints "listening on http://HOST:PORT" on stdout once bound.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var lvl slog.Level
			if err := lvl.UnmarshalText([]byte(logLevel)); err != nil {
				return errors.New("--log-level: want debug, info, warn or error")
			}
			log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))
			if len(o.Backends) > 0 {
				if kubeconfig != "" || namespace != "" || cmd.Flags().Changed("hold-timeout") || cmd.Flags().Changed("max-held") {
					return errors.New("--backend and --kubeconfig/--namespace/--hold-timeout/--max-held are exclusive: fixed backends or the cluster's")
				}
				return openai.ServeStandalone(cmd.Context(), o, cmd.OutOrStdout(), log)
			}
			if holdTimeout <= 0 || maxHeld <= 0 {
				return errors.New("--hold-timeout and --max-held must be positive")
			}
			cfg, err := ctrl.GetConfig()
			if kubeconfig != "" {
				cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
			}
			if err != nil {
				return fmt.Errorf("kubeconfig (no --backend: the gateway discovers the cluster's deployments): %w", err)
			}
			srv, err := kube.NewServer(cfg, kube.ServerOptions{Namespace: namespace, ScrapeInterval: o.ScrapeInterval,
				HoldTimeout: holdTimeout, MaxHeld: maxHeld, Logger: log})
			if err != nil {
				return err
			}
			l, err := net.Listen("tcp", o.Listen)
			if err != nil {
				return fmt.Errorf("listen %s: %w", o.Listen, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "listening on http://%s\n", l.Addr())
			return srv.Serve(cmd.Context(), l)
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
	f.StringVar(&kubeconfig, "kubeconfig", "", "without --backend: kubeconfig of the cluster (default: $KUBECONFIG, in-cluster, then ~/.kube/config)")
	f.StringVar(&namespace, "namespace", "", "without --backend: watch only this namespace (default: all)")
	f.DurationVar(&holdTimeout, "hold-timeout", gateway.DefaultHoldTimeout, "without --backend: how long a request to a deployment with no ready pod waits for one")
	f.IntVar(&maxHeld, "max-held", gateway.DefaultMaxHeld, "without --backend: requests held per deployment with no ready pod (beyond: 503)")
	f.StringVar(&logLevel, "log-level", "warn", "log level: debug, info, warn, error (logs go to stderr)")
	return cmd
}
