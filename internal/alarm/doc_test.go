package alarm

import (
	"context"
	"os"
	"regexp"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/yaml"
)

// docBlocks returns the ```yaml blocks of docs/alarms.md.
func docBlocks(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile("../../docs/alarms.md")
	if err != nil {
		t.Fatal(err)
	}
	var blocks []string
	for _, m := range regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllStringSubmatch(string(raw), -1) {
		blocks = append(blocks, m[1])
	}
	return blocks
}

// TestDocExample decodes every YAML block of docs/alarms.md as capstan.yaml
// decodes it (strictly) and validates it, then checks that the rollback
// example fires on 5xx responses and on a slow p99, for its own endpoint.
func TestDocExample(t *testing.T) {
	blocks := docBlocks(t)
	if len(blocks) != 2 {
		t.Fatalf("docs/alarms.md has %d yaml blocks; this test knows 2", len(blocks))
	}
	var example []Alarm
	for i, b := range blocks {
		var c struct {
			Alarms []Alarm `json:"alarms"`
		}
		if err := yaml.UnmarshalStrict([]byte(b), &c); err != nil {
			t.Fatalf("block %d: %v", i, err)
		}
		if err := Validate(c.Alarms); err != nil {
			t.Fatalf("block %d: %v", i, err)
		}
		example = c.Alarms
	}
	tests := []struct {
		name, alarm string
		traffic     func(g *gateway)
		wantReason  string // "" = does not fire
	}{
		{"six 5xx fire high-errors", "high-errors", func(g *gateway) { g.count("ep", "v1", "503", 4); g.count("ep", "v1", "500", 2) },
			`alarm "high-errors": capstan_gateway_requests_total{status="5xx"} increase 6 > threshold 5`},
		{"five 5xx, and another endpoint's, do not", "high-errors", func(g *gateway) { g.count("ep", "v1", "503", 5); g.count("other", "v1", "503", 50) }, ""},
		{"3% over 2.56 s fire slow-p99", "slow-p99", func(g *gateway) { g.observe("ep", "v1", 0.3, 97); g.observe("ep", "v1", 30, 3) },
			`alarm "slow-p99": capstan_gateway_request_duration_seconds p99 34.1333 > threshold 2.56`},
		{"1% over 2.56 s does not", "slow-p99", func(g *gateway) { g.observe("ep", "v1", 0.3, 99); g.observe("ep", "v1", 30, 1) }, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := newGateway(t, prometheus.ExponentialBuckets(0.005, 2, 14)) // the gateway's own buckets
			ev, err := NewEvaluator(g.reg, example)
			if err != nil {
				t.Fatal(err)
			}
			w, err := ev.Arm(context.Background(), "ep", []string{tc.alarm})
			if err != nil {
				t.Fatal(err)
			}
			tc.traffic(g)
			if fired, reason := w.Check(); fired != (tc.wantReason != "") || reason != tc.wantReason {
				t.Fatalf("Check = %v, %q; want %q", fired, reason, tc.wantReason)
			}
		})
	}
}
