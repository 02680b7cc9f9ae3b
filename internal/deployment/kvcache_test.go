package deployment

import (
	"fmt"
	"github.com/capstan-dev/capstan/internal/engines"

	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/internal/catalog"
	"github.com/capstan-dev/capstan/internal/manifest"
	"github.com/capstan-dev/capstan/internal/runtime"
)

func withDataDir(dir string) harnessOpt {
	return func(o *Options, _ *harnessConfig) { o.DataDir = dir }
}

// plentyOfDisk fakes a file system with 10 TB free.
func plentyOfDisk(string) (int64, error) { return 10e12, nil }

// engineArgs is the command line the runtime runs for a replica's start
// (its engine adapter's flags, then the spec's).
func engineArgs(s runtime.ReplicaSpec) []string {
	return engines.MustByName(s.Engine).Args(engines.Launch{Spec: s, Host: "127.0.0.1", ExtraArgs: s.Args})
}

// kvArgs are the KV flags of a replica's start, in order.
func kvArgs(s runtime.ReplicaSpec) []string {
	var out []string
	for _, a := range engineArgs(s) {
		for _, f := range []string{"--cpu-cache-bytes=", "--tiered-storage-dir=", "--tiered-storage-bytes=", "--shared-cache="} {
			if strings.HasPrefix(a, f) {
				out = append(out, a)
			}
		}
	}
	return out
}

// TestKVCacheArgs: every kvCacheSpec combination starts replicas with the
// engine flags of its tiers; tieredstorage names the node's directory
// under the data directory and its budget.
func TestKVCacheArgs(t *testing.T) {
	const redis = `l2CacheLocalUrl: "redis://127.0.0.1:6379"`
	for _, tc := range []struct {
		name, kv string
		// want holds the flags; DIR stands for the node's tieredstorage directory.
		want []string
	}{
		{"no kvCacheSpec", "", nil},
		{"L1 by default", "{}", []string{"--cpu-cache-bytes=32212254720"}},
		{"L1 off", "{enableL1Cache: false}", nil},
		{"L1 sized", "{l1CacheSize: 8Gi}", []string{"--cpu-cache-bytes=8589934592"}},
		{"L1 off, sized", "{enableL1Cache: false, l1CacheSize: 8Gi}", nil},
		{"redis", "{enableL2Cache: true, l2CacheSpec: {l2CacheBackend: redis, " + redis + "}}",
			[]string{"--cpu-cache-bytes=32212254720", "--shared-cache=redis://127.0.0.1:6379"}},
		{"redis, l2CacheSize has no effect", "{enableL2Cache: true, l2CacheSpec: {l2CacheBackend: Redis, " + redis + ", l2CacheSize: 5Gi}}",
			[]string{"--cpu-cache-bytes=32212254720", "--shared-cache=redis://127.0.0.1:6379"}},
		{"L2 off", "{enableL2Cache: false, l2CacheSpec: {l2CacheBackend: tieredstorage, l2CacheSize: 5Gi}}", []string{"--cpu-cache-bytes=32212254720"}},
		// ml.g5.24xlarge: 3800 GB of instance storage; a tenth is more
		// than the 100Gi cap.
		{"tieredstorage, default budget", "{enableL2Cache: true, l2CacheSpec: {l2CacheBackend: tieredstorage}}",
			[]string{"--cpu-cache-bytes=32212254720", "--tiered-storage-dir=DIR", "--tiered-storage-bytes=107374182400"}},
		{"tieredstorage sized, L1 sized", "{l1CacheSize: 4Gi, enableL2Cache: true, l2CacheSpec: {l2CacheBackend: TieredStorage, l2CacheSize: 20Gi}}",
			[]string{"--cpu-cache-bytes=4294967296", "--tiered-storage-dir=DIR", "--tiered-storage-bytes=21474836480"}},
		{"tieredstorage without L1", "{enableL1Cache: false, enableL2Cache: true, l2CacheSpec: {l2CacheBackend: tieredstorage, l2CacheSize: 1.5Ti}}",
			[]string{"--tiered-storage-dir=DIR", "--tiered-storage-bytes=1649267441664"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := t.TempDir()
			h := newHarness(t, withDataDir(data))
			h.svc.Controller().diskFree = plentyOfDisk
			extra := ""
			if tc.kv != "" {
				extra = "  kvCacheSpec: " + tc.kv + "\n"
			}
			h.apply(iec("demo", 2, 1, extra))
			h.reconcile(kIEC("demo"))
			starts := h.rt.Starts()
			if len(starts) != 2 {
				t.Fatalf("%d starts; status %+v", len(starts), h.get(manifest.KindInferenceEndpointConfig, "demo").GetStatus())
			}
			for _, s := range starts {
				n, ok := h.cl.NodeOf(s.ID)
				if !ok {
					t.Fatalf("%s not placed", s.ID)
				}
				dir := filepath.Join(data, "tieredstorage", "ml-cluster", n.Name)
				var want []string
				for _, w := range tc.want {
					want = append(want, strings.Replace(w, "DIR", dir, 1))
				}
				if got := kvArgs(s); !slices.Equal(got, want) {
					t.Errorf("%s: flags %q, want %q", s.ID, got, want)
				}
			}
		})
	}
}

// TestKVCacheArgsJSM: a JumpStartModel takes the whole instance, so its
// default L1 is half the node's memory; its tieredstorage budget follows
// the instance type (ml.g5.12xlarge: a tenth of 3800 GB, capped at 100Gi).
func TestKVCacheArgsJSM(t *testing.T) {
	data := t.TempDir()
	h := newHarness(t, withDataDir(data))
	h.svc.Controller().diskFree = plentyOfDisk
	h.apply(jsm("deepseek", "", "  kvCacheSpec: {enableL2Cache: true, l2CacheSpec: {l2CacheBackend: tieredstorage}}\n"))
	k := Key(manifest.KindJumpStartModel, "default", "deepseek")
	h.reconcile(k)
	starts := h.rt.Starts()
	if len(starts) != 1 {
		t.Fatalf("%d starts", len(starts))
	}
	n, _ := h.cl.NodeOf(starts[0].ID)
	want := []string{"--cpu-cache-bytes=103079215104", "--tiered-storage-dir=" + filepath.Join(data, "tieredstorage", "ml-cluster", n.Name),
		"--tiered-storage-bytes=107374182400"}
	if got := kvArgs(starts[0]); !slices.Equal(got, want) {
		t.Fatalf("flags %q, want %q", got, want)
	}
}

// TestKVCacheRollout: changing a KV size rolls the replicas out (it is a
// start flag); a manifest without the new fields keeps its template hash.
func TestKVCacheRollout(t *testing.T) {
	h := newHarness(t, withDataDir(t.TempDir()))
	h.svc.Controller().diskFree = plentyOfDisk
	p0, err := planFor(mustLoad(t, iec("demo", 1, 1, "  kvCacheSpec: {enableL1Cache: true}\n")), nil)
	if err != nil {
		t.Fatal(err)
	}
	// The hash of this template before sizes existed (pinned: a change
	// here would roll out every running deployment on upgrade).
	if got := p0.templateHash("llama-3.1-8b", "/m"); got != "46611caad44b9ddc" {
		t.Errorf("template hash of a spec without sizes changed: %s", got)
	}
	h.apply(iec("demo", 1, 1, "  kvCacheSpec: {l1CacheSize: 8Gi}\n"))
	h.reconcile(kIEC("demo"))
	h.apply(iec("demo", 1, 1, "  kvCacheSpec: {l1CacheSize: 4Gi}\n"))
	h.reconcile(kIEC("demo"))
	var flags []string
	for _, s := range h.rt.Starts() {
		flags = append(flags, kvArgs(s)...)
	}
	if !slices.Equal(flags, []string{"--cpu-cache-bytes=8589934592", "--cpu-cache-bytes=4294967296"}) {
		t.Fatalf("starts' flags %q: want a replica of each size", flags)
	}
}

func mustLoad(t *testing.T, doc string) manifest.Object {
	t.Helper()
	objs, err := manifest.Load([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return objs[0]
}

// TestTieredStorageDiskRefused: a budget the data directory's file system
// cannot hold keeps the replica from starting, with a Warning event and
// the reason in the status; once there is room it starts.
func TestTieredStorageDiskRefused(t *testing.T) {
	h := newHarness(t, withDataDir(t.TempDir()))
	free := int64(3 << 30)
	h.svc.Controller().diskFree = func(string) (int64, error) { return free, nil }
	h.apply(iec("demo", 1, 1, "  kvCacheSpec: {enableL2Cache: true, l2CacheSpec: {l2CacheBackend: tieredstorage, l2CacheSize: 20Gi}}\n"))
	h.reconcile(kIEC("demo"))
	if n := len(h.rt.Starts()); n != 0 {
		t.Fatalf("%d replicas started without disk room", n)
	}
	o := h.get(manifest.KindInferenceEndpointConfig, "demo")
	c := condition(o, manifest.ConditionReady)
	if o.GetStatus().State != manifest.StateDeploymentFailed || !strings.Contains(c.Message, "needs 20 GiB (spec.kvCacheSpec.l2CacheSpec.l2CacheSize)") ||
		!strings.Contains(c.Message, "has 3 GiB free") {
		t.Fatalf("state %s, Ready %+v", o.GetStatus().State, c)
	}
	if reasons := h.eventReasons(manifest.KindInferenceEndpointConfig, "demo"); slices.Index(reasons, ReasonInsufficientDisk) < 0 {
		t.Fatalf("events %v lack %s", reasons, ReasonInsufficientDisk)
	}
	free = 30 << 30
	h.reconcile(kIEC("demo"))
	if o := h.get(manifest.KindInferenceEndpointConfig, "demo"); len(h.rt.Starts()) != 1 || o.GetStatus().State != manifest.StateDeploymentComplete {
		t.Fatalf("with room: %d starts, status %+v", len(h.rt.Starts()), o.GetStatus())
	}
}

// TestTieredStorageDefaultShrinks: without l2CacheSize the budget is the
// default (ml.g5.24xlarge: 100Gi) or, on a smaller disk, the whole GiB of
// room there is, with an event saying so; below 1 GiB of room the replica
// does not start.
func TestTieredStorageDefaultShrinks(t *testing.T) {
	h := newHarness(t, withDataDir(t.TempDir()))
	free := int64(30<<30 + 12345)
	h.svc.Controller().diskFree = func(string) (int64, error) { return free, nil }
	h.apply(iec("demo", 1, 1, "  kvCacheSpec: {enableL2Cache: true, l2CacheSpec: {l2CacheBackend: tieredstorage}}\n"))
	h.reconcile(kIEC("demo"))
	starts := h.rt.Starts()
	if len(starts) != 1 || !slices.Contains(engineArgs(starts[0]), "--tiered-storage-bytes=32212254720") {
		t.Fatalf("starts %+v", starts)
	}
	if reasons := h.eventReasons(manifest.KindInferenceEndpointConfig, "demo"); slices.Index(reasons, "TieredStorageSized") < 0 {
		t.Fatalf("events %v lack TieredStorageSized", reasons)
	}

	free = 1<<30 - 1
	h.apply(iec("small", 1, 1, "  kvCacheSpec: {enableL2Cache: true, l2CacheSpec: {l2CacheBackend: tieredstorage}}\n"))
	h.reconcile(kIEC("small"))
	c := condition(h.get(manifest.KindInferenceEndpointConfig, "small"), manifest.ConditionReady)
	if len(h.rt.Starts()) != 1 || !strings.Contains(c.Message, "needs at least 1 GiB") {
		t.Fatalf("%d starts, Ready %+v", len(h.rt.Starts()), c)
	}
}

// TestTieredStorageRealDisk checks against the real file system: a budget
// far beyond any test machine's disk is refused, a small one fits, and
// what the node's store already holds counts as room.
func TestTieredStorageRealDisk(t *testing.T) {
	data := t.TempDir()
	h := newHarness(t, withDataDir(data))
	c := h.svc.Controller()
	it, _ := catalog.Default().InstanceType("ml.g5.24xlarge")
	budget := func(size int64) (int64, string) {
		b, _, why := c.tieredBudget(&plan{cluster: "ml-cluster", tiered: true, l2Size: size}, it, "n")
		return b, why
	}
	if b, why := budget(1 << 20); b != 1<<20 || why != "" {
		t.Fatalf("1 MiB: %d, %q", b, why)
	}
	if _, why := budget(1 << 62); !strings.Contains(why, "needs 4 EiB") {
		t.Fatalf("4 EiB: %q", why)
	}
	if free, err := freeBytes(data); err != nil || free <= 0 {
		t.Fatalf("free %d, %v", free, err)
	}
	dir := tieredDir(data, "ml-cluster", "n")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "blocks"), make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	c.diskFree = func(string) (int64, error) { return 1 << 20, nil }
	if _, why := budget(2 << 20); why != "" {
		t.Fatalf("1 MiB free beside a 1 MiB store refused 2 MiB: %s", why)
	}
	if _, why := budget(3 << 20); why == "" {
		t.Fatal("3 MiB accepted with 2 MiB of room")
	}
}

// TestTieredStorageNeedsDataDir: without a data directory there is nowhere
// to keep blocks; the replica does not start and the status says so.
func TestTieredStorageNeedsDataDir(t *testing.T) {
	h := newHarness(t)
	h.apply(iec("demo", 1, 1, "  kvCacheSpec: {enableL2Cache: true, l2CacheSpec: {l2CacheBackend: tieredstorage}}\n"))
	h.reconcile(kIEC("demo"))
	c := condition(h.get(manifest.KindInferenceEndpointConfig, "demo"), manifest.ConditionReady)
	if len(h.rt.Starts()) != 0 || !strings.Contains(c.Message, "data directory") {
		t.Fatalf("%d starts, Ready %+v", len(h.rt.Starts()), c)
	}
}

// TestRouteCarriesNode: every backend of a deployment's route names the
// node its replica runs on, so the router knows which replicas share a
// node's tieredstorage.
func TestRouteCarriesNode(t *testing.T) {
	h := newHarness(t)
	// 3 GPUs each: one replica per ml.g5.24xlarge node (4 GPUs).
	h.apply(iec("demo", 2, 3, ""))
	h.reconcile(kIEC("demo"))
	r, ok := h.gw.Route("demo")
	if !ok || len(r.Variants[0].Backends) != 2 {
		t.Fatalf("route %+v", r)
	}
	nodes := map[string]bool{}
	for _, b := range r.Variants[0].Backends {
		n, ok := h.cl.NodeOf(b.ID)
		if !ok || b.Node != n.Name {
			t.Fatalf("backend %s: node %q, placed on %q", b.ID, b.Node, n.Name)
		}
		nodes[b.Node] = true
	}
	if len(nodes) != 2 {
		t.Fatalf("backends on nodes %v, want two", nodes)
	}
}

func TestKVCacheUnknownObject(t *testing.T) {
	h := newHarness(t)
	if _, err := h.svc.KVCache(context.Background(), manifest.KindInferenceEndpointConfig, "default", "nope"); !errors.Is(err, manifest.ErrNotFound) {
		t.Fatalf("err %v", err)
	}
}

// TestTieredStorageFromCluster: without l2CacheSize a tieredstorage tier on
// a cluster with tiered storage on (TieredStorageConfig, 20 %) gets that
// share of the node's memory (ml.g5.24xlarge: 384 GiB → 76.8 GiB); on a
// cluster with it off, capstan's default (100Gi on that type) and an event
// saying why, once.
func TestTieredStorageFromCluster(t *testing.T) {
	for _, tc := range []struct {
		name      string
		pct       int
		on        bool
		wantFlag  string
		wantEvent bool
	}{
		{"on", 20, true, fmt.Sprintf("--tiered-storage-bytes=%d", int64(384)<<30*20/100), false},
		{"off", 0, false, fmt.Sprintf("--tiered-storage-bytes=%d", int64(100)<<30), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, withDataDir(t.TempDir()), func(o *Options, _ *harnessConfig) {
				o.TieredStorage = func(string) (int, bool) { return tc.pct, tc.on }
			})
			h.svc.Controller().diskFree = func(string) (int64, error) { return 500 << 30, nil }
			h.apply(iec("demo", 1, 1, "  kvCacheSpec: {enableL2Cache: true, l2CacheSpec: {l2CacheBackend: tieredstorage}}\n"))
			h.reconcile(kIEC("demo"))
			h.reconcile(kIEC("demo"))
			starts := h.rt.Starts()
			if len(starts) != 1 || !slices.Contains(engineArgs(starts[0]), tc.wantFlag) {
				t.Fatalf("starts %+v, want %s", starts, tc.wantFlag)
			}
			n := 0
			for _, r := range h.eventReasons(manifest.KindInferenceEndpointConfig, "demo") {
				if r == ReasonTieredStorageOff {
					n++
				}
			}
			if want := map[bool]int{true: 1, false: 0}[tc.wantEvent]; n != want {
				t.Errorf("%d %s events, want %d", n, ReasonTieredStorageOff, want)
			}
		})
	}
}
