package config

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"sort"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/capstan-dev/capstan/internal/catalog"
	"github.com/capstan-dev/capstan/internal/fleet"
)

// Config is capstan.yaml.
type Config struct {
	// Listen is host:port for every API (default 127.0.0.1:8080).
	Listen string `json:"listen,omitempty"`
	// DataDir holds the store and replica logs (default ./capstan-data).
	DataDir string `json:"dataDir,omitempty"`
	// AccountID and Region appear in ARNs (defaults 000000000000, us-east-1).
	AccountID string `json:"accountId,omitempty"`
	Region    string `json:"region,omitempty"`
	// DevClock enables POST /_capstan/clock to move the server's clock.
	DevClock bool `json:"devClock,omitempty"`
	// InsecureListenAny allows a non-loopback listen address without credentials.
	InsecureListenAny bool `json:"insecureListenAny,omitempty"`
	// Credentials, when set, make both APIs require SigV4 signed with one of them.
	Credentials []Credential `json:"credentials,omitempty"`
	Engine      Engine       `json:"engine,omitempty"`
	Endpoints   Endpoints    `json:"endpoints,omitempty"`
	// Fleet is instance type → zone → count; empty means the default fleet
	// (fleet.DefaultPerZone of every catalog type in each of fleet.DefaultZones).
	Fleet map[string]map[string]int `json:"fleet,omitempty"`
}

// Credential is one access key pair.
type Credential struct {
	AccessKeyID     string `json:"accessKeyId"`
	SecretAccessKey string `json:"secretAccessKey"`
}

// Engine configures replica processes.
type Engine struct {
	// TimeScale multiplies every simulated duration of the engine (0.01 = 100× faster).
	TimeScale float64 `json:"timeScale,omitempty"`
	// Binary is the capstan binary replicas run (default: this executable).
	Binary string `json:"binary,omitempty"`
	// Args are extra flags for every replica.
	Args []string `json:"args,omitempty"`
}

// Endpoints configures the endpoint controller.
type Endpoints struct {
	// StartTimeout is how long instances may take to become healthy (default 10m).
	StartTimeout Duration `json:"startTimeout,omitempty"`
	// DrainTimeout bounds waiting for in-flight requests on a retiring replica (default 60s).
	DrainTimeout Duration `json:"drainTimeout,omitempty"`
}

// Duration is a time.Duration written as "90s" in YAML.
type Duration struct{ time.Duration }

// UnmarshalJSON parses a Go duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	s := strings.Trim(string(b), `"`)
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("invalid duration %q: %w", s, err)
	}
	d.Duration = v
	return nil
}

// MarshalJSON writes the duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return []byte(`"` + d.String() + `"`), nil }

// Load reads path strictly; an empty path gives the zero Config.
func Load(path string) (Config, error) {
	var c Config
	if path == "" {
		return c, nil
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return c, fmt.Errorf("config: %w", err)
	}
	return Parse(raw)
}

// Parse decodes YAML strictly: unknown fields are errors.
func Parse(raw []byte) (Config, error) {
	var c Config
	if len(bytes.TrimSpace(raw)) == 0 {
		return c, nil
	}
	if err := yaml.UnmarshalStrict(raw, &c); err != nil {
		return c, fmt.Errorf("config: %w", err)
	}
	return c, nil
}

// Default fills unset fields.
func (c *Config) Default() {
	if c.Listen == "" {
		c.Listen = "127.0.0.1:8080"
	}
	if c.DataDir == "" {
		c.DataDir = "./capstan-data"
	}
	if c.AccountID == "" {
		c.AccountID = "000000000000"
	}
	if c.Region == "" {
		c.Region = "us-east-1"
	}
	if c.Engine.TimeScale == 0 {
		c.Engine.TimeScale = 1
	}
	if c.Endpoints.StartTimeout.Duration == 0 {
		c.Endpoints.StartTimeout.Duration = 10 * time.Minute
	}
	if c.Endpoints.DrainTimeout.Duration == 0 {
		c.Endpoints.DrainTimeout.Duration = 60 * time.Second
	}
}

// FleetCapacity is the configured fleet, or the default one.
func (c *Config) FleetCapacity(cat *catalog.Catalog) fleet.Capacity {
	if len(c.Fleet) == 0 {
		return fleet.Default(cat)
	}
	return fleet.Capacity(c.Fleet)
}

// Validate checks every field, naming the offending one.
func (c *Config) Validate(cat *catalog.Catalog) error {
	var errs []error
	host, _, err := net.SplitHostPort(c.Listen)
	if err != nil {
		errs = append(errs, fmt.Errorf("listen: %q is not host:port: %w", c.Listen, err))
	} else if !isLoopback(host) && len(c.Credentials) == 0 && !c.InsecureListenAny {
		errs = append(errs, fmt.Errorf("listen: %q is reachable beyond this machine; configure credentials (SigV4 is then required) or set insecureListenAny / --insecure-listen-any", c.Listen))
	}
	if len(c.AccountID) != 12 || strings.Trim(c.AccountID, "0123456789") != "" {
		errs = append(errs, fmt.Errorf("accountId: %q must be 12 digits", c.AccountID))
	}
	if c.Region == "" || strings.Trim(c.Region, "abcdefghijklmnopqrstuvwxyz0123456789-") != "" {
		errs = append(errs, fmt.Errorf("region: %q must be lower-case letters, digits and dashes", c.Region))
	}
	for i, cr := range c.Credentials {
		if cr.AccessKeyID == "" || cr.SecretAccessKey == "" {
			errs = append(errs, fmt.Errorf("credentials[%d]: accessKeyId and secretAccessKey are both required", i))
		}
	}
	if c.Engine.TimeScale <= 0 || c.Engine.TimeScale > 1000 {
		errs = append(errs, fmt.Errorf("engine.timeScale: %v must be in (0, 1000]", c.Engine.TimeScale))
	}
	if c.Endpoints.StartTimeout.Duration < 0 {
		errs = append(errs, fmt.Errorf("endpoints.startTimeout: must not be negative"))
	}
	types := make([]string, 0, len(c.Fleet))
	for t := range c.Fleet {
		types = append(types, t)
	}
	sort.Strings(types)
	for _, t := range types {
		if _, err := cat.InstanceType(t); err != nil {
			errs = append(errs, fmt.Errorf("fleet.%s: unknown instance type (known: %s)", t, strings.Join(cat.InstanceTypeNames(), ", ")))
		}
		for z, n := range c.Fleet[t] {
			if n < 0 {
				errs = append(errs, fmt.Errorf("fleet.%s.%s: count %d must not be negative", t, z, n))
			}
		}
	}
	return errors.Join(errs...)
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
