package bench

import (
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"time"
)

// API names the wire protocol a target speaks.
type API string

const (
	APIChat        API = "openai-chat"
	APICompletions API = "openai-completions"
	APISageMaker   API = "sagemaker"
)

// Arrival kinds.
const (
	ArrivalPoisson     = "poisson"
	ArrivalConstant    = "constant"
	ArrivalConcurrency = "concurrency"
	ArrivalSweep       = "sweep"
)

// Target is one server under test.
type Target struct {
	Name string `json:"name"`
	URL  string `json:"url"` // base URL, as vllm bench serve --base-url
}

// SLO holds per-request objectives; zero means "not set". A request is good
// (counts toward goodput) when it succeeded and meets every objective set.
type SLO struct {
	TTFT time.Duration `json:"ttft,omitempty"`
	TPOT time.Duration `json:"tpot,omitempty"`
	E2E  time.Duration `json:"e2e,omitempty"`
}

// IsZero reports whether no objective is set.
func (s SLO) IsZero() bool { return s == SLO{} }

// ParseSLO parses "ttft=500ms,tpot=50ms,e2e=10s".
func ParseSLO(s string) (SLO, error) {
	var slo SLO
	if strings.TrimSpace(s) == "" {
		return slo, nil
	}
	for _, part := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(part, "=")
		if !ok {
			return slo, fmt.Errorf("slo: %q is not name=duration", part)
		}
		d, err := time.ParseDuration(strings.TrimSpace(v))
		if err != nil || d <= 0 {
			return slo, fmt.Errorf("slo: %s: want a positive duration like 500ms, got %q", k, v)
		}
		switch strings.ToLower(strings.TrimSpace(k)) {
		case "ttft":
			slo.TTFT = d
		case "tpot", "itl":
			slo.TPOT = d
		case "e2e", "e2el":
			slo.E2E = d
		default:
			return slo, fmt.Errorf("slo: unknown objective %q (want ttft, tpot or e2e)", k)
		}
	}
	return slo, nil
}

// Config is the whole run, as flags set it. It is recorded verbatim in the
// JSON output.
type Config struct {
	Targets  []Target     `json:"targets"`
	API      API          `json:"api"`
	Model    string       `json:"model"`    // model name, or SageMaker endpoint name
	Workload WorkloadSpec `json:"workload"` //
	Seed     uint64       `json:"seed"`

	Arrival        string  `json:"arrival"`
	Rate           float64 `json:"rate,omitempty"`            // requests (multi-turn: sessions) per second
	Concurrency    int     `json:"concurrency,omitempty"`     // closed-loop workers
	MaxConcurrency int     `json:"max_concurrency,omitempty"` // cap on in-flight jobs; sweep's throughput stage
	SweepPoints    int     `json:"sweep_points,omitempty"`
	// Trace arrivals (--arrival trace): the built-in trace's name or a CSV
	// file, and the factor on its offsets. Rate is then the base rate.
	Trace         string        `json:"trace,omitempty"`
	TraceFile     string        `json:"trace_file,omitempty"`
	TraceScale    float64       `json:"trace_scale,omitempty"`
	TraceResolved *Trace        `json:"trace_resolved,omitempty"` // set by Validate
	Duration      time.Duration `json:"duration,omitempty"`       // per stage
	Requests      int           `json:"requests,omitempty"`       // per stage
	Timeout       time.Duration `json:"timeout"`                  // per request

	SLO    SLO    `json:"slo"`
	Stream bool   `json:"stream"`
	Out    string `json:"out,omitempty"`
	Report string `json:"report,omitempty"`
	// ScrapeMetrics reads each target's /metrics before and after each stage.
	ScrapeMetrics bool `json:"scrape_metrics"`
	// Detailed keeps every request's record in the JSON output.
	Detailed bool `json:"detailed,omitempty"`
	// ProgressInterval is how often progress is printed; 0 disables it.
	ProgressInterval time.Duration `json:"-"`
}

// Limits keep a mistyped flag from asking for the impossible.
const (
	maxTargets     = 16
	maxRate        = 1_000_000
	maxConcurrency = 1_000_000
	maxRequests    = 100_000_000
	maxSweepPoints = 100
	maxModelName   = 256
)

// ParseCompare parses --compare "name=URL,name=URL".
func ParseCompare(s string) ([]Target, error) {
	var ts []Target
	for _, part := range strings.Split(s, ",") {
		if strings.TrimSpace(part) == "" {
			continue
		}
		n, u, ok := strings.Cut(part, "=")
		if !ok || strings.TrimSpace(n) == "" {
			return nil, fmt.Errorf("compare: %q is not name=URL", part)
		}
		ts = append(ts, Target{Name: strings.TrimSpace(n), URL: strings.TrimSpace(u)})
	}
	return ts, nil
}

// Validate fills defaults and checks every field, naming the flag at fault.
func (c *Config) Validate() error {
	if len(c.Targets) == 0 {
		return errors.New("--target (or --compare) is required")
	}
	if len(c.Targets) > maxTargets {
		return fmt.Errorf("--compare: at most %d targets", maxTargets)
	}
	seen := map[string]bool{}
	for i := range c.Targets {
		t := &c.Targets[i]
		u, err := url.Parse(t.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("target %q: want an http(s) base URL like http://127.0.0.1:8080, got %q", t.Name, t.URL)
		}
		t.URL = strings.TrimRight(t.URL, "/")
		if t.Name == "" {
			t.Name = u.Host
		}
		if seen[t.Name] {
			return fmt.Errorf("--compare: target name %q used twice", t.Name)
		}
		seen[t.Name] = true
	}
	switch c.API {
	case "":
		c.API = APIChat
	case APIChat, APICompletions, APISageMaker:
	default:
		return fmt.Errorf("--api: want openai-chat, openai-completions or sagemaker, got %q", c.API)
	}
	if c.Model == "" || len(c.Model) > maxModelName {
		return fmt.Errorf("--model: required, at most %d characters", maxModelName)
	}
	if c.Timeout <= 0 {
		c.Timeout = 10 * time.Minute
	}
	if c.MaxConcurrency < 0 || c.MaxConcurrency > maxConcurrency {
		return fmt.Errorf("--max-concurrency: want 0..%d", maxConcurrency)
	}
	if err := c.parseTraceArrival(); err != nil {
		return err
	}
	if c.Arrival == "" && (c.Trace != "" || c.TraceFile != "") {
		c.Arrival = ArrivalTrace
	}
	if c.Arrival != ArrivalTrace && (c.Trace != "" || c.TraceFile != "" || c.TraceScale != 0) {
		return errors.New("--trace, --trace-file and --trace-scale need --arrival trace")
	}
	switch c.Arrival {
	case "":
		c.Arrival = ArrivalPoisson
		if c.Concurrency > 0 && c.Rate == 0 {
			c.Arrival = ArrivalConcurrency
		}
		return c.Validate()
	case ArrivalPoisson, ArrivalConstant:
		if c.Rate <= 0 || c.Rate > maxRate {
			return fmt.Errorf("--rate: %s arrivals need a rate in (0, %d] requests/s", c.Arrival, maxRate)
		}
	case ArrivalConcurrency:
		if c.Concurrency <= 0 || c.Concurrency > maxConcurrency {
			return fmt.Errorf("--concurrency: want 1..%d", maxConcurrency)
		}
	case ArrivalSweep:
		if c.SweepPoints == 0 {
			c.SweepPoints = 6
		}
		if c.SweepPoints < 2 || c.SweepPoints > maxSweepPoints {
			return fmt.Errorf("--sweep-points: want 2..%d", maxSweepPoints)
		}
		if c.MaxConcurrency == 0 {
			c.MaxConcurrency = 256
		}
	case ArrivalTrace:
		if c.Duration < 0 || c.Requests < 0 || c.Requests > maxRequests {
			return fmt.Errorf("--duration/--requests: want positive values (requests ≤ %d)", maxRequests)
		}
		// The trace's own end bounds the stage; --duration/--requests may cut it short.
		return c.validateTrace()
	default:
		return fmt.Errorf("--arrival: want poisson, constant, concurrency, sweep or trace, got %q", c.Arrival)
	}
	if c.Duration < 0 || c.Requests < 0 || c.Requests > maxRequests {
		return fmt.Errorf("--duration/--requests: want positive values (requests ≤ %d)", maxRequests)
	}
	if c.Duration == 0 && c.Requests == 0 {
		return errors.New("one of --duration or --requests is required")
	}
	return nil
}

// stage is one load level of a run: a whole run for constant, Poisson and
// concurrency arrivals; one of several for a sweep.
type stage struct {
	Name        string
	Arrival     string // poisson, constant or concurrency
	Rate        float64
	Concurrency int
}

func (s stage) String() string {
	switch s.Arrival {
	case ArrivalConcurrency:
		return fmt.Sprintf("%s (concurrency %d)", s.Name, s.Concurrency)
	case ArrivalTrace:
		return fmt.Sprintf("%s (base %.3g req/s)", s.Name, s.Rate)
	default:
		return fmt.Sprintf("%s (%s %.3g req/s)", s.Name, s.Arrival, s.Rate)
	}
}

// sweepRates returns the rates between the synchronous and the throughput
// stage, evenly spaced and excluding both ends, as GuideLLM's sweep does.
func sweepRates(lo, hi float64, n int) []float64 {
	if n <= 0 || hi <= lo {
		return nil
	}
	rates := make([]float64, n)
	for i := range n {
		rates[i] = lo + (hi-lo)*float64(i+1)/float64(n+1)
	}
	return rates
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
