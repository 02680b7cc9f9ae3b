package triggers

import (
	"context"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/internal/autoscale"
	"github.com/capstan-dev/capstan/internal/gateway"
	"github.com/capstan-dev/capstan/internal/manifest"
)

func ptr[T any](v T) *T { return &v }

func dur(s int) *time.Duration { d := time.Duration(s) * time.Second; return &d }

func TestBuildConfig(t *testing.T) {
	cases := []struct {
		name string
		spec *manifest.AutoScalingSpec
		want autoscale.Config
	}{
		{
			name: "nil spec gets the HyperPod defaults",
			spec: nil,
			want: autoscale.Config{
				MinReplicas: 1, MaxReplicas: 5, PollingInterval: 30 * time.Second,
				CooldownPeriod: 300 * time.Second, InitialCooldownPeriod: 300 * time.Second,
				Behavior: &autoscale.Behavior{ScaleUp: &autoscale.Rules{StabilizationWindow: dur(0)}, ScaleDown: &autoscale.Rules{StabilizationWindow: dur(300)}},
				Fallback: &autoscale.Fallback{FailureThreshold: DefaultFailureThreshold, Replicas: 1, Behavior: autoscale.FallbackCurrentReplicasIfHigher},
			},
		},
		{
			name: "every field maps",
			spec: &manifest.AutoScalingSpec{
				MinReplicaCount: ptr[int32](0), MaxReplicaCount: ptr[int32](9), PollingInterval: ptr[int32](15),
				CooldownPeriod: ptr[int32](120), InitialCooldownPeriod: ptr[int32](60),
				ScaleDownStabilizationTime: ptr[int32](60), ScaleUpStabilizationTime: ptr[int32](5),
			},
			want: autoscale.Config{
				MinReplicas: 0, MaxReplicas: 9, PollingInterval: 15 * time.Second,
				CooldownPeriod: 120 * time.Second, InitialCooldownPeriod: 60 * time.Second,
				Behavior: &autoscale.Behavior{ScaleUp: &autoscale.Rules{StabilizationWindow: dur(5)}, ScaleDown: &autoscale.Rules{StabilizationWindow: dur(60)}},
				// Fallback never asks for fewer than one replica.
				Fallback: &autoscale.Fallback{FailureThreshold: DefaultFailureThreshold, Replicas: 1, Behavior: autoscale.FallbackCurrentReplicasIfHigher},
			},
		},
		{
			name: "fallback replicas follow minReplicaCount",
			spec: &manifest.AutoScalingSpec{MinReplicaCount: ptr[int32](3), MaxReplicaCount: ptr[int32](4)},
			want: autoscale.Config{
				MinReplicas: 3, MaxReplicas: 4, PollingInterval: 30 * time.Second,
				CooldownPeriod: 300 * time.Second, InitialCooldownPeriod: 300 * time.Second,
				Behavior: &autoscale.Behavior{ScaleUp: &autoscale.Rules{StabilizationWindow: dur(0)}, ScaleDown: &autoscale.Rules{StabilizationWindow: dur(300)}},
				Fallback: &autoscale.Fallback{FailureThreshold: DefaultFailureThreshold, Replicas: 3, Behavior: autoscale.FallbackCurrentReplicasIfHigher},
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src, clk := newFakes()
			cfg, trs, err := Build(c.spec, Env{Endpoint: "ep", Source: src, Clock: clk})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(cfg, c.want) {
				t.Fatalf("config\n got %+v\nwant %+v", cfg, c.want)
			}
			if len(trs) != 1 || trs[0].Name() != "ep-default-trigger" {
				t.Fatalf("triggers = %v, want the default one", trs)
			}
			if got := trs[0].Target(); got != (autoscale.Target{Type: autoscale.Value, Value: DefaultTriggerTarget}) {
				t.Fatalf("default target = %+v", got)
			}
		})
	}
}

func TestBuildTriggers(t *testing.T) {
	cw := func(name, ns, metric string, mut ...func(*manifest.CloudWatchTrigger)) manifest.CloudWatchTrigger {
		c := manifest.CloudWatchTrigger{Name: name, Namespace: ns, MetricName: metric, TargetValue: ptr(10.0)}
		for _, m := range mut {
			m(&c)
		}
		return c
	}
	prom := func(name string, mut ...func(*manifest.PrometheusTrigger)) manifest.PrometheusTrigger {
		p := manifest.PrometheusTrigger{Name: name, ServerAddress: "http://127.0.0.1:9090", Query: "sum(up)", TargetValue: ptr(2.0)}
		for _, m := range mut {
			m(&p)
		}
		return p
	}
	type want struct {
		names   []string
		targets []autoscale.Target
	}
	cases := []struct {
		name    string
		spec    manifest.AutoScalingSpec
		want    want
		wantErr string
	}{
		{
			name: "single cloudwatch with defaulted name, Average → AverageValue",
			spec: manifest.AutoScalingSpec{CloudWatchTrigger: ptr(cw("", "AWS/SageMaker", "Invocations", func(c *manifest.CloudWatchTrigger) {
				c.ActivationTargetValue = ptr(5.0)
				c.Dimensions = []manifest.Dimension{{Name: "EndpointName", Value: "ep"}, {Name: "VariantName", Value: "AllTraffic"}}
			}))},
			want: want{[]string{"ep-scaled-object-cloudwatch-trigger"}, []autoscale.Target{{Type: autoscale.AverageValue, Value: 10, Activation: 5}}},
		},
		{
			name: "list wins over single; Value → Value",
			spec: manifest.AutoScalingSpec{
				CloudWatchTrigger: ptr(cw("ignored", "AWS/SageMaker", "Invocations")),
				CloudWatchTriggerList: []manifest.CloudWatchTrigger{
					cw("", "capstan", "QueueDepth"),
					cw("kv", "capstan", "KVCacheUtilization", func(c *manifest.CloudWatchTrigger) { c.MetricType = "Value"; c.TargetValue = ptr(0.8) }),
				},
				PrometheusTrigger:     ptr(prom("ignored-too")),
				PrometheusTriggerList: []manifest.PrometheusTrigger{prom(""), prom("p2", func(p *manifest.PrometheusTrigger) { p.MetricType = "Value" })},
			},
			want: want{
				[]string{"ep-scaled-object-cloudwatch-trigger-0", "kv", "ep-scaled-object-prometheus-trigger-0", "p2"},
				[]autoscale.Target{{Type: autoscale.AverageValue, Value: 10}, {Type: autoscale.Value, Value: 0.8}, {Type: autoscale.AverageValue, Value: 2}, {Type: autoscale.Value, Value: 2}},
			},
		},
		{
			name: "single prometheus",
			spec: manifest.AutoScalingSpec{PrometheusTrigger: ptr(prom("q", func(p *manifest.PrometheusTrigger) { p.CustomHeaders = "X-Scope-OrgID=t1, A=b" }))},
			want: want{[]string{"q"}, []autoscale.Target{{Type: autoscale.AverageValue, Value: 2}}},
		},
		{
			name: "EndpointName of another endpoint",
			spec: manifest.AutoScalingSpec{CloudWatchTrigger: ptr(cw("", "AWS/SageMaker", "Invocations", func(c *manifest.CloudWatchTrigger) {
				c.Dimensions = []manifest.Dimension{{Name: "EndpointName", Value: "other"}}
			}))},
			wantErr: `autoScalingSpec.cloudWatchTrigger.dimensions[0]: EndpointName "other"`,
		},
		{
			name:    "unknown namespace",
			spec:    manifest.AutoScalingSpec{CloudWatchTrigger: ptr(cw("", "AWS/SQS", "ApproximateNumberOfMessagesVisible"))},
			wantErr: "autoScalingSpec.cloudWatchTrigger.namespace",
		},
		{
			name:    "unknown metric",
			spec:    manifest.AutoScalingSpec{CloudWatchTriggerList: []manifest.CloudWatchTrigger{cw("", "capstan", "Invocations")}},
			wantErr: "autoScalingSpec.cloudWatchTriggerList[0].metricName",
		},
		{
			name:    "not a statistic",
			spec:    manifest.AutoScalingSpec{CloudWatchTrigger: ptr(cw("", "AWS/SageMaker", "ModelLatency", func(c *manifest.CloudWatchTrigger) { c.MetricStat = "p100" }))},
			wantErr: "autoScalingSpec.cloudWatchTrigger.metricStat",
		},
		{
			name:    "duplicate names",
			spec:    manifest.AutoScalingSpec{CloudWatchTrigger: ptr(cw("same", "capstan", "QueueDepth")), PrometheusTrigger: ptr(prom("same"))},
			wantErr: `autoScalingSpec.prometheusTrigger.name: "same"`,
		},
		{
			name:    "bad custom headers",
			spec:    manifest.AutoScalingSpec{PrometheusTrigger: ptr(prom("", func(p *manifest.PrometheusTrigger) { p.CustomHeaders = "novalue" }))},
			wantErr: "autoScalingSpec.prometheusTrigger.customHeaders",
		},
		{
			name:    "bad server address",
			spec:    manifest.AutoScalingSpec{PrometheusTrigger: ptr(prom("", func(p *manifest.PrometheusTrigger) { p.ServerAddress = "ftp://x" }))},
			wantErr: "autoScalingSpec.prometheusTrigger.serverAddress",
		},
		{
			name:    "max below min (the scaler's own check)",
			spec:    manifest.AutoScalingSpec{MinReplicaCount: ptr[int32](3), MaxReplicaCount: ptr[int32](2)},
			wantErr: "maxReplicas",
		},
		{
			name:    "target too small for the scaler",
			spec:    manifest.AutoScalingSpec{PrometheusTrigger: ptr(prom("", func(p *manifest.PrometheusTrigger) { p.TargetValue = ptr(0.0001) }))},
			wantErr: "target",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src, clk := newFakes()
			spec := c.spec
			_, trs, err := Build(&spec, Env{Endpoint: "ep", Source: src, Clock: clk})
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			var targets []autoscale.Target
			for _, tr := range trs {
				names, targets = append(names, tr.Name()), append(targets, tr.Target())
			}
			if !reflect.DeepEqual(names, c.want.names) || !reflect.DeepEqual(targets, c.want.targets) {
				t.Fatalf("got %v %+v\nwant %v %+v", names, targets, c.want.names, c.want.targets)
			}
			// Build defaults a copy: the caller's spec is untouched.
			if !reflect.DeepEqual(spec, c.spec) || spec.MinReplicaCount != nil {
				t.Fatalf("Build mutated the spec: %+v", spec)
			}
		})
	}
}

func TestBuildEnvErrors(t *testing.T) {
	src, clk := newFakes()
	if _, _, err := Build(nil, Env{Endpoint: "ep", Source: src}); err == nil || !strings.Contains(err.Error(), "Clock") {
		t.Fatalf("no clock: err = %v", err)
	}
	if _, _, err := Build(nil, Env{Endpoint: "ep", Clock: clk}); err == nil || !strings.Contains(err.Error(), "Source") {
		t.Fatalf("no source for the default trigger: err = %v", err)
	}
}

// TestDefaultTriggerScales drives a Scaler built from an empty spec with the
// hand-fed source: demand above 4 per replica scales out, and held requests
// at zero replicas activate it.
func TestDefaultTriggerScales(t *testing.T) {
	ctx := context.Background()
	src, clk := newFakes()
	cfg, trs, err := Build(&manifest.AutoScalingSpec{MinReplicaCount: ptr[int32](0), MaxReplicaCount: ptr[int32](10)}, Env{Endpoint: "ep", Source: src, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	s, err := autoscale.New(cfg, clk, trs...)
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name                       string
		replicas, inflight, queued int
		want                       int
	}{
		{"idle at zero stays", 0, 0, 0, 0},
		{"held request at zero activates", 0, 0, 1, 1},
		{"16 at one replica wants 4", 1, 4, 12, 4},
		{"4 per replica holds", 4, 16, 0, 4},
		{"30 at 4 replicas wants 8", 4, 16, 14, 8},
	}
	for _, st := range steps {
		clk.Step(cfg.PollingInterval)
		src.set(func(s *gateway.EndpointSnapshot) {
			s.Replicas, s.InFlight, s.Queued = st.replicas, st.inflight, st.queued
		})
		d, err := s.Reconcile(ctx, st.replicas)
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if d.Desired != st.want {
			t.Fatalf("%s: desired %d (%s), want %d; inputs %+v", st.name, d.Desired, d.Reason, st.want, d.Inputs)
		}
	}
}

// TestFailingSourceNeverScalesToZero: a Prometheus that answers 500 for
// ever, min 0 and short cooldowns; whatever the current count, the scaler
// never goes to zero nor below it, and fallback kicks in after the threshold.
func TestFailingSourceNeverScalesToZero(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.Error(w, `{"status":"error","errorType":"internal","error":"boom"}`, http.StatusInternalServerError)
	}))
	defer srv.Close()
	for _, current := range []int{0, 1, 3} {
		t.Run("current "+string(rune('0'+current)), func(t *testing.T) {
			src, clk := newFakes()
			spec := &manifest.AutoScalingSpec{
				MinReplicaCount: ptr[int32](0), MaxReplicaCount: ptr[int32](5), PollingInterval: ptr[int32](5),
				CooldownPeriod: ptr[int32](10), InitialCooldownPeriod: ptr[int32](0),
				PrometheusTrigger: &manifest.PrometheusTrigger{ServerAddress: srv.URL, Query: "sum(x)", TargetValue: ptr(1.0)},
			}
			cfg, trs, err := Build(spec, Env{Endpoint: "ep", Source: src, Clock: clk, HTTPClient: srv.Client()})
			if err != nil {
				t.Fatal(err)
			}
			s, err := autoscale.New(cfg, clk, trs...)
			if err != nil {
				t.Fatal(err)
			}
			sawFallback := false
			for i := range 20 {
				clk.Step(cfg.PollingInterval)
				d, _ := s.Reconcile(context.Background(), current)
				if d.Desired != current {
					t.Fatalf("poll %d: desired %d (%s) from current %d with a failing source", i, d.Desired, d.Reason, current)
				}
				if len(d.Inputs) != 1 || d.Inputs[0].Err == nil || !strings.Contains(d.Inputs[0].Err.Error(), "boom") {
					t.Fatalf("poll %d: inputs %+v, want the server's error", i, d.Inputs)
				}
				sawFallback = sawFallback || d.Fallback
			}
			if current > 0 && !sawFallback {
				t.Fatal("fallback never engaged")
			}
		})
	}
	if hits.Load() < 60 {
		t.Fatalf("only %d queries: errors must not be cached", hits.Load())
	}
}

func TestUseCachedMetrics(t *testing.T) {
	ctx := context.Background()
	for _, cached := range []bool{true, false} {
		t.Run(map[bool]string{true: "cached", false: "live"}[cached], func(t *testing.T) {
			src, clk := newFakes()
			spec := &manifest.AutoScalingSpec{PollingInterval: ptr[int32](10), CloudWatchTrigger: &manifest.CloudWatchTrigger{
				Namespace: "capstan", MetricName: "QueueDepth", TargetValue: ptr(1.0), MetricCollectionPeriod: ptr[int32](1), MetricCollectionStartTime: ptr[int32](1), UseCachedMetrics: ptr(cached)}}
			_, trs, err := Build(spec, Env{Endpoint: "ep", Source: src, Clock: clk})
			if err != nil {
				t.Fatal(err)
			}
			tr := trs[0]
			src.set(func(s *gateway.EndpointSnapshot) { s.Queued = 1 })
			first, _ := tr.Value(ctx)
			clk.Step(4 * time.Second)
			src.set(func(s *gateway.EndpointSnapshot) { s.Queued = 7 })
			within, _ := tr.Value(ctx) // 4 s < half the 10 s polling interval
			clk.Step(1 * time.Second)
			after, _ := tr.Value(ctx) // 5 s after the cached read: stale
			if first != 1 || after != 7 {
				t.Fatalf("first %v after %v, want 1 and 7", first, after)
			}
			want := 7.0
			if cached {
				want = 1 // within half a polling interval the cached value is served
			}
			if within != want {
				t.Fatalf("value within half the polling interval = %v, want %v", within, want)
			}
			// A peek reads the source and refreshes the cache: a poll run
			// early because of it sees what the peek saw.
			clk.Step(time.Second)
			src.set(func(s *gateway.EndpointSnapshot) { s.Queued = 12 })
			peeked, err := tr.(autoscale.Peeker).Peek(ctx)
			if err != nil || peeked != 12 {
				t.Fatalf("peek = %v, %v; want 12", peeked, err)
			}
			src.set(func(s *gateway.EndpointSnapshot) { s.Queued = 3 })
			polled, _ := tr.Value(ctx)
			want = 3.0
			if cached {
				want = 12
			}
			if polled != want {
				t.Fatalf("value right after a peek = %v, want %v", polled, want)
			}
		})
	}
}
