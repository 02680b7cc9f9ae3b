package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/capstan-dev/capstan/internal/alerts"
	"github.com/capstan-dev/capstan/internal/observability"
)

// newObservabilityCommand is the `capstan observability` group: watching
// capstan with Prometheus (up) and Grafana's dashboards.
func newObservabilityCommand(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "observability",
		Short: "Watch capstan: a local Prometheus with its alert rules, and Grafana dashboards",
	}
	cmd.AddCommand(newObservabilityUpCommand(g), newObservabilityDashboardsCmd())
	return cmd
}

type observabilityUpOptions struct {
	prometheus, listen, dataDir, token string
	interval                           time.Duration
	readyTimeout                       time.Duration
}

func newObservabilityUpCommand(g *globalOptions) *cobra.Command {
	o := &observabilityUpOptions{}
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Run Prometheus scraping capstan and its replicas, with capstan's alert rules, until interrupted",
		Long: `Writes a prometheus.yml into the data dir that scrapes capstan serve's /metrics
(job capstan) and every ready replica the server lists at
` + observability.DiscoveryPath + ` (job capstan-replicas, labelled
with endpoint and variant, or namespace, deployment and kind), loads
capstan's alert rules, starts Prometheus with it and waits until it is ready,
prints where it is and what it scrapes, and runs until interrupted (Ctrl-C or
SIGTERM stop Prometheus cleanly).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return observabilityUp(cmd, g, o) },
	}
	f := cmd.Flags()
	f.StringVar(&o.prometheus, "prometheus", "prometheus", "the Prometheus binary: a path, or a name looked up on PATH")
	f.StringVar(&o.listen, "listen", observability.DefaultListen, "host:port Prometheus serves its UI and API on (port 0: a free one)")
	f.StringVar(&o.dataDir, "data-dir", "", "where the config, rules and TSDB go (default <user cache dir>/capstan/prometheus)")
	f.StringVar(&o.token, "token", "", "admin token (one of the server's adminTokens) Prometheus sends to /metrics and discovery (env CAPSTAN_TOKEN)")
	f.DurationVar(&o.interval, "scrape-interval", observability.DefaultScrapeInterval, "scrape, rule evaluation and discovery interval")
	f.DurationVar(&o.readyTimeout, "ready-timeout", 60*time.Second, "how long to wait for Prometheus to become ready")
	return cmd
}

func defaultObservabilityDir() (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no user cache dir (%w); pass --data-dir", err)
	}
	return filepath.Join(base, "capstan", "prometheus"), nil
}

func observabilityUp(cmd *cobra.Command, g *globalOptions, o *observabilityUpOptions) error {
	ctx := cmd.Context()
	out := cmd.OutOrStdout()
	server := strings.TrimRight(g.serverURL(), "/")
	if _, err := observability.ParseServer(server); err != nil {
		return err
	}
	if o.interval < time.Second {
		return fmt.Errorf("--scrape-interval %s: want at least 1s", o.interval)
	}
	token := adminToken(o.token)
	dir := o.dataDir
	if dir == "" {
		d, err := defaultObservabilityDir()
		if err != nil {
			return err
		}
		dir = d
	}
	// A token the server refuses is an error now, not a target that stays
	// down; a server that is not up yet only warns (Prometheus keeps trying).
	groups, err := observability.FetchTargets(ctx, server, token)
	switch {
	case errors.Is(err, observability.ErrUnauthorized) && token == "":
		return fmt.Errorf("capstan at %s wants an admin token for its metrics: pass --token or set CAPSTAN_TOKEN", server)
	case errors.Is(err, observability.ErrUnauthorized):
		return fmt.Errorf("capstan at %s refused the admin token: it must be one of the server's adminTokens", server)
	case err != nil:
		fmt.Fprintf(cmd.ErrOrStderr(), "warning: %v; Prometheus will keep trying\n", err)
	}
	cfg, err := observability.Setup{Dir: dir, Server: server, Token: token, ScrapeInterval: o.interval}.Write()
	if err != nil {
		return err
	}
	logPath := filepath.Join(filepath.Dir(cfg), "prometheus.log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	defer logFile.Close()
	p, err := observability.Start(observability.StartOptions{Binary: o.prometheus, ConfigFile: cfg, DataDir: filepath.Dir(cfg), Listen: o.listen, Log: logFile})
	if err != nil {
		return err
	}
	defer p.Stop()
	rctx, cancel := context.WithTimeout(ctx, o.readyTimeout)
	err = p.WaitReady(rctx)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return nil // interrupted while starting
		}
		return fmt.Errorf("%w (its log: %s)", err, logPath)
	}
	nAlerts := 0
	for _, gr := range alerts.Rules().Groups {
		nAlerts += len(gr.Rules)
	}
	fmt.Fprintf(out, "prometheus serving on %s\n", p.URL)
	fmt.Fprintf(out, "config %s, log %s\n", cfg, logPath)
	fmt.Fprintln(out, "targets:")
	fmt.Fprintf(out, "  %-17s %s/metrics\n", observability.JobServer, server)
	fmt.Fprintf(out, "  %-17s %s%s (%d ready replicas now)\n", observability.JobReplicas, server, observability.DiscoveryPath, len(groups))
	for _, gr := range groups {
		fmt.Fprintf(out, "    %s %s\n", strings.Join(gr.Targets, ","), describeTarget(gr.Labels))
	}
	fmt.Fprintf(out, "alert rules: %d alerts from %s\n", nAlerts, filepath.Join(filepath.Dir(cfg), observability.RulesName))
	fmt.Fprintln(out, "press Ctrl-C to stop")
	select {
	case <-ctx.Done():
		p.Stop()
		fmt.Fprintln(out, "prometheus stopped")
		return nil
	case <-p.Done():
		return fmt.Errorf("%w (its log: %s)", p.Err(), logPath)
	}
}

// describeTarget is a discovered replica's labels, in a fixed order.
func describeTarget(l map[string]string) string {
	var parts []string
	for _, k := range []string{"endpoint", "variant", "namespace", "deployment", "kind", "instance_type", "replica"} {
		if v := l[k]; v != "" {
			parts = append(parts, k+"="+v)
		}
	}
	return strings.Join(parts, " ")
}
