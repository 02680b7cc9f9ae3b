package observability

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/capstan-dev/capstan/internal/alerts"
)

// Setup is what `capstan observability up` writes into its data dir before
// it starts Prometheus.
type Setup struct {
	// Dir is the data dir: prometheus.yml, capstan-rules.yml, the token
	// file and Prometheus' TSDB (tsdb/) live in it.
	Dir string
	// Server is capstan serve's base URL; Token its admin token ("" when the
	// server has no authentication configured).
	Server, Token  string
	ScrapeInterval time.Duration
}

// File names inside Setup.Dir.
const (
	ConfigName = "prometheus.yml"
	RulesName  = "capstan-rules.yml"
	TokenName  = "admin-token"
)

// Write writes the rules (alerts.YAML, the bytes deploy/prometheus holds),
// the token file (mode 0600, only when there is a token) and the config
// that loads both, and returns the config's path.
func (s Setup) Write() (string, error) {
	dir, err := filepath.Abs(s.Dir)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("data dir: %w", err)
	}
	rules := filepath.Join(dir, RulesName)
	if err := os.WriteFile(rules, alerts.YAML(), 0o644); err != nil {
		return "", err
	}
	tokenFile := filepath.Join(dir, TokenName)
	if s.Token != "" {
		if err := os.WriteFile(tokenFile, []byte(s.Token), 0o600); err != nil {
			return "", err
		}
	} else {
		tokenFile = ""
		if err := os.Remove(filepath.Join(dir, TokenName)); err != nil && !os.IsNotExist(err) {
			return "", err
		}
	}
	cfg, err := Config(ConfigOptions{Server: s.Server, TokenFile: tokenFile, RuleFiles: []string{rules}, ScrapeInterval: s.ScrapeInterval})
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, ConfigName)
	if err := os.WriteFile(path, cfg, 0o644); err != nil {
		return "", err
	}
	return path, nil
}
