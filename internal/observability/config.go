package observability

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/capstan-dev/capstan/internal/engines"

	"sigs.k8s.io/yaml"
)

// DefaultScrapeInterval is how often the generated config scrapes capstan
// and its replicas, evaluates the alert rules and refreshes discovery.
const DefaultScrapeInterval = 5 * time.Second

// Jobs of the generated config: capstan serve's own /metrics, and the
// replicas its discovery lists.
const (
	JobServer   = "capstan"
	JobReplicas = "capstan-replicas"
)

// ConfigOptions say what Config generates.
type ConfigOptions struct {
	// Server is capstan serve's base URL (http or https, host:port).
	Server string
	// TokenFile, when set, holds the admin token Prometheus sends as a
	// bearer token to /metrics and the discovery endpoint (needed once the
	// server has authentication configured). The token itself never goes
	// into the config.
	TokenFile string
	// RuleFiles are loaded by Prometheus (capstan's alert rules).
	RuleFiles []string
	// ScrapeInterval: DefaultScrapeInterval when zero.
	ScrapeInterval time.Duration
}

// The parts of Prometheus' configuration file the generated one uses
// (https://prometheus.io/docs/prometheus/latest/configuration/configuration/).
type promConfig struct {
	Global        promGlobal     `json:"global"`
	RuleFiles     []string       `json:"rule_files,omitempty"`
	ScrapeConfigs []scrapeConfig `json:"scrape_configs"`
}

type promGlobal struct {
	ScrapeInterval     string `json:"scrape_interval"`
	ScrapeTimeout      string `json:"scrape_timeout"`
	EvaluationInterval string `json:"evaluation_interval"`
}

type scrapeConfig struct {
	JobName       string         `json:"job_name"`
	Scheme        string         `json:"scheme,omitempty"`
	MetricsPath   string         `json:"metrics_path,omitempty"`
	Authorization *authorization `json:"authorization,omitempty"`
	StaticConfigs []staticConfig `json:"static_configs,omitempty"`
	HTTPSDConfigs []httpSDConfig `json:"http_sd_configs,omitempty"`
	// RelabelConfigs point each discovered replica's scrape at capstan's
	// proxy of its metrics (ReplicaMetricsPath).
	RelabelConfigs []relabelConfig `json:"relabel_configs,omitempty"`
	// MetricRelabelConfigs rename each real engine's series to the
	// catalog's (vLLM's) names, by the engine label discovery gives.
	MetricRelabelConfigs []relabelConfig `json:"metric_relabel_configs,omitempty"`
}

type relabelConfig struct {
	SourceLabels []string `json:"source_labels,omitempty"`
	Separator    string   `json:"separator,omitempty"`
	Regex        string   `json:"regex"`
	TargetLabel  string   `json:"target_label"`
	Replacement  string   `json:"replacement"`
}

// throughCapstan is the replicas job's target relabelling: Prometheus
// scrapes each replica at capstan (host), under ReplicaMetricsPath and with
// the job's admin token, never at the replica's own port, which takes only
// requests bearing the replica's key.
func throughCapstan(host string) []relabelConfig {
	return []relabelConfig{
		{SourceLabels: []string{"replica"}, Regex: "(.+)", TargetLabel: "__metrics_path__", Replacement: ReplicaMetricsPath + "$1/metrics"},
		{Regex: "(.*)", TargetLabel: "__address__", Replacement: host},
	}
}

// catalogRenames are the replicas job's metric relabelling: for every
// engine, each of its series that is one of the catalog's under another
// name (engines.MetricMap.CatalogNames) gets the catalog's name, so the
// dashboards and alert rules read llama.cpp, SGLang and TGI replicas like
// vLLM and simulated ones.
func catalogRenames() []relabelConfig {
	var out []relabelConfig
	for _, a := range engines.All() {
		for _, p := range a.Metrics.CatalogNames() {
			out = append(out, relabelConfig{SourceLabels: []string{"engine", "__name__"}, Separator: ";",
				Regex: regexp.QuoteMeta(a.Name + ";" + p[0]), TargetLabel: "__name__", Replacement: p[1]})
		}
	}
	return out
}

// catalogNames is engine → its series name → the catalog's: the renames
// catalogRenames gives Prometheus, for capstan's own scraper (CatalogName).
var catalogNames = sync.OnceValue(func() map[string]map[string]string {
	out := map[string]map[string]string{}
	for _, a := range engines.All() {
		for _, p := range a.Metrics.CatalogNames() {
			if out[a.Name] == nil {
				out[a.Name] = map[string]string{}
			}
			out[a.Name][p[0]] = p[1]
		}
	}
	return out
})

// CatalogName is the catalog's name of series name from a replica of
// engine, or name when it has none: the same renames as the generated
// config's metric relabelling.
func CatalogName(engine, name string) string {
	if n, ok := catalogNames()[engine][name]; ok {
		return n
	}
	return name
}

type authorization struct {
	Type            string `json:"type"`
	CredentialsFile string `json:"credentials_file"`
}

type staticConfig struct {
	Targets []string          `json:"targets"`
	Labels  map[string]string `json:"labels,omitempty"`
}

type httpSDConfig struct {
	URL             string         `json:"url"`
	RefreshInterval string         `json:"refresh_interval"`
	Authorization   *authorization `json:"authorization,omitempty"`
}

// ParseServer checks a capstan server URL: http or https with a host and
// nothing after it but an optional "/".
func ParseServer(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("server %q: want http://host:port or https://host:port: %w", raw, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("server %q: want http://host:port or https://host:port", raw)
	}
	if strings.Trim(u.Path, "/") != "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("server %q: want a bare base URL, without a path or query", raw)
	}
	return u, nil
}

// Config is the prometheus.yml `capstan observability up` runs Prometheus
// with: capstan's /metrics as job capstan, every ready replica from
// DiscoveryPath as job capstan-replicas (its endpoint, variant, deployment,
// replica and instance_type labels come from discovery; its metrics through
// capstan's ReplicaMetricsPath), and o.RuleFiles.
func Config(o ConfigOptions) ([]byte, error) {
	u, err := ParseServer(o.Server)
	if err != nil {
		return nil, err
	}
	iv := o.ScrapeInterval
	if iv <= 0 {
		iv = DefaultScrapeInterval
	}
	if iv < time.Second {
		return nil, fmt.Errorf("scrape interval %s: want at least 1s", iv)
	}
	var auth *authorization
	if o.TokenFile != "" {
		auth = &authorization{Type: "Bearer", CredentialsFile: o.TokenFile}
	}
	every := iv.String()
	c := promConfig{
		Global:    promGlobal{ScrapeInterval: every, ScrapeTimeout: every, EvaluationInterval: every},
		RuleFiles: o.RuleFiles,
		ScrapeConfigs: []scrapeConfig{
			{JobName: JobServer, Scheme: u.Scheme, MetricsPath: "/metrics", Authorization: auth,
				StaticConfigs: []staticConfig{{Targets: []string{u.Host}}}},
			{JobName: JobReplicas, Scheme: u.Scheme, MetricsPath: "/metrics", Authorization: auth,
				HTTPSDConfigs:        []httpSDConfig{{URL: u.Scheme + "://" + u.Host + DiscoveryPath, RefreshInterval: every, Authorization: auth}},
				RelabelConfigs:       throughCapstan(u.Host),
				MetricRelabelConfigs: catalogRenames()},
		},
	}
	b, err := yaml.Marshal(c)
	if err != nil {
		return nil, err
	}
	return append([]byte("# Generated by `capstan observability up`; rewritten at every start.\n"), b...), nil
}
