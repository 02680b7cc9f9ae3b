package config

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/capstan-dev/capstan/internal/alarm"
	"github.com/capstan-dev/capstan/internal/catalog"
	"github.com/capstan-dev/capstan/internal/engines"
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
	// InsecureListenAny allows a non-loopback listen address without any of
	// credentials, apiKeys or adminTokens.
	InsecureListenAny bool `json:"insecureListenAny,omitempty"`
	// Credentials, when set, make the SageMaker and Application Auto Scaling
	// APIs require SigV4 signed with one of them.
	Credentials []Credential `json:"credentials,omitempty"`
	// APIKeys are the bearer keys of the OpenAI API (/v1/*): inference only.
	APIKeys []string `json:"apiKeys,omitempty"`
	// AdminTokens are the bearer tokens of the administrative surfaces: the
	// manifests API (/apis/, capstan apply/get/describe/delete), the dev
	// clock (/_capstan/clock, capstan clock) and /metrics.
	AdminTokens []string `json:"adminTokens,omitempty"`
	// Limits bound connections, request bodies and request rates.
	Limits Limits `json:"limits,omitempty"`
	Engine Engine `json:"engine,omitempty"`
	// Engines say where the real engines (llamacpp, vllm, sglang, tgi) live
	// on this machine: container images select them (docs/engines.md).
	Engines   engines.Machine `json:"engines,omitempty"`
	Endpoints Endpoints       `json:"endpoints,omitempty"`
	// Fleet is instance type → zone → count; empty means the default fleet
	// (fleet.DefaultPerZone of every catalog type in each of fleet.DefaultZones).
	Fleet map[string]map[string]int `json:"fleet,omitempty"`
	// Cluster is where manifests' deployments run.
	Cluster Cluster `json:"cluster,omitempty"`
	// ModelSources says where manifests' models are fetched from.
	ModelSources ModelSources `json:"modelSources,omitempty"`
	// Alarms are named thresholds on capstan's metrics that a deployment's
	// automatic rollback references by name (docs/alarms.md).
	Alarms []alarm.Alarm `json:"alarms,omitempty"`
	// Sandbox confines the programs capstan starts for users: spaces and
	// engine replicas (docs/security.md#sandbox).
	Sandbox Sandbox `json:"sandbox,omitempty"`
	// MetricsStore is capstan's own metric store, which the console's
	// dashboards read (docs/observability.md#dashboards-in-the-console).
	MetricsStore MetricsStore `json:"metricsStore,omitempty"`
}

// MetricsStore says how capstan's own metric store scrapes and what it
// keeps in memory.
type MetricsStore struct {
	// ScrapeInterval is how often it reads capstan's and every ready
	// replica's metrics: 1s to 5m (default 5s).
	ScrapeInterval Duration `json:"scrapeInterval,omitempty"`
	// Retention is how long it keeps samples: 1m to 7 days (default 3h).
	Retention Duration `json:"retention,omitempty"`
	// MaxSeries bounds the series it holds: 100 to 1,000,000 (default
	// 10000); past it new series are dropped (and logged) until old ones
	// age out.
	MaxSeries int `json:"maxSeries,omitempty"`
	// Disabled turns the store off: no scraping, and the console's
	// dashboards page and /prometheus/api/v1 answer 404.
	Disabled bool `json:"disabled,omitempty"`
}

// validate checks the store's settings, naming the field at fault.
func (m MetricsStore) validate() []error {
	var errs []error
	if d := m.ScrapeInterval.Duration; d != 0 && (d < time.Second || d > 5*time.Minute) {
		errs = append(errs, fmt.Errorf("metricsStore.scrapeInterval: %v must be in [1s, 5m]", d))
	}
	if d := m.Retention.Duration; d != 0 && (d < time.Minute || d > 7*24*time.Hour) {
		errs = append(errs, fmt.Errorf("metricsStore.retention: %v must be in [1m, 168h]", d))
	}
	if n := m.MaxSeries; n != 0 && (n < 100 || n > 1_000_000) {
		errs = append(errs, fmt.Errorf("metricsStore.maxSeries: %d must be in [100, 1000000]", n))
	}
	return errs
}

// Sandbox says how spaces and replicas are confined.
type Sandbox struct {
	// Bubblewrap is the bwrap binary (default: looked up in /usr/bin, /bin
	// and the sbin directories). Set, it must work, or capstan does not start.
	Bubblewrap string `json:"bubblewrap,omitempty"`
	// AllowProcessesToReadServerSecrets, when no sandbox works on this
	// machine, starts spaces and real engines anyway, as the server's user:
	// they can then read its environment, this file and its data directory.
	// Without it they do not start (the simulated engine, which runs no
	// user code, always does).
	AllowProcessesToReadServerSecrets bool `json:"allowProcessesToReadServerSecrets,omitempty"`
}

// Cluster seeds the default HyperPod cluster at first start and sets how
// every cluster's simulated nodes behave.
type Cluster struct {
	// InstanceGroups provide the nodes of the default cluster, ml-cluster,
	// the one manifests run on when they name none; empty means the default
	// groups (two nodes of every instance type the published examples use).
	// They seed it at first start; after that it is an ordinary cluster
	// (UpdateCluster changes it) and the seed is not applied again.
	InstanceGroups []InstanceGroup `json:"instanceGroups,omitempty"`
	// LaunchTime is how long a new node takes to become ready (default
	// 30s); LaunchTimes overrides it per instance type.
	LaunchTime  Duration            `json:"launchTime,omitempty"`
	LaunchTimes map[string]Duration `json:"launchTimes,omitempty"`
	// Spot sets the simulated spot market of spot instance groups.
	Spot Spot `json:"spot,omitempty"`
	// DrainTimeout bounds how long a leaving node waits for its replicas to
	// move (default 2m).
	DrainTimeout Duration `json:"drainTimeout,omitempty"`
	// Autoscaler sets the node autoscaler's batching windows.
	Autoscaler NodeAutoscaler `json:"autoscaler,omitempty"`
}

// NodeAutoscaler is Karpenter's batching of pending replicas: a batch is
// provisioned BatchIdle after its last new replica, or BatchMax after its
// first (Karpenter's BATCH_IDLE_DURATION and BATCH_MAX_DURATION, default
// 1s and 10s).
type NodeAutoscaler struct {
	BatchIdle Duration `json:"batchIdle,omitempty"`
	BatchMax  Duration `json:"batchMax,omitempty"`
}

// Spot is the simulated spot market.
type Spot struct {
	// Seed makes the interruption schedule reproducible (default 1).
	Seed int64 `json:"seed,omitempty"`
	// MeanTimeToInterruption is the mean of a spot node's exponentially
	// distributed lifetime (default 6h; "-1s" disables interruptions).
	MeanTimeToInterruption Duration `json:"meanTimeToInterruption,omitempty"`
	// PriceFactor is the spot price as a share of on-demand (default 0.35).
	PriceFactor float64 `json:"priceFactor,omitempty"`
}

// InstanceGroup is Count nodes of one instance type.
type InstanceGroup struct {
	Name         string `json:"name"`
	InstanceType string `json:"instanceType"`
	Count        int    `json:"count"`
	// MIGLayout is the named MIG layout of every GPU of the group's nodes
	// (all-1g.10gb, all-balanced, mixed-1-3g.40gb-1-4g.40gb; see
	// docs/mig.md); empty leaves the GPUs whole.
	MIGLayout string `json:"migLayout,omitempty"`
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
	// MaxArchiveBytes bounds what one model archive (a SageMaker
	// model.tar.gz) may extract to, in bytes; 0 = the smaller of 64 GiB and
	// half the space free in cacheDir's file system at start.
	MaxArchiveBytes int64 `json:"maxArchiveBytes,omitempty"`
	// MaxCacheBytes bounds the whole model cache, in bytes: an archive whose
	// extraction would take it past this is refused; 0 = the smaller of
	// 1 TiB and what the cache holds at start plus 80% of the space then
	// free. See docs/model-sources.md.
	MaxCacheBytes int64 `json:"maxCacheBytes,omitempty"`
}

// S3 is the server's one S3 server, for s3 model sources and asynchronous
// inference (see modelsource.NewS3Client).
type S3 struct {
	// Endpoint is the S3 API URL (AWS S3 itself: https://s3.<region>.amazonaws.com);
	// empty means no S3: s3 sources are refused and nothing is contacted.
	Endpoint string `json:"endpoint,omitempty"`
	Region   string `json:"region,omitempty"`
	// AccessKeyID and SecretAccessKey; empty means AWS_ACCESS_KEY_ID and
	// AWS_SECRET_ACCESS_KEY from the environment, else unsigned requests.
	// The AWS default chain (profiles, instance metadata) is never walked.
	AccessKeyID     string `json:"accessKeyId,omitempty"`
	SecretAccessKey string `json:"secretAccessKey,omitempty"`
}

// Credential is one access key pair.
type Credential struct {
	AccessKeyID     string `json:"accessKeyId"`
	SecretAccessKey string `json:"secretAccessKey"`
}

// MinKeyLength is the shortest accepted API key or admin token.
const MinKeyLength = 16

// Limits bound what clients can hold of the server. Every field has a
// default; zero means the default.
type Limits struct {
	// ReadHeaderTimeout bounds sending the request line and headers (default 10s).
	ReadHeaderTimeout Duration `json:"readHeaderTimeout,omitempty"`
	// BodyReadTimeout is the longest a request body may go without a byte
	// arriving (default 30s): a client that stops sending is cut, a slow
	// but steady one is not.
	BodyReadTimeout Duration `json:"bodyReadTimeout,omitempty"`
	// WriteTimeout is the longest one write of a response may stay blocked
	// on a client that stopped reading (default 60s). A response that keeps
	// flowing (a streamed completion) may last any time.
	WriteTimeout Duration `json:"writeTimeout,omitempty"`
	// IdleTimeout closes keep-alive connections idle this long (default 120s).
	IdleTimeout Duration `json:"idleTimeout,omitempty"`
	// MaxConnections caps open client connections (default 512, below a
	// typical 1024 file-descriptor limit). At the cap a new connection is
	// admitted by closing the connection idle longest; with none idle it
	// waits to be accepted.
	MaxConnections int `json:"maxConnections,omitempty"`
	// MaxConnectionsPerPeer caps the open connections of one remote IP
	// (default a quarter of MaxConnections, at least 1). Past it the peer's
	// own longest-idle connection is closed to admit the new one, or, with
	// none idle, the new one is closed at once. Loopback peers are exempt
	// unless LimitLoopback.
	MaxConnectionsPerPeer int `json:"maxConnectionsPerPeer,omitempty"`
	// MaxInflightBodyBytes caps the request-body bytes of all requests in
	// flight together (default 256 MiB); a request that would pass it is
	// answered 503 with Retry-After.
	MaxInflightBodyBytes int64 `json:"maxInflightBodyBytes,omitempty"`
	// MaxInflightBodyBytesPerCredential caps the share of that budget held
	// by requests naming one configured credential: the access key id a
	// SigV4 request claims (before its signature is checked), or an API key
	// or admin token (default a quarter of MaxInflightBodyBytes).
	MaxInflightBodyBytesPerCredential int64 `json:"maxInflightBodyBytesPerCredential,omitempty"`
	// MaxInflightBodyBytesPerPeer caps the share held by one remote IP
	// (default a quarter of MaxInflightBodyBytes). Loopback peers are exempt
	// unless LimitLoopback.
	MaxInflightBodyBytesPerPeer int64 `json:"maxInflightBodyBytesPerPeer,omitempty"`
	// LimitLoopback applies the per-address limits (MaxConnectionsPerPeer,
	// MaxInflightBodyBytesPerPeer, and the rate limit for requests without
	// a configured credential) to loopback peers too. Off by default: a
	// loopback peer is this host, often a reverse proxy relaying everyone.
	LimitLoopback bool `json:"limitLoopback,omitempty"`
	// RateLimit applies per credential (access key id, API key, admin
	// token) and per remote IP for requests without a known one.
	RateLimit RateLimit `json:"rateLimit,omitempty"`
}

// RateLimit is a token bucket: RequestsPerSecond sustained, Burst at once.
type RateLimit struct {
	// RequestsPerSecond is the sustained rate (default 1000).
	RequestsPerSecond float64 `json:"requestsPerSecond,omitempty"`
	// Burst is the bucket size (default 2000).
	Burst int `json:"burst,omitempty"`
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
	// ServerlessIdleTimeout is how long a serverless variant keeps replicas
	// with no request in flight before scaling back to its provisioned
	// concurrency (default 5m).
	ServerlessIdleTimeout Duration `json:"serverlessIdleTimeout,omitempty"`
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
	if c.Cluster.LaunchTime.Duration == 0 {
		c.Cluster.LaunchTime.Duration = 30 * time.Second
	}
	if c.Cluster.DrainTimeout.Duration == 0 {
		c.Cluster.DrainTimeout.Duration = 2 * time.Minute
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
	l := &c.Limits
	for _, d := range []struct {
		f *Duration
		v time.Duration
	}{{&l.ReadHeaderTimeout, 10 * time.Second}, {&l.BodyReadTimeout, 30 * time.Second},
		{&l.WriteTimeout, 60 * time.Second}, {&l.IdleTimeout, 120 * time.Second}} {
		if d.f.Duration == 0 {
			d.f.Duration = d.v
		}
	}
	if l.MaxConnections == 0 {
		l.MaxConnections = 512
	}
	if l.MaxConnectionsPerPeer == 0 {
		l.MaxConnectionsPerPeer = max(1, l.MaxConnections/4)
	}
	if l.MaxInflightBodyBytes == 0 {
		l.MaxInflightBodyBytes = 256 << 20
	}
	if l.MaxInflightBodyBytesPerCredential == 0 {
		l.MaxInflightBodyBytesPerCredential = max(1, l.MaxInflightBodyBytes/4)
	}
	if l.MaxInflightBodyBytesPerPeer == 0 {
		l.MaxInflightBodyBytesPerPeer = max(1, l.MaxInflightBodyBytes/4)
	}
	if l.RateLimit.RequestsPerSecond == 0 {
		l.RateLimit.RequestsPerSecond = 1000
	}
	if l.RateLimit.Burst == 0 {
		l.RateLimit.Burst = 2000
	}
}

// AuthConfigured reports whether any client authentication is configured:
// then every surface requires its own kind (SigV4, API key, admin token)
// and refuses all requests where that kind is not configured.
func (c *Config) AuthConfigured() bool {
	return len(c.Credentials) > 0 || len(c.APIKeys) > 0 || len(c.AdminTokens) > 0
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
	} else if !isLoopback(host) && !c.AuthConfigured() && !c.InsecureListenAny {
		errs = append(errs, fmt.Errorf("listen: %q is reachable beyond this machine; configure credentials, apiKeys and adminTokens (every API then requires them) or set insecureListenAny / --insecure-listen-any", c.Listen))
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
	errs = append(errs, c.validateKeys()...)
	errs = append(errs, c.Limits.validate()...)
	errs = append(errs, c.MetricsStore.validate()...)
	if c.Engine.TimeScale <= 0 || c.Engine.TimeScale > 1000 {
		errs = append(errs, fmt.Errorf("engine.timeScale: %v must be in (0, 1000]", c.Engine.TimeScale))
	}
	errs = append(errs, c.validateEngines()...)
	if c.Endpoints.StartTimeout.Duration < 0 {
		errs = append(errs, fmt.Errorf("endpoints.startTimeout: must not be negative"))
	}
	if c.Endpoints.ServerlessIdleTimeout.Duration < 0 {
		errs = append(errs, fmt.Errorf("endpoints.serverlessIdleTimeout: must not be negative"))
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
	if d := c.Cluster.LaunchTime.Duration; d < 0 || d > 24*time.Hour {
		errs = append(errs, fmt.Errorf("cluster.launchTime: %v must be in [0, 24h]", d))
	}
	for _, t := range slices.Sorted(maps.Keys(c.Cluster.LaunchTimes)) {
		if _, err := cat.InstanceType(t); err != nil {
			errs = append(errs, fmt.Errorf("cluster.launchTimes.%s: unknown instance type", t))
		}
		if d := c.Cluster.LaunchTimes[t].Duration; d < 0 || d > 24*time.Hour {
			errs = append(errs, fmt.Errorf("cluster.launchTimes.%s: %v must be in [0, 24h]", t, d))
		}
	}
	if f := c.Cluster.Spot.PriceFactor; f < 0 || f > 1 {
		errs = append(errs, fmt.Errorf("cluster.spot.priceFactor: %v must be in [0, 1]", f))
	}
	if d := c.Cluster.DrainTimeout.Duration; d < 0 || d > time.Hour {
		errs = append(errs, fmt.Errorf("cluster.drainTimeout: %v must be in [0, 1h]", d))
	}
	if a := c.Cluster.Autoscaler; a.BatchIdle.Duration < 0 || a.BatchMax.Duration < 0 || a.BatchMax.Duration > 10*time.Minute ||
		(a.BatchMax.Duration > 0 && a.BatchIdle.Duration > a.BatchMax.Duration) {
		errs = append(errs, fmt.Errorf("cluster.autoscaler: batchIdle %v and batchMax %v must satisfy 0 ≤ batchIdle ≤ batchMax ≤ 10m",
			a.BatchIdle.Duration, a.BatchMax.Duration))
	}
	names := map[string]bool{}
	for i, g := range c.Cluster.InstanceGroups {
		p := fmt.Sprintf("cluster.instanceGroups[%d]", i)
		if g.Name == "" || names[g.Name] {
			errs = append(errs, fmt.Errorf("%s.name: %q is empty or repeated", p, g.Name))
		}
		names[g.Name] = true
		it, err := cat.InstanceType(g.InstanceType)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s.instanceType: unknown instance type %q", p, g.InstanceType))
		} else if g.MIGLayout != "" {
			if err := validLayout(cat, it, g.MIGLayout); err != nil {
				errs = append(errs, fmt.Errorf("%s.migLayout: %w", p, err))
			}
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
	for _, b := range []struct {
		field string
		v     int64
	}{{"modelSources.maxArchiveBytes", c.ModelSources.MaxArchiveBytes}, {"modelSources.maxCacheBytes", c.ModelSources.MaxCacheBytes}} {
		if b.v < 0 {
			errs = append(errs, fmt.Errorf("%s: %d must be a byte count (0 or unset: the default, scaled to the free disk space)", b.field, b.v))
		}
	}
	if err := alarm.Validate(c.Alarms); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// validateKeys checks apiKeys and adminTokens: long enough, each used
// once, and never a SigV4 secret (a key that signs requests must not also
// be sent in the clear as a bearer key), nor both an API key and an admin
// token (inference keys must not administer).
func (c *Config) validateKeys() []error {
	var errs []error
	seen := map[string]string{}
	for _, cr := range c.Credentials {
		if cr.SecretAccessKey != "" {
			seen[cr.SecretAccessKey] = "a credentials secretAccessKey"
		}
	}
	for _, list := range []struct {
		field string
		keys  []string
	}{{"apiKeys", c.APIKeys}, {"adminTokens", c.AdminTokens}} {
		for i, k := range list.keys {
			p := fmt.Sprintf("%s[%d]", list.field, i)
			switch {
			case len(k) < MinKeyLength:
				errs = append(errs, fmt.Errorf("%s: must be at least %d characters", p, MinKeyLength))
			case strings.ContainsAny(k, " \t\r\n"):
				errs = append(errs, fmt.Errorf("%s: must not contain whitespace", p))
			case seen[k] != "":
				errs = append(errs, fmt.Errorf("%s: repeats %s; use a distinct key", p, seen[k]))
			}
			if seen[k] == "" {
				seen[k] = p
			}
		}
	}
	return errs
}

func (l *Limits) validate() []error {
	var errs []error
	for _, d := range []struct {
		field string
		v     time.Duration
	}{{"limits.readHeaderTimeout", l.ReadHeaderTimeout.Duration}, {"limits.bodyReadTimeout", l.BodyReadTimeout.Duration},
		{"limits.writeTimeout", l.WriteTimeout.Duration}, {"limits.idleTimeout", l.IdleTimeout.Duration}} {
		if d.v <= 0 {
			errs = append(errs, fmt.Errorf("%s: %s must be positive", d.field, d.v))
		}
	}
	if l.MaxConnections < 1 {
		errs = append(errs, fmt.Errorf("limits.maxConnections: %d must be at least 1", l.MaxConnections))
	}
	if l.MaxConnectionsPerPeer < 1 || l.MaxConnectionsPerPeer > max(1, l.MaxConnections) {
		errs = append(errs, fmt.Errorf("limits.maxConnectionsPerPeer: %d must be between 1 and limits.maxConnections (%d)", l.MaxConnectionsPerPeer, l.MaxConnections))
	}
	if l.MaxInflightBodyBytes < 1<<20 {
		errs = append(errs, fmt.Errorf("limits.maxInflightBodyBytes: %d must be at least 1 MiB (1048576)", l.MaxInflightBodyBytes))
	}
	for _, b := range []struct {
		field string
		v     int64
	}{{"limits.maxInflightBodyBytesPerCredential", l.MaxInflightBodyBytesPerCredential}, {"limits.maxInflightBodyBytesPerPeer", l.MaxInflightBodyBytesPerPeer}} {
		if b.v < 1 || b.v > l.MaxInflightBodyBytes {
			errs = append(errs, fmt.Errorf("%s: %d must be between 1 and limits.maxInflightBodyBytes (%d)", b.field, b.v, l.MaxInflightBodyBytes))
		}
	}
	if l.RateLimit.RequestsPerSecond <= 0 {
		errs = append(errs, fmt.Errorf("limits.rateLimit.requestsPerSecond: %v must be positive", l.RateLimit.RequestsPerSecond))
	}
	if l.RateLimit.Burst < 1 {
		errs = append(errs, fmt.Errorf("limits.rateLimit.burst: %d must be at least 1", l.RateLimit.Burst))
	}
	return errs
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// validLayout checks a named MIG layout against the GPU of it; the error
// names the GPU and the profile at fault.
func validLayout(cat *catalog.Catalog, it catalog.InstanceType, layout string) error {
	gpu, err := cat.GPU(it.Device())
	if err != nil {
		return fmt.Errorf("instance type %s: %w", it.Name, err)
	}
	if _, err := gpu.Layout(layout); err != nil {
		return fmt.Errorf("%s on %s: %w", layout, it.Name, err)
	}
	return nil
}

// Bounds of engines.<name>.args.
const (
	maxEngineArgs     = 64
	maxEngineArgBytes = 4096
)

// validateEngines checks capstan.yaml's engines map: known real engines
// only (the simulator is engine:), a binary that is there when one is
// named, bounded extra flags.
func (c *Config) validateEngines() []error {
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(c.Engines)) {
		inst := c.Engines[name]
		a, err := engines.ByName(name)
		if err != nil || a.Name == engines.Sim {
			errs = append(errs, fmt.Errorf("engines.%s: not an engine; want one of llamacpp, vllm, sglang, tgi (the simulator is configured under engine:)", name))
			continue
		}
		if inst.Binary != "" {
			if _, err := a.Resolve(inst); err != nil {
				errs = append(errs, fmt.Errorf("engines.%s.binary: %w", name, err))
			}
		}
		if len(inst.Args) > maxEngineArgs {
			errs = append(errs, fmt.Errorf("engines.%s.args: %d flags, at most %d", name, len(inst.Args), maxEngineArgs))
		}
		for i, arg := range inst.Args {
			if len(arg) > maxEngineArgBytes || strings.ContainsRune(arg, 0) {
				errs = append(errs, fmt.Errorf("engines.%s.args[%d]: longer than %d bytes or holds a NUL", name, i, maxEngineArgBytes))
			}
		}
	}
	return errs
}
