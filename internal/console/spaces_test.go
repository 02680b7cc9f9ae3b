package console_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

const spaceYAML = `apiVersion: workspace.jupyter.org/v1alpha1
kind: Workspace
metadata: {name: nb}
spec:
  displayName: my notebook
  resources: {requests: {nvidia.com/mig-7g.80gb: 1}}
`

// spaceCluster is one ml.p5.4xlarge whose H100 is one 7g.80gb MIG slice.
const spaceCluster = `cluster:
  instanceGroups:
    - {name: mig, instanceType: ml.p5.4xlarge, count: 1, migLayout: all-7g.80gb}
`

// TestSpaces: a Workspace pasted on the Apply page goes to the spaces API
// (as capstan apply sends it); the Spaces page lists it with its phase,
// MIG slice, node and an Open link to its URL; Stop and Start flip its
// desiredStatus through the API and the page follows; Delete, after the
// name is typed, removes it. (A server of its own: it configures the
// cluster.)
func TestSpaces(t *testing.T) {
	s := startServer(t, spaceCluster)
	ctx := newBrowser(t, 1280, 800)
	run(t, ctx, "open Apply", chromedp.Navigate(s.URL+"/console/apply"), chromedp.WaitVisible(chromedp.CSS(`#manifest`)))
	paste(t, ctx, "#manifest", spaceYAML+"---\n"+demoYAML)
	run(t, ctx, "apply a space and a model",
		chromedp.Click(chromedp.CSS(`[data-testid=apply]`)),
		waitText(`[data-testid=apply-results]`, "Workspace default/nb created"),
		waitText(`[data-testid=apply-results]`, "JumpStartModel default/demo created"),
	)
	run(t, ctx, "open Spaces",
		chromedp.Navigate(s.URL+"/console/spaces"),
		waitText(`[data-testid=spaces] tbody .status`, "Running"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=open-nb]`)),
		waitText(`[data-testid=spaces] tbody`, "MIG 7g.80gb (GPU 0, slice 0)"),
		waitText(`[data-testid=spaces] tbody`, "ml.p5.4xlarge"),
	)
	href := get(t, ctx, "the Open link", chromedp.Evaluate[string](`document.querySelector("[data-testid=open-nb]").getAttribute("href")`))
	if href != "/spaces/default/nb/" {
		t.Errorf("Open links to %q, want /spaces/default/nb/", href)
	}
	if code := s.getJSON(t, href+"api/status", &map[string]any{}); code != http.StatusOK {
		t.Errorf("the Open link answers %d", code)
	}
	screenshot(t, ctx, "spaces", true)

	desired := func() (string, int64) {
		var w struct {
			Metadata struct{ Generation int64 }     `json:"metadata"`
			Spec     struct{ DesiredStatus string } `json:"spec"`
		}
		s.getJSON(t, "/apis/workspace.jupyter.org/v1alpha1/namespaces/default/workspaces/nb", &w)
		return w.Spec.DesiredStatus, w.Metadata.Generation
	}
	// A double click changes it once: the button is busy while the call runs.
	run(t, ctx, "stop", doubleClick(`button[aria-label="Stop nb"]`), waitText(`[data-testid=spaces] tbody .status`, "Stopped"))
	if d, gen := desired(); d != "Stopped" || gen != 2 {
		t.Fatalf("after Stop: desiredStatus %q generation %d, want Stopped 2", d, gen)
	}
	run(t, ctx, "start", doubleClick(`button[aria-label="Start nb"]`), waitText(`[data-testid=spaces] tbody .status`, "Running"))
	if d, gen := desired(); d != "Running" || gen != 3 {
		t.Fatalf("after Start: desiredStatus %q generation %d, want Running 3", d, gen)
	}
	run(t, ctx, "delete",
		chromedp.Click(chromedp.CSS(`.inline-delete summary`)),
		chromedp.SendKeys(chromedp.CSS(`#delete-default-nb`), "nb"),
		chromedp.Click(chromedp.CSS(`.inline-delete button[type=submit]`)),
	)
	deadline := time.Now().Add(30 * time.Second)
	for s.getJSON(t, "/apis/workspace.jupyter.org/v1alpha1/namespaces/default/workspaces/nb", &map[string]any{}) != http.StatusNotFound {
		if time.Now().After(deadline) {
			t.Fatal("the space was not deleted")
		}
		time.Sleep(200 * time.Millisecond)
	}
	run(t, ctx, "the list empties", waitText(`main`, "No spaces yet"))
	if body := get(t, ctx, "page", chromedp.Evaluate[string](`document.body.innerText`)); strings.Contains(body, "nb ") && strings.Contains(body, "Running") {
		t.Errorf("the deleted space is still listed:\n%s", body)
	}
}
