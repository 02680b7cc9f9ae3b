package spaces_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/internal/testutil"
)

func workspaceYAML(name, desired, extra string) string {
	return `apiVersion: workspace.jupyter.org/v1alpha1
kind: Workspace
metadata:
  name: ` + name + `
spec:
  displayName: ` + name + `
  desiredStatus: ` + desired + `
  resources:
    requests:
      nvidia.com/mig-7g.80gb: 1
` + extra
}

// waiterJSM is a JumpStartModel whose one replica needs the cluster's only
// MIG slice.
const waiterJSM = `apiVersion: inference.sagemaker.aws.amazon.com/v1
kind: JumpStartModel
metadata: {name: waiter}
spec:
  model: {modelHubName: SageMakerPublicHub, modelId: deepseek-llm-r1-distill-qwen-1-5b}
  server: {instanceType: ml.p5.4xlarge, acceleratorPartitionType: mig-7g.80gb}
  replicas: 1
`

type jsmStatus struct {
	Status struct {
		State         string `json:"state"`
		ReadyReplicas int    `json:"readyReplicas"`
	} `json:"status"`
}

func (s *server) waiter() jsmStatus {
	s.t.Helper()
	code, b := s.do(http.MethodGet, "/apis/inference.sagemaker.aws.amazon.com/v1/namespaces/default/jumpstartmodels/waiter", nil, nil)
	if code != http.StatusOK {
		s.t.Fatalf("get jsm waiter: %d %s", code, b)
	}
	var st jsmStatus
	if err := json.Unmarshal(b, &st); err != nil {
		s.t.Fatal(err)
	}
	return st
}

// TestSpaceLifecycle is the story: a Workspace on a MIG slice runs
// Jupyter; a cell run through capstan's proxy (REST + kernel WebSocket)
// prints the slice; stopping frees the slice for a waiting replica and
// keeps the files; starting again finds the notebook; deleting removes
// process and files.
func TestSpaceLifecycle(t *testing.T) {
	s := startServer(t, migCluster)
	out := s.apply(workspaceYAML("nb", "Running", ""))
	if !strings.Contains(out, "workspace.workspace.jupyter.org/nb created") {
		t.Fatalf("apply said:\n%s", out)
	}
	w := s.waitPhase("nb", "Running", 90*time.Second)
	if !strings.HasPrefix(w.Status.MIGSlice, "7g.80gb") || w.Status.InstanceType != "ml.p5.4xlarge" {
		t.Fatalf("status: slice %q on %q, want 7g.80gb on ml.p5.4xlarge", w.Status.MIGSlice, w.Status.InstanceType)
	}
	if want := s.URL + "/spaces/default/nb/"; w.Status.AccessURL != want {
		t.Fatalf("accessURL %q, want %q", w.Status.AccessURL, want)
	}

	// A cell, through the proxy, prints the slice the space was given.
	got := s.execute("nb", `import os; print(os.environ["CAPSTAN_MIG_SLICE"], os.environ["NVIDIA_VISIBLE_DEVICES"])`)
	if !strings.Contains(got, "7g.80gb (GPU 0, slice 0)") || !strings.Contains(got, "MIG-") {
		t.Fatalf("the cell printed %q; want the 7g.80gb slice and its device", got)
	}
	// The Jupyter token is capstan's business: argv does not carry it.
	for _, pid := range spaceProcesses(t, s.dataDir, "default/nb") {
		cmdline, _ := os.ReadFile(filepath.Join("/proc", itoa(pid), "cmdline"))
		if strings.Contains(string(cmdline), "token=") {
			t.Errorf("process %d has a token on its command line: %q", pid, cmdline)
		}
	}
	// A notebook saved through the Contents API.
	nb := `{"type":"notebook","content":{"cells":[{"cell_type":"code","source":"print(1)","metadata":{},"outputs":[],"execution_count":null}],"metadata":{},"nbformat":4,"nbformat_minor":5}}`
	if code, b := s.do(http.MethodPut, "/spaces/default/nb/api/contents/analysis.ipynb", []byte(nb), nil); code != http.StatusCreated && code != http.StatusOK {
		t.Fatalf("save notebook: %d %s", code, b)
	}

	// A replica that needs the same slice waits for it.
	s.apply(waiterJSM)
	testutil.Poller{Timeout: 30 * time.Second, MaxInterval: slowPoll}.Eventually(t, "the waiter's replica to be pending", func() bool {
		out, _ := s.capstan("describe", "jsm", "waiter")
		return strings.Contains(out, "FailedScheduling") && strings.Contains(out, "mig-7g.80gb")
	})
	if st := s.waiter(); st.Status.ReadyReplicas != 0 {
		t.Fatalf("the waiter has %d ready replicas while the space holds the slice", st.Status.ReadyReplicas)
	}

	// An hour on the server's clock: the space's cost is its slice's share
	// of the node's price (7g.80gb is the whole H100 of an ml.p5.4xlarge,
	// $14.13/h).
	if m := s.metrics(); !strings.Contains(m, `capstan_spaces{phase="Running"} 1`) {
		t.Errorf("/metrics lacks the running space:\n%s", grepLines(m, "capstan_space"))
	}
	s.mustCapstan("clock", "advance", "1h")

	// Stop: the process goes, the slice goes to the waiting replica.
	s.apply(workspaceYAML("nb", "Stopped", ""))
	w = s.waitPhase("nb", "Stopped", 60*time.Second)
	if w.Status.MIGSlice != "" || w.Status.Node != "" {
		t.Errorf("a stopped space still shows slice %q on node %q", w.Status.MIGSlice, w.Status.Node)
	}
	testutil.Poller{Timeout: 30 * time.Second, MaxInterval: slowPoll}.Eventually(t, "the space's processes to end", func() bool { return len(spaceProcesses(t, s.dataDir, "default/nb")) == 0 })
	testutil.Poller{Timeout: 60 * time.Second, MaxInterval: slowPoll}.Eventually(t, "the waiting replica to take the freed slice", func() bool { return s.waiter().Status.ReadyReplicas == 1 })
	if cost := s.metricValue(`capstan_space_cost_usd_total{namespace="default",space="nb"}`); cost < 14.13 || cost > 14.2 {
		t.Errorf("the space's cost after an hour on its slice: $%.4f, want $14.13 (and a few seconds)", cost)
	}
	if code, _ := s.do(http.MethodGet, "/spaces/default/nb/api/status", nil, nil); code != http.StatusServiceUnavailable {
		t.Errorf("a stopped space's URL answered %d, want 503", code)
	}

	// Running again: it waits for the slice, gets it when the replica
	// goes, and its notebook is still there.
	s.apply(workspaceYAML("nb", "Running", ""))
	s.waitPhase("nb", "Pending", 30*time.Second)
	s.mustCapstan("delete", "jsm", "waiter")
	s.waitPhase("nb", "Running", 90*time.Second)
	code, b := s.do(http.MethodGet, "/spaces/default/nb/api/contents/analysis.ipynb", nil, nil)
	if code != http.StatusOK || !strings.Contains(string(b), "print(1)") {
		t.Fatalf("the notebook after a restart: %d %s", code, b)
	}

	// get and describe show it.
	if out := s.mustCapstan("get", "ws"); !strings.Contains(out, "nb") || !strings.Contains(out, "Running") || !strings.Contains(out, "mig-7g.80gb") {
		t.Errorf("capstan get ws:\n%s", out)
	}
	out = s.mustCapstan("describe", "ws", "nb")
	for _, want := range []string{"Phase:", "Running", "MIG Slice:", "DesiredStatus", "Started"} {
		if !strings.Contains(out, want) {
			t.Errorf("capstan describe ws nb lacks %q:\n%s", want, out)
		}
	}

	// Delete: process, slice and files go.
	home := filepath.Join(s.dataDir, "spaces", "default", "nb")
	if _, err := os.Stat(filepath.Join(home, "home", "analysis.ipynb")); err != nil {
		t.Fatalf("the notebook is not in the space's home: %v", err)
	}
	s.mustCapstan("delete", "ws", "nb")
	testutil.Poller{Timeout: 60 * time.Second, MaxInterval: slowPoll}.Eventually(t, "the workspace to be gone", func() bool { _, ok := s.workspaceOf("nb"); return !ok })
	if _, err := os.Stat(home); !os.IsNotExist(err) {
		t.Errorf("the space's directory is still there: %v", err)
	}
	if ps := spaceProcesses(t, s.dataDir, ""); len(ps) != 0 {
		t.Errorf("processes left after delete: %v", ps)
	}
	if out := s.mustCapstan("get", "nodes"); !strings.Contains(out, "1 MIG slices: 0 used") {
		t.Errorf("the slice is still held after delete:\n%s", out)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
