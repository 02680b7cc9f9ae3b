package cli

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/capstan-dev/capstan/internal/catalog"
	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/operator"
)

func newOperatorCommand(_ *globalOptions) *cobra.Command {
	o := operator.Options{}
	var kubeconfig, logLevel string
	var qps float32
	var burst int
	cmd := &cobra.Command{
		Use:   "operator",
		Short: "Run the Kubernetes operator: InferenceEndpointConfig/JumpStartModel → Deployments, Services, HPAs",
		Long: `Run capstan as a Kubernetes operator (controller-runtime): each InferenceEndpointConfig and
JumpStartModel becomes a Deployment of model-server pods, a Service and, with an
autoScalingSpec, an autoscaling/v2 HPA, all owned by it; its status mirrors the Deployment.
The validating webhook applies the checks of 'capstan apply' in the API server.
Install the CRDs, RBAC and webhook first: 'capstan operator install | kubectl apply -f -'
or 'kubectl apply -k deploy/operator'. See docs/operator.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var lvl slog.Level
			if err := lvl.UnmarshalText([]byte(logLevel)); err != nil {
				return fmt.Errorf("--log-level: want debug, info, warn or error")
			}
			log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))
			cfg, err := ctrl.GetConfig()
			if kubeconfig != "" {
				cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
			}
			if err != nil {
				return fmt.Errorf("kubeconfig: %w", err)
			}
			// client-go's defaults (5/10) would make the first sync of a
			// few hundred manifests take minutes.
			cfg.QPS, cfg.Burst = qps, burst
			mgr, err := operator.NewManager(cfg, o, log, clock.Real{})
			if err != nil {
				return err
			}
			return mgr.Start(cmd.Context())
		},
	}
	f := cmd.Flags()
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, in-cluster, then ~/.kube/config)")
	f.StringVar(&o.MetricsAddr, "metrics-bind-address", ":8080", "Prometheus metrics address (0 disables)")
	f.StringVar(&o.ProbeAddr, "health-probe-bind-address", ":8081", "/healthz and /readyz address (0 disables)")
	f.BoolVar(&o.LeaderElection, "leader-elect", false, "elect one active replica through a Lease")
	f.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", "", "namespace of the Lease (default: the pod's)")
	f.Float32Var(&qps, "kube-api-qps", 100, "requests per second to the API server (client-side limit)")
	f.IntVar(&burst, "kube-api-burst", 200, "burst of requests to the API server")
	f.IntVar(&o.WebhookPort, "webhook-port", 9443, "validating webhook TLS port (0 disables)")
	f.StringVar(&o.WebhookHost, "webhook-host", "", "address the webhook listens on (default: all)")
	f.StringVar(&o.CertDir, "webhook-cert-dir", os.TempDir()+"/capstan-operator-webhook", "directory with tls.crt and tls.key")
	f.BoolVar(&o.SelfSignedWebhook, "webhook-self-signed", false, "make a CA and certificate at start and put the CA into the webhook configuration")
	f.StringVar(&o.WebhookConfigName, "webhook-configuration", "capstan-operator-validating", "ValidatingWebhookConfiguration to put the CA into")
	f.StringVar(&o.WebhookService, "webhook-service", "capstan-operator-webhook.capstan-system", "the webhook's Service, name.namespace (the certificate's DNS name)")
	f.StringVar(&o.Namespace, "namespace", "", "watch one namespace only (default: all)")
	f.StringVar(&o.Build.ModelImage, "model-image", operator.DefaultImage, "image for JumpStartModel pods (runs 'capstan engine sim')")
	f.StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn, error (logs go to stderr)")
	cmd.AddCommand(newOperatorInstallCommand(), newOperatorNodePoolsCommand())
	return cmd
}

func newOperatorNodePoolsCommand() *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "nodepools --cluster-config FILE",
		Short: "Print a Karpenter NodePool and HyperpodNodeClass per instance group, for kubectl apply -f -",
		Long: `Print, for each instance group of a cluster config (a HyperPod cluster as CreateCluster takes it:
name and groups, each group with name, instanceType, count, spot, plan/planArn, migLayout and an
optional maxCount), a karpenter.sagemaker.amazonaws.com/v1 HyperpodNodeClass naming the group and
a karpenter.sh/v1 NodePool on it: requirements on the instance type, capacity type
(on-demand/spot/reserved) and group, limits on nodes, nvidia.com/gpu and MIG slices, and the
nvidia.com/mig.config label of a MIG layout. 'capstan apply' and Karpenter take the output.
See docs/operator.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if file == "" {
				return fmt.Errorf("--cluster-config is required")
			}
			b, err := os.ReadFile(file)
			if err != nil {
				return fmt.Errorf("--cluster-config: %w", err)
			}
			c, err := operator.ParseNodePoolCluster(b)
			if err != nil {
				return fmt.Errorf("%s: %w", file, err)
			}
			return operator.WriteNodePools(cmd.OutOrStdout(), c, catalog.Default())
		},
	}
	cmd.Flags().StringVar(&file, "cluster-config", "", "cluster config file, YAML or JSON")
	return cmd
}

func newOperatorInstallCommand() *cobra.Command {
	var o operator.InstallOptions
	cmd := &cobra.Command{
		Use:   "install",
		Short: "Print the install manifests (namespace, CRDs, RBAC, webhook, operator) for kubectl apply -f -",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return operator.WriteInstall(cmd.OutOrStdout(), o)
		},
	}
	cmd.Flags().StringVar(&o.Image, "image", "", "operator image (default "+operator.DefaultImage+")")
	cmd.Flags().StringVar(&o.ModelImage, "model-image", "", "image for JumpStartModel pods (default: --image)")
	return cmd
}
