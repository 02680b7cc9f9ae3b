package deployment

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/internal/catalog"
	"github.com/capstan-dev/capstan/internal/cluster"
	"github.com/capstan-dev/capstan/internal/manifest"
	"github.com/capstan-dev/capstan/internal/runtime"
)

// withMIGNode is a harness whose pool is one node of instance type typ
// whose first partitioned GPUs are laid out as layout (the rest whole).
func withMIGNode(t *testing.T, typ, layout string, partitioned int, opts ...harnessOpt) *harness {
	t.Helper()
	h := newHarness(t, append([]harnessOpt{withGroups()}, opts...)...)
	cat := catalog.Default()
	it, err := cat.InstanceType(typ)
	if err != nil {
		t.Fatal(err)
	}
	g, err := cat.GPU(it.GPU)
	if err != nil {
		t.Fatal(err)
	}
	slicesOf, err := g.Layout(layout)
	if err != nil {
		t.Fatal(err)
	}
	parts := make([][]string, partitioned)
	for i := range parts {
		parts[i] = slicesOf
	}
	if err := h.cl.AddNode(cluster.NodeSpec{Name: "mig-0", Cluster: cluster.DefaultName, InstanceGroup: "mig", InstanceType: it.Name,
		GPU: it.GPU, Capacity: cluster.CapacityOf(it), Partitions: parts}); err != nil {
		t.Fatal(err)
	}
	return h
}

func migIEC(name, instanceType, resource string, replicas int) string {
	return fmt.Sprintf(`apiVersion: inference.sagemaker.aws.amazon.com/v1
kind: InferenceEndpointConfig
metadata: {name: %s, namespace: default}
spec:
  modelName: deepseek-llm-r1-distill-qwen-1-5b
  instanceType: %s
  replicas: %d
  invocationEndpoint: v1/chat/completions
  modelSourceConfig: {modelSourceType: s3, s3Storage: {bucketName: models, region: us-east-1}, modelLocation: qwen}
  worker:
    image: lmcache/vllm-openai:latest
    modelInvocationPort: {containerPort: 8000, name: http}
    modelVolumeMount: {name: model-weights, mountPath: /opt/ml/model}
    resources: {requests: {cpu: "1", memory: 4Gi, %q: "1"}, limits: {%q: "1"}}
`, name, instanceType, replicas, resource, resource)
}

func migJSM(name, modelID, profile, extra string) string {
	return fmt.Sprintf(`apiVersion: inference.sagemaker.aws.amazon.com/v1
kind: JumpStartModel
metadata: {name: %s}
spec:
  model: {modelHubName: SageMakerPublicHub, modelId: %s}
  server: {instanceType: ml.p4d.24xlarge, acceleratorPartitionType: %s%s}
`, name, modelID, profile, extra)
}

// heldPerGPU counts the slices of node held by replicas, by GPU index.
func heldPerGPU(t *testing.T, h *harness) map[int]int {
	t.Helper()
	out := map[int]int{}
	for _, n := range h.cl.Nodes() {
		for _, sl := range n.Slices {
			if sl.ReplicaID != "" {
				out[sl.GPU]++
			}
		}
	}
	return out
}

func eventsOf(t *testing.T, h *harness, kind, name, reason string) []string {
	t.Helper()
	evs, err := h.svc.Events(context.Background(), kind, "default", name)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range evs {
		if e.Reason == reason {
			out = append(out, e.Message)
		}
	}
	return out
}

// TestMIGReplicasPackSlices: replicas of an IEC asking for one 1g.5gb slice
// fill the seven slices of one GPU before using the next, run with one
// rank on their slice, and say where they run.
func TestMIGReplicasPackSlices(t *testing.T) {
	h := withMIGNode(t, "ml.p4d.24xlarge", "all-1g.5gb", 8)
	h.apply(migIEC("demo", "ml.p4d.24xlarge", "nvidia.com/mig-1g.5gb", 8))
	h.reconcile(kIEC("demo"))
	if got := h.running(""); len(got) != 8 {
		t.Fatalf("running %v, want 8 replicas", got)
	}
	if got, want := heldPerGPU(t, h), map[int]int{0: 7, 1: 1}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("slices held per GPU %v, want %v", got, want)
	}
	for _, s := range h.rt.Starts() {
		if s.MIGProfile != "1g.5gb" || s.TensorParallel != 1 || s.GPU != "a100-40gb" {
			t.Errorf("replica %s started with MIG %q, TP %d, GPU %s; want 1g.5gb, 1, a100-40gb", s.ID, s.MIGProfile, s.TensorParallel, s.GPU)
		}
	}
	n := h.cl.Nodes()[0]
	if n.Allocated.GPUs != 0 {
		t.Errorf("node allocates %d whole GPUs to MIG replicas, want 0", n.Allocated.GPUs)
	}
	started := eventsOf(t, h, manifest.KindInferenceEndpointConfig, "demo", "Started")
	if len(started) != 8 || !strings.Contains(started[0], "on node mig-0 (ml.p4d.24xlarge, MIG 1g.5gb on GPU 0)") ||
		!strings.Contains(started[7], "(ml.p4d.24xlarge, MIG 1g.5gb on GPU 1)") {
		t.Fatalf("Started events %q", started)
	}
	if s := h.get(manifest.KindInferenceEndpointConfig, "demo").GetStatus(); s.State != manifest.StateDeploymentComplete {
		t.Fatalf("state %s, want %s", s.State, manifest.StateDeploymentComplete)
	}
}

// TestMIGPendingNamesTheSlice: a MIG replica with no free slice of its
// profile is pending, worded as Kubernetes' scheduler words it.
func TestMIGPendingNamesTheSlice(t *testing.T) {
	h := withMIGNode(t, "ml.p4d.24xlarge", "all-1g.5gb", 1)
	h.apply(migIEC("demo", "ml.p4d.24xlarge", "nvidia.com/mig-1g.5gb", 8))
	h.reconcile(kIEC("demo"))
	if got := h.running(""); len(got) != 7 {
		t.Fatalf("running %d replicas, want the 7 that have a slice", len(got))
	}
	const want = "0/1 nodes are available: 1 Insufficient nvidia.com/mig-1g.5gb"
	ready := condition(h.get(manifest.KindInferenceEndpointConfig, "demo"), manifest.ConditionReady)
	if ready.Reason != manifest.ReasonInsufficientCapacity || !strings.Contains(ready.Message, want) {
		t.Fatalf("Ready %s: %q; want %s with %q", ready.Reason, ready.Message, manifest.ReasonInsufficientCapacity, want)
	}
	if evs := eventsOf(t, h, manifest.KindInferenceEndpointConfig, "demo", "FailedScheduling"); len(evs) != 1 || !strings.Contains(evs[0], want) {
		t.Fatalf("FailedScheduling events %q, want one with %q", evs, want)
	}
	pend := h.cl.Pending()
	if len(pend) != 1 || pend[0].Request.MIGProfile != "1g.5gb" || pend[0].Request.GPUs != 0 {
		t.Fatalf("pool pending %+v, want one request for a 1g.5gb slice and no GPU", pend)
	}
}

// TestMIGAndWholeGPUsNeverShare: on a node with four partitioned GPUs and
// four whole ones, whole-GPU replicas take only the whole GPUs (and name
// them as their devices) and MIG replicas only slices.
func TestMIGAndWholeGPUsNeverShare(t *testing.T) {
	h := withMIGNode(t, "ml.p4d.24xlarge", "all-1g.5gb", 4)
	h.apply(migIEC("whole", "ml.p4d.24xlarge", "nvidia.com/gpu", 5))
	h.apply(migIEC("sliced", "ml.p4d.24xlarge", "nvidia.com/mig-1g.5gb", 28))
	h.reconcile(kIEC("whole"))
	h.reconcile(kIEC("sliced"))
	if got := h.running("iec.default.whole."); len(got) != 4 {
		t.Fatalf("%d whole-GPU replicas run, want 4 (the whole GPUs)", len(got))
	}
	if got := h.running("iec.default.sliced."); len(got) != 28 {
		t.Fatalf("%d MIG replicas run, want 28 (every slice)", len(got))
	}
	n := h.cl.Nodes()[0]
	if n.Allocated.GPUs != 4 {
		t.Fatalf("whole GPUs allocated %d, want 4", n.Allocated.GPUs)
	}
	for _, sl := range n.Slices {
		if !strings.HasPrefix(sl.ReplicaID, "iec.default.sliced.") {
			t.Fatalf("slice %+v held by %q, want a MIG replica", sl, sl.ReplicaID)
		}
	}
	// Each whole-GPU replica's devices are its own whole GPU (4-7: 0-3 are
	// cut); a MIG replica names none (its slice's id is the driver's).
	var devices []string
	for _, sp := range h.rt.Starts() {
		switch {
		case strings.HasPrefix(sp.ID, "iec.default.whole."):
			if len(sp.Devices) != 1 {
				t.Fatalf("whole-GPU replica %s has devices %v, want one GPU", sp.ID, sp.Devices)
			}
			devices = append(devices, sp.Devices[0])
		case len(sp.Devices) != 0:
			t.Fatalf("MIG replica %s has devices %v, want none", sp.ID, sp.Devices)
		}
	}
	slices.Sort(devices)
	if want := []string{"4", "5", "6", "7"}; !slices.Equal(devices, want) {
		t.Fatalf("whole-GPU replicas hold devices %v, want %v", devices, want)
	}
	ready := condition(h.get(manifest.KindInferenceEndpointConfig, "whole"), manifest.ConditionReady)
	if !strings.Contains(ready.Message, "Insufficient nvidia.com/gpu") {
		t.Fatalf("whole-GPU deployment Ready %q, want its fifth replica short of nvidia.com/gpu", ready.Message)
	}
}

// TestMIGJumpStart: a JumpStartModel with acceleratorPartitionType takes one
// slice, not the instance, and its runtime spec carries the profile; the
// model's fit on the slice is checked at apply unless validation is off.
func TestMIGJumpStart(t *testing.T) {
	t.Run("lands on a slice", func(t *testing.T) {
		h := withMIGNode(t, "ml.p4d.24xlarge", "all-7g.40gb", 8)
		h.apply(migJSM("deepseek", "deepseek-llm-r1-distill-qwen-1-5b", "mig-7g.40gb", ""))
		h.reconcile(kJSM("deepseek"))
		starts := h.rt.Starts()
		if len(starts) != 1 || starts[0].MIGProfile != "7g.40gb" || starts[0].TensorParallel != 1 {
			t.Fatalf("starts %+v, want one on a 7g.40gb slice with TP 1", starts)
		}
		n := h.cl.Nodes()[0]
		if n.Allocated.GPUs != 0 || !slices.ContainsFunc(n.Slices, func(s cluster.Slice) bool { return s.ReplicaID == starts[0].ID }) {
			t.Fatalf("node %+v: want the replica on a slice and no whole GPU taken", n)
		}
	})
	fit := []struct {
		name, model, profile, extra string
		refused                     string // "" = accepted
	}{
		{"fits", "meta-textgeneration-llama-3-1-8b-instruct", "mig-3g.20gb", "", ""},
		{"does not fit", "meta-textgeneration-llama-3-1-8b-instruct", "mig-1g.10gb", "",
			"spec.server.acceleratorPartitionType: model llama-3.1-8b does not fit on a mig-1g.10gb slice: it needs 16.3 GB"},
		{"check off", "meta-textgeneration-llama-3-1-8b-instruct", "mig-1g.10gb", ", validations: {acceleratorPartitionValidation: false}", ""},
	}
	for _, tc := range fit {
		t.Run("fit check "+tc.name, func(t *testing.T) {
			h := withMIGNode(t, "ml.p4d.24xlarge", "all-balanced", 8)
			// Load is the manifest door: it decodes, defaults and validates.
			objs, err := manifest.Load([]byte(migJSM("llama", tc.model, tc.profile, tc.extra)))
			if err == nil {
				_, err = h.svc.Apply(context.Background(), objs[0])
			}
			switch {
			case tc.refused == "" && err != nil:
				t.Fatalf("apply refused: %v", err)
			case tc.refused != "" && (err == nil || !strings.Contains(err.Error(), tc.refused)):
				t.Fatalf("apply: %v, want refused with %q", err, tc.refused)
			}
		})
	}
}

// TestMIGReplicaThatDoesNotFitFails: with the fit check off, a replica whose
// engine exits because the model does not fit its slice shows as failed
// (event and status, with the engine's message), also while the runtime
// restarts it, instead of hanging in progress.
func TestMIGReplicaThatDoesNotFitFails(t *testing.T) {
	h := withMIGNode(t, "ml.p4d.24xlarge", "all-1g.10gb", 8, manualRuntime())
	h.apply(migJSM("llama", "meta-textgeneration-llama-3-1-8b-instruct", "mig-1g.10gb", ", validations: {acceleratorPartitionValidation: false}"))
	k := kJSM("llama")
	h.reconcile(k)
	ids := h.running("")
	if len(ids) != 1 {
		t.Fatalf("running %v, want one replica", ids)
	}
	// What the simulated engine says when it exits at start.
	const why = "model llama-3.1-8b does not fit on a100-40gb MIG 1g.10gb with tensor parallel 1"
	steps := []struct {
		state runtime.State
		msg   string
	}{{runtime.StateFailed, why}, {runtime.StateStarting, "restarting"}, {runtime.StateFailed, why}}
	for i, s := range steps {
		if err := h.rt.SetState(ids[0], s.state, s.msg); err != nil {
			t.Fatal(err)
		}
		h.reconcile(k)
		st := h.get(manifest.KindJumpStartModel, "llama").GetStatus()
		ready := condition(h.get(manifest.KindJumpStartModel, "llama"), manifest.ConditionReady)
		if st.State != manifest.StateDeploymentFailed || ready.Reason != manifest.ReasonReplicaFailed || !strings.Contains(ready.Message, why) {
			t.Fatalf("step %d (%s): state %s, Ready %s %q; want %s, %s with the engine's message", i, s.state, st.State, ready.Reason, ready.Message,
				manifest.StateDeploymentFailed, manifest.ReasonReplicaFailed)
		}
	}
	evs := eventsOf(t, h, manifest.KindJumpStartModel, "llama", manifest.ReasonReplicaFailed)
	if len(evs) != 1 || !strings.Contains(evs[0], why) {
		t.Fatalf("ReplicaFailed events %q, want one (the same failure again is not repeated) with %q", evs, why)
	}
	// Healthy again: the failure is forgotten.
	h.rt.SetAddr(ids[0], "127.0.0.1:1")
	if err := h.rt.SetState(ids[0], runtime.StateHealthy, ""); err != nil {
		t.Fatal(err)
	}
	h.reconcile(k)
	if st := h.get(manifest.KindJumpStartModel, "llama").GetStatus(); st.State != manifest.StateDeploymentComplete {
		t.Fatalf("healthy replica: state %s, want %s", st.State, manifest.StateDeploymentComplete)
	}
}

// TestMIGFullP4d: a p4d laid out all-1g.5gb runs 56 one-slice replicas
// (8 GPUs × 7) and the 57th is pending with the reason.
func TestMIGFullP4d(t *testing.T) {
	h := withMIGNode(t, "ml.p4d.24xlarge", "all-1g.5gb", 8)
	h.apply(migIEC("demo", "ml.p4d.24xlarge", "nvidia.com/mig-1g.5gb", 57))
	h.reconcile(kIEC("demo"))
	if got := h.running(""); len(got) != 56 {
		t.Fatalf("running %d replicas, want 56", len(got))
	}
	held := heldPerGPU(t, h)
	for gpu := range 8 {
		if held[gpu] != 7 {
			t.Fatalf("slices held per GPU %v, want 7 on each of the 8", held)
		}
	}
	ready := condition(h.get(manifest.KindInferenceEndpointConfig, "demo"), manifest.ConditionReady)
	if !strings.Contains(ready.Message, "0/1 nodes are available: 1 Insufficient nvidia.com/mig-1g.5gb") {
		t.Fatalf("Ready %s: %q; want the 57th pending for a 1g.5gb slice", ready.Reason, ready.Message)
	}
}
