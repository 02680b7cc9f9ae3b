package config

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
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
	// Cluster is where manifests' deployments run.
	Cluster Cluster `json:"cluster,omitempty"`
	// ModelSources says where manifests' models are fetched from.
	ModelSources ModelSources `json:"modelSources,omitempty"`
}

// Cluster is the embedded server's default cluster.
type Cluster struct {
	// InstanceGroups provide the nodes; empty means the default groups
	// (two nodes of every instance type the published examples use).
	InstanceGroups []InstanceGroup `json:"instanceGroups,omitempty"`
}

// InstanceGroup is Count nodes of one instance type.
type InstanceGroup struct {
	Name         string `json:"name"`
	InstanceType string `json:"instanceType"`
	Count        int    `json:"count"`
}

// ModelSources configures model downloads.
type ModelSources struct {
	// CacheDir holds downloaded models (default <dataDir>/models).
	CacheDir string `json:"cacheDir,omitempty"`
	S3       S3     `json:"s3,omitempty"`
	// FSxRoot is where FSx file systems are mounted: an fsx source is
	// FSxRoot/<fileSystemId>/<mountName>/<modelLocation> (default <dataDir>/fsx).
	FSxRoot string `json:"fsxRoot,omitempty"`
	// HuggingFaceEndpoint is the hub URL (default https://huggingface.co).
	HuggingFaceEndpoint string `json:"huggingFaceEndpoint,omitempty"`
}

// S3 is an S3-compatible endpoint for s3 model sources.
type S3 struct {
	// Endpoint is the S3 API URL; empty means AWS's own for the region.
	Endpoint string `json:"endpoint,omitempty"`
	Region   string `json:"region,omitempty"`
	// AccessKeyID and SecretAccessKey; empty means the AWS default chain
	// (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, profiles).
	AccessKeyID     string `json:"accessKeyId,omitempty"`
	SecretAccessKey string `json:"secretAccessKey,omitempty"`
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
	if c.ModelSources.CacheDir == "" {
		c.ModelSources.CacheDir = filepath.Join(c.DataDir, "models")
	}
	if c.ModelSources.FSxRoot == "" {
		c.ModelSources.FSxRoot = filepath.Join(c.DataDir, "fsx")
	}
	if c.ModelSources.HuggingFaceEndpoint == "" {
		c.ModelSources.HuggingFaceEndpoint = "https://huggingface.co"
	}
	if c.ModelSources.S3.Region == "" {
		c.ModelSources.S3.Region = c.Region
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
	names := map[string]bool{}
	for i, g := range c.Cluster.InstanceGroups {
		p := fmt.Sprintf("cluster.instanceGroups[%d]", i)
		if g.Name == "" || names[g.Name] {
			errs = append(errs, fmt.Errorf("%s.name: %q is empty or repeated", p, g.Name))
		}
		names[g.Name] = true
		if _, err := cat.InstanceType(g.InstanceType); err != nil {
			errs = append(errs, fmt.Errorf("%s.instanceType: unknown instance type %q", p, g.InstanceType))
		}
		if g.Count < 0 || g.Count > 1000 {
			errs = append(errs, fmt.Errorf("%s.count: %d must be in [0, 1000]", p, g.Count))
		}
	}
	for field, u := range map[string]string{"modelSources.s3.endpoint": c.ModelSources.S3.Endpoint, "modelSources.huggingFaceEndpoint": c.ModelSources.HuggingFaceEndpoint} {
		if u == "" {
			continue
		}
		if pu, err := url.Parse(u); err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" {
			errs = append(errs, fmt.Errorf("%s: %q is not an http(s) URL", field, u))
		}
	}
	if (c.ModelSources.S3.AccessKeyID == "") != (c.ModelSources.S3.SecretAccessKey == "") {
		errs = append(errs, fmt.Errorf("modelSources.s3: accessKeyId and secretAccessKey go together"))
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
