// Package operator is `capstan operator`: a controller-runtime manager that
// reconciles InferenceEndpointConfig and JumpStartModel objects into
// Deployments, Services and HPAs on a Kubernetes cluster, and serves the
// validating webhook that applies capstan's manifest validation in the API
// server. The spec and status types are internal/manifest's, wrapped as
// API objects by apis/v1.
package operator

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/capstan-dev/capstan/internal/clock"
	apiv1 "github.com/capstan-dev/capstan/internal/operator/apis/v1"
)

// Options configure the operator; flags of `capstan operator` land here.
type Options struct {
	// MetricsAddr serves Prometheus metrics ("0" disables).
	MetricsAddr string
	// ProbeAddr serves /healthz and /readyz ("0" disables).
	ProbeAddr string
	// LeaderElection lets several replicas run with one active.
	LeaderElection          bool
	LeaderElectionNamespace string
	// WebhookPort serves the validating webhook over TLS (0 disables).
	WebhookPort int
	WebhookHost string
	// CertDir holds tls.crt and tls.key for the webhook.
	CertDir string
	// SelfSignedWebhook makes a CA and serving certificate for
	// WebhookService at start, writes them to CertDir and puts the CA into
	// the ValidatingWebhookConfiguration WebhookConfigName.
	SelfSignedWebhook bool
	WebhookConfigName string
	WebhookService    string // "name.namespace"
	// Namespace limits the operator to one namespace ("" = all).
	Namespace string
	Build     BuildOptions
	// SkipNameValidation lets a second manager start in the same process
	// (a test restarting the operator): controller names are otherwise
	// unique per process, for their metrics.
	SkipNameValidation bool
}

// LeaderElectionID names the Lease the replicas compete for.
const LeaderElectionID = "capstan-operator.inference.capstan.dev"

// NewManager builds the manager with both reconcilers, the webhook and the
// health checks; the caller runs it with mgr.Start(ctx).
func NewManager(cfg *rest.Config, o Options, log *slog.Logger, clk clock.Clock) (ctrl.Manager, error) {
	ctrl.SetLogger(logr.FromSlogHandler(log.Handler()))
	scheme, err := apiv1.NewScheme()
	if err != nil {
		return nil, fmt.Errorf("operator: scheme: %w", err)
	}
	mo := ctrl.Options{
		Scheme:                  scheme,
		Metrics:                 metricsserver.Options{BindAddress: o.MetricsAddr},
		HealthProbeBindAddress:  o.ProbeAddr,
		LeaderElection:          o.LeaderElection,
		LeaderElectionID:        LeaderElectionID,
		LeaderElectionNamespace: o.LeaderElectionNamespace,
		// Stepping down on a lost lease ends the process at once, so a
		// new leader never overlaps with this one.
		LeaderElectionReleaseOnCancel: true,
	}
	if o.SkipNameValidation {
		skip := true
		mo.Controller = config.Controller{SkipNameValidation: &skip}
	}
	if o.Namespace != "" {
		mo.Cache = cache.Options{DefaultNamespaces: map[string]cache.Config{o.Namespace: {}}}
	}
	if o.WebhookPort != 0 && !o.SelfSignedWebhook {
		// Fail here, not minutes later in the webhook server's start.
		if _, err := os.Stat(filepath.Join(o.CertDir, "tls.crt")); err != nil {
			return nil, fmt.Errorf("operator: the webhook needs tls.crt and tls.key in %s (--webhook-cert-dir), or --webhook-self-signed, or --webhook-port 0: %w", o.CertDir, err)
		}
	}
	if o.WebhookPort != 0 {
		mo.WebhookServer = webhook.NewServer(webhook.Options{Host: o.WebhookHost, Port: o.WebhookPort, CertDir: o.CertDir})
	}
	mgr, err := ctrl.NewManager(cfg, mo)
	if err != nil {
		return nil, fmt.Errorf("operator: manager: %w", err)
	}
	if HasKEDA(mgr.GetRESTMapper()) {
		// Read once: a KEDA installed later is seen after a restart.
		o.Build.KEDA = true
		log.Info("KEDA's ScaledObject is served: autoScalingSpec becomes ScaledObjects")
	}
	for _, newObj := range []func() apiv1.Object{
		func() apiv1.Object { return &apiv1.InferenceEndpointConfig{} },
		func() apiv1.Object { return &apiv1.JumpStartModel{} },
	} {
		r := &Reconciler{Client: mgr.GetClient(), Scheme: scheme, Clock: clk, Log: log, Build: o.Build, New: newObj}
		if err := r.SetupWithManager(mgr); err != nil {
			return nil, fmt.Errorf("operator: controller: %w", err)
		}
	}
	if o.WebhookPort != 0 {
		if o.SelfSignedWebhook {
			ca, err := selfSign(o.CertDir, o.WebhookService, clk.Now())
			if err != nil {
				return nil, err
			}
			if err := mgr.Add(&caInjector{client: mgr.GetAPIReader(), writer: mgr.GetClient(), name: o.WebhookConfigName, ca: ca, log: log}); err != nil {
				return nil, err
			}
		}
		mgr.GetWebhookServer().Register(ValidatePath, &webhook.Admission{Handler: Validator{}})
		if err := mgr.AddReadyzCheck("webhook", mgr.GetWebhookServer().StartedChecker()); err != nil {
			return nil, err
		}
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	return mgr, nil
}
