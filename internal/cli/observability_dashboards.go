package cli

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/capstan-dev/capstan/internal/dashboards"
)

// newObservabilityDashboardsCmd is `capstan observability dashboards`: it
// writes the Grafana dashboards and the provisioning files a stock Grafana
// loads them with.
func newObservabilityDashboardsCmd() *cobra.Command {
	var out, promURL, dashPath string
	cmd := &cobra.Command{
		Use:   "dashboards --out DIR",
		Short: "Write capstan's Grafana dashboards and provisioning files",
		Long: `Write capstan's Grafana dashboards (Inference, Cluster, Reservations) to
DIR/dashboards/*.json, and Grafana provisioning files to DIR/provisioning:
datasources/prometheus.yaml (a Prometheus datasource with uid ` + dashboards.DatasourceUID + `, which the
dashboards select) and dashboards/capstan.yaml (a file provider reading DIR/dashboards).
Point Grafana's paths.provisioning at DIR/provisioning to load them.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return errors.New("--out is required: the directory to write dashboards/ and provisioning/ into")
			}
			if dashPath == "" {
				abs, err := filepath.Abs(filepath.Join(out, "dashboards"))
				if err != nil {
					return fmt.Errorf("--out %q: %w", out, err)
				}
				dashPath = abs
			}
			o := dashboards.Options{PrometheusURL: promURL, DashboardsPath: dashPath}
			if err := o.Validate(); err != nil {
				return fmt.Errorf("invalid flag: %w", err)
			}
			written, err := dashboards.Write(out, o)
			if err != nil {
				return err
			}
			for _, p := range written {
				fmt.Fprintln(cmd.OutOrStdout(), "wrote", p)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&out, "out", "", "directory to write dashboards/ and provisioning/ into (created if missing)")
	f.StringVar(&promURL, "prometheus-url", dashboards.DefaultPrometheusURL, "URL of the Prometheus the datasource queries")
	f.StringVar(&dashPath, "dashboards-path", "", "absolute folder Grafana reads the dashboards from, if not DIR/dashboards (e.g. a container mount)")
	return cmd
}
