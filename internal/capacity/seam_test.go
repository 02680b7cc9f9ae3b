package capacity

import (
	"go/build"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/internal/fleet"
	"github.com/capstan-dev/capstan/internal/placement"
	"github.com/capstan-dev/capstan/internal/store"
)

// TestFree: Free is exactly the headroom Set grants on top of the current
// holding (Set of held+Free succeeds, one more fails), for on-demand types
// beside future plan bookings and for plans, including an exactly-sized plan
// whose every instance is held (no surge room).
func TestFree(t *testing.T) {
	cal, clk, st := newCal(t, fleet.Capacity{p5: {"a": 4}})
	p := buy(t, cal, "plan", week(2)) // books 2 of the 4 from next hour on
	plan := placement.OnPlan(placement.PlanRef{Key: p.Key})
	od := placement.OnDemand(p5)
	set := func(owner string, want placement.Want) error {
		return st.Update(func(tx *store.Tx) error { return cal.Set(tx, owner, want) })
	}
	free := func(owner string, src placement.Source) int {
		t.Helper()
		var n int
		if err := st.View(func(tx *store.Tx) error {
			var err error
			n, err = cal.Free(tx, owner, src)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if err := set("od1", placement.Want{od: 1}); err != nil {
		t.Fatal(err)
	}
	if err := set("ep1", placement.Want{plan: 1}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		setup  func()
		owner  string
		src    placement.Source
		held   placement.Want // owner's holding when asked
		want   int
		noPlan bool // the source cannot be held at all
	}{
		{"on-demand, new owner: fleet less others less plan bookings", nil, "new", od, nil, 1, false},
		{"on-demand, holder: its own instances do not count against it", nil, "od1", od, placement.Want{od: 1}, 1, false},
		{"plan, holder", nil, "ep1", plan, placement.Want{plan: 1}, 1, false},
		{"plan, other owner", nil, "ep2", plan, nil, 1, false},
		{"exactly-sized plan, fully held: no surge", func() {
			if err := set("ep2", placement.Want{plan: 1}); err != nil {
				t.Fatal(err)
			}
		}, "ep1", plan, placement.Want{plan: 1}, 0, false},
		{"unknown instance type", nil, "new", placement.OnDemand("ml.nope"), nil, 0, false},
		{"unknown plan", nil, "new", placement.OnPlan(placement.PlanRef{Key: "nope"}), nil, 0, true},
		{"plan after its end", func() {
			if err := set("ep2", nil); err != nil {
				t.Fatal(err)
			}
			clk.Set(p.End)
		}, "ep2", plan, nil, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.setup != nil {
				tt.setup()
			}
			got := free(tt.owner, tt.src)
			if got != tt.want {
				t.Fatalf("Free = %d, want %d", got, tt.want)
			}
			// Free agrees with Set: the owner can grow by exactly got.
			held := tt.held[tt.src]
			grow := func(n int) error {
				w := placement.Want{}
				for s, c := range tt.held {
					w[s] = c
				}
				w[tt.src] = n
				return set(tt.owner, w)
			}
			if !tt.noPlan {
				if err := grow(held + got); err != nil {
					t.Fatalf("Set(held %d + Free %d): %v", held, got, err)
				}
			}
			if err := grow(held + got + 1); err == nil {
				t.Fatalf("Set(held %d + Free %d + 1) succeeded", held, got)
			}
			if tt.held != nil {
				if err := set(tt.owner, tt.held); err != nil {
					t.Fatal(err)
				}
			} else if err := set(tt.owner, nil); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestNodes: a hyperpod-cluster plan provides one node per instance, with its
// instance type's resources, only while it is Active; a plan for endpoints or
// an unknown plan provides none and says why.
func TestNodes(t *testing.T) {
	cal, clk, _ := newCal(t, fleet.Capacity{p5: {"a": 1, "b": 2, "c": 1}})
	q := week(3) // no zone holds 3: the offering splits over a and b
	q.TargetResources = []string{placement.TargetHyperPodCluster}
	cp := buy(t, cal, "Cluster-Plan", q)
	ep := buy(t, cal, "ep-plan", week(1)) // in zone c

	p5Node := placement.Resources{GPUs: 8, MilliCPU: 192000, MemoryBytes: 2048 << 30}
	active := []placement.NodeSpec{
		{Name: "cluster-plan-0", InstanceType: p5, Zone: "a", GPU: "h100", Capacity: p5Node},
		{Name: "cluster-plan-1", InstanceType: p5, Zone: "b", GPU: "h100", Capacity: p5Node},
		{Name: "cluster-plan-2", InstanceType: p5, Zone: "b", GPU: "h100", Capacity: p5Node},
	}
	tests := []struct {
		name string
		at   time.Time
		ref  placement.PlanRef
		want []placement.NodeSpec
		kind ErrorKind
	}{
		{"before the start", cp.Start.Add(-time.Second), placement.PlanRef{Key: cp.Key}, nil, 0},
		{"unknown plan", cp.Start, placement.PlanRef{Key: "nope"}, nil, ErrPlanNotFound},
		{"endpoint plan while active", ep.Start, placement.PlanRef{Key: ep.Key}, nil, ErrInvalid},
		{"at the start", cp.Start, placement.PlanRef{Key: cp.Key}, active, 0},
		{"by name in any case", cp.Start.Add(time.Hour), placement.PlanRef{Key: "CLUSTER-PLAN"}, active, 0},
		{"last instant", cp.End.Add(-time.Nanosecond), placement.PlanRef{Key: cp.Key}, active, 0},
		{"at the end", cp.End, placement.PlanRef{Key: cp.Key}, nil, 0},
	}
	for _, tt := range tests { // in time order: the clock only moves forward
		t.Run(tt.name, func(t *testing.T) {
			clk.Set(tt.at)
			got, err := cal.Nodes(tt.ref)
			if e, ok := AsError(err); tt.kind != 0 && (!ok || e.Kind != tt.kind) || tt.kind == 0 && err != nil {
				t.Fatalf("err = %v, want kind %d", err, tt.kind)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Nodes = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestImportsNoController: capacity sits below the controllers on the
// placement seam, so nothing it (transitively) imports from this module may
// be a controller or protocol package.
func TestImportsNoController(t *testing.T) {
	const mod = "github.com/capstan-dev/capstan/"
	forbidden := []string{"internal/endpoint", "internal/deployment", "internal/cluster", "internal/sagemaker", "internal/server"}
	seen := map[string]bool{}
	var walk func(dir, path string)
	walk = func(dir, path string) {
		if seen[path] {
			return
		}
		seen[path] = true
		pkg, err := build.ImportDir(dir, 0)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		for _, imp := range pkg.Imports {
			rel, ok := strings.CutPrefix(imp, mod)
			if !ok {
				continue
			}
			for _, f := range forbidden {
				if rel == f || strings.HasPrefix(rel, f+"/") {
					t.Errorf("%s imports %s", path, imp)
				}
			}
			walk(filepath.Join("..", "..", rel), imp)
		}
	}
	walk(".", mod+"internal/capacity")
	if !seen[mod+"internal/placement"] {
		t.Fatal("capacity does not import placement")
	}
}
