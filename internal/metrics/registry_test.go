package metrics_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	sm "github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smr "github.com/aws/aws-sdk-go-v2/service/sagemakerruntime"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/config"
	"github.com/capstan-dev/capstan/internal/engine/sim"
	"github.com/capstan-dev/capstan/internal/metrics"
	"github.com/capstan-dev/capstan/internal/runtime"
	"github.com/capstan-dev/capstan/internal/runtime/fake"
	"github.com/capstan-dev/capstan/internal/server"
	"github.com/capstan-dev/capstan/internal/testutil"
)

// desc is what the catalog compares of a registered prometheus.Desc.
type desc struct {
	Name        string
	Help        string
	ConstLabels []string // names only
	Labels      []string // variable labels, in registration order
}

// parseDesc reads a Desc's fqName, help and label names from its String():
// client_golang exposes no accessor for them (a Desc is opaque outside the
// library, by design), and String's format
//
//	Desc{fqName: "…", help: "…", unit: "…", constLabels: {k="v",…}, variableLabels: {a,c(b),…}}
//
// is the only way to read them back. Strings are Go-quoted (%q), so they are
// read with strconv.QuotedPrefix; a variable label with a constraint prints
// as c(name). Any other shape is an error, so a change of the format fails
// the test loudly instead of comparing nothing.
func parseDesc(s string) (desc, error) {
	var d desc
	rest := s
	bad := func(what string) (desc, error) { return desc{}, fmt.Errorf("Desc %q: cannot parse %s", s, what) }
	quoted := func(prefix string) (string, bool) {
		var ok bool
		if rest, ok = strings.CutPrefix(rest, prefix); !ok {
			return "", false
		}
		q, err := strconv.QuotedPrefix(rest)
		if err != nil {
			return "", false
		}
		rest = rest[len(q):]
		v, err := strconv.Unquote(q)
		return v, err == nil
	}
	var ok bool
	if d.Name, ok = quoted("Desc{fqName: "); !ok {
		return bad("fqName")
	}
	if d.Help, ok = quoted(", help: "); !ok {
		return bad("help")
	}
	if _, ok = quoted(", unit: "); !ok {
		return bad("unit")
	}
	if rest, ok = strings.CutPrefix(rest, ", constLabels: {"); !ok {
		return bad("constLabels")
	}
	for !strings.HasPrefix(rest, "}") {
		rest = strings.TrimPrefix(rest, ",")
		name, after, found := strings.Cut(rest, "=")
		if !found {
			return bad("a constant label")
		}
		rest = after
		if _, ok := quoted(""); !ok {
			return bad("constant label " + name)
		}
		d.ConstLabels = append(d.ConstLabels, name)
	}
	if rest, ok = strings.CutPrefix(rest, "}, variableLabels: {"); !ok {
		return bad("variableLabels")
	}
	labels, ok := strings.CutSuffix(rest, "}}")
	if !ok {
		return bad("the end")
	}
	if labels != "" {
		for _, l := range strings.Split(labels, ",") {
			if c, ok := strings.CutPrefix(l, "c("); ok {
				l = strings.TrimSuffix(c, ")")
			}
			d.Labels = append(d.Labels, l)
		}
	}
	return d, nil
}

func TestParseDesc(t *testing.T) {
	tests := []struct {
		d    *prometheus.Desc
		want desc
	}{
		{prometheus.NewDesc("a_total", `Help with "quotes", {braces} and commas.`, nil, nil), desc{Name: "a_total", Help: `Help with "quotes", {braces} and commas.`}},
		{prometheus.NewDesc("vllm:x", "h", []string{"tier", "direction"}, prometheus.Labels{"model_name": `m,"x"=y`, "engine": "0"}),
			desc{Name: "vllm:x", Help: "h", ConstLabels: []string{"engine", "model_name"}, Labels: []string{"tier", "direction"}}},
	}
	for _, tt := range tests {
		got, err := parseDesc(tt.d.String())
		if err != nil {
			t.Fatal(err)
		}
		if got.Name != tt.want.Name || got.Help != tt.want.Help || !slices.Equal(got.ConstLabels, tt.want.ConstLabels) || !slices.Equal(got.Labels, tt.want.Labels) {
			t.Errorf("parseDesc(%s) = %+v, want %+v", tt.d, got, tt.want)
		}
	}
}

// describe returns every Desc c registers, by name.
func describe(t *testing.T, c prometheus.Collector) map[string]desc {
	t.Helper()
	ch := make(chan *prometheus.Desc)
	go func() { c.Describe(ch); close(ch) }()
	out := map[string]desc{}
	for d := range ch {
		pd, err := parseDesc(d.String())
		if err != nil {
			t.Error(err)
			continue
		}
		out[pd.Name] = pd
	}
	return out
}

// simRuntime is the fake runtime with every replica served by one
// in-process simulated engine, as `capstan engine sim` serves it.
type simRuntime struct {
	*fake.Runtime
	addr string
}

func (r simRuntime) Start(ctx context.Context, spec runtime.ReplicaSpec) error {
	r.SetAddr(spec.ID, r.addr)
	return r.Runtime.Start(ctx, spec)
}

// runSim runs the simulated engine until the test ends and returns its
// address.
func runSim(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		pw.CloseWithError(sim.Run(ctx, sim.Options{Model: "llama-3.1-8b", GPU: "h100"}, pw, slog.New(slog.DiscardHandler)))
	}()
	t.Cleanup(func() { cancel(); <-done })
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("simulated engine: %v", err)
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	return strings.TrimSpace(strings.TrimPrefix(line, "listening on http://"))
}

// startServer starts a real capstan server, on the dev clock, whose
// replicas are served by one simulated engine (at simAddr).
func startServer(t *testing.T, simAddr string) (*server.Server, *sm.Client, *smr.Client) {
	t.Helper()
	cfg := config.Config{Listen: "127.0.0.1:0", DataDir: filepath.Join(t.TempDir(), "data"), DevClock: true}
	cfg.Default()
	frt := fake.New()
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := server.Start(ctx, server.Options{Config: cfg, Logger: slog.New(slog.DiscardHandler),
		Runtime: func(clock.Clock, *slog.Logger, string) (runtime.Runtime, error) {
			return simRuntime{Runtime: frt, addr: simAddr}, nil
		},
		RuntimeAPI: server.RuntimeAPI(cfg), Resync: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); srv.Stop(context.Background()) })
	url := "http://" + srv.Addr
	awsCfg := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", ""), Retryer: testutil.AWSRetryer}
	return srv,
		sm.NewFromConfig(awsCfg, func(o *sm.Options) { o.BaseEndpoint = aws.String(url) }),
		smr.NewFromConfig(awsCfg, func(o *smr.Options) { o.BaseEndpoint = aws.String(url) })
}

// serverDescs are the Descs of everything a fresh server registers, and
// replicaDescs those of an engine replica (the simulated engine's, with
// vLLM's names), both without the runtime group.
func serverDescs(t *testing.T, srv *server.Server) map[string]desc {
	return withoutRuntimeGroup(describe(t, srv.Registry()))
}

func replicaDescs(t *testing.T) map[string]desc {
	return withoutRuntimeGroup(describe(t, sim.NewMetrics("m").Registry))
}

func withoutRuntimeGroup(ds map[string]desc) map[string]desc {
	for name := range ds {
		if metrics.InRuntimeGroup(name) {
			delete(ds, name)
		}
	}
	return ds
}
