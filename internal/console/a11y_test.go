package console_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/capstan-dev/capstan/internal/testutil"
)

// axeViolation is one rule axe-core found broken on a page.
type axeViolation struct {
	ID     string `json:"id"`
	Impact string `json:"impact"`
	Help   string `json:"help"`
	Nodes  []struct {
		Target []string `json:"target"`
	} `json:"nodes"`
}

// audit runs axe-core (the accessibility engine browsers' developer tools
// use; web/console's devDependency, installed by the test command's npm ci)
// on the page shown, against WCAG 2.1 A and AA, and fails the test on any
// violation.
func audit(t *testing.T, ctx context.Context, page string) {
	t.Helper()
	for _, v := range violations(t, ctx, page) {
		var where []string
		for _, n := range v.Nodes {
			where = append(where, strings.Join(n.Target, " "))
		}
		t.Errorf("%s: %s (%s): %s — at %s", page, v.ID, v.Impact, v.Help, strings.Join(where, ", "))
	}
}

// violations is what axe-core finds on the page shown.
func violations(t *testing.T, ctx context.Context, page string) []axeViolation {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(testutil.RepoRoot(t), "web", "console", "node_modules", "axe-core", "axe.min.js"))
	if err != nil {
		t.Fatalf("axe-core is missing (run npm ci in web/console; test/run.sh does): %v", err)
	}
	get(t, ctx, "load axe on "+page, chromedp.Evaluate[bool](string(src)+";true"))
	return get(t, ctx, "audit "+page, chromedp.Evaluate[[]axeViolation](
		`axe.run(document, {runOnly: {type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa']}}).then(r => r.violations)`,
		chromedp.EvalAwaitPromise))
}

// TestAccessibility audits every page of the console with axe-core, each
// showing data: an endpoint, a training plan, the default cluster, a
// deployment, the purchase form, apply with its errors, and sign-in.
func TestAccessibility(t *testing.T) {
	s := sharedServer(t)
	scale, demo, nb := name(t, "a11y"), name(t, "a11y-demo"), name(t, "a11y-nb")
	seedScale(t, s, scale, 1, 1)
	yaml := strings.ReplaceAll(demoYAML, "name: demo}", "name: "+demo+"}")
	s.apply(t, yaml, "")
	s.deleteWhenDone(t, manifestsBase+"/namespaces/default/jumpstartmodels/"+demo)
	res, err := http.Post(s.URL+"/apis/workspace.jupyter.org/v1alpha1/apply", "application/yaml",
		strings.NewReader("apiVersion: workspace.jupyter.org/v1alpha1\nkind: Workspace\nmetadata: {name: "+nb+"}\nspec: {displayName: "+nb+"}\n"))
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("apply a workspace: %v %v", err, res)
	}
	res.Body.Close()
	s.deleteWhenDone(t, "/apis/workspace.jupyter.org/v1alpha1/namespaces/default/workspaces/"+nb)
	ctx := newBrowser(t, 1280, 800)
	pages := []struct{ path, ready string }{
		{"/console/endpoints", `[data-testid=endpoints] tbody tr`},
		{"/console/endpoints/" + scale + "-ep-000", `[data-testid=chart-requests]`},
		{"/console/plans", `[data-testid=plans] tbody tr`},
		{"/console/plans/new", `[data-testid=search-offerings]`},
		{"/console/plans/" + scale + "-plan-00", `[data-testid=plan-status]`},
		{"/console/clusters", `[data-testid=clusters] tbody tr`},
		{"/console/clusters/ml-cluster", `[data-testid=nodes] tbody tr`},
		{"/console/clusters/new", `#cw-name`},
		{"/console/deployments", `[data-testid=deployments] tbody tr`},
		{"/console/deployments/jsm/default/" + demo, `[data-testid=events]`},
		{"/console/apply", `textarea`},
		{"/console/spaces", `[data-testid=spaces] tbody tr`},
		{"/console/dashboards", `[data-testid=dashboard-panel][data-state=data] canvas`},
	}
	for _, p := range pages {
		run(t, ctx, "open "+p.path, chromedp.Navigate(s.URL+p.path), chromedp.WaitVisible(chromedp.CSS(p.ready)))
		audit(t, ctx, p.path)
	}
	// The purchase form with the server's errors next to its fields, and
	// apply's list of causes.
	run(t, ctx, "bad search", chromedp.Navigate(s.URL+"/console/plans/new"), searchForm{Count: "0"}.submit(),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=error-plan-count]`)))
	audit(t, ctx, "/console/plans/new with errors")
	run(t, ctx, "bad apply", chromedp.Navigate(s.URL+"/console/apply"), chromedp.WaitVisible(chromedp.CSS(`textarea`)))
	paste(t, ctx, `textarea`, strings.Replace(yaml, "maxReplicaCount: 4", "maxReplicaCount: -1", 1))
	run(t, ctx, "apply", chromedp.Click(chromedp.CSS(`main form button[type=submit]`)), chromedp.WaitVisible(chromedp.CSS(`[data-testid=apply-errors]`)))
	audit(t, ctx, "/console/apply with errors")
	// The cluster wizard's custom setup, with a group's error next to it,
	// and its review.
	run(t, ctx, "wizard", chromedp.Navigate(s.URL+"/console/clusters/new"), chromedp.Click(chromedp.CSS(`[data-testid=mode-custom]`)),
		typeInto(`#cw-name`, "a11y"), chromedp.Click(chromedp.CSS(`[data-testid=addon-tiered-storage]`)), typeInto(`#cw-g0-count`, "-1"),
		chromedp.Click(chromedp.CSS(`[data-testid=to-review]`)), chromedp.WaitVisible(chromedp.CSS(`[data-testid=review-groups]`)))
	audit(t, ctx, "/console/clusters/new review")
	run(t, ctx, "wizard error", chromedp.Click(chromedp.CSS(`[data-testid=create-cluster]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=error-cw-g0-count]`)))
	audit(t, ctx, "/console/clusters/new with errors")

	// The audit itself finds what it should: an unlabelled input and an
	// image without alt text added to a page.
	get(t, ctx, "break the page", chromedp.Evaluate[bool](`(() => {
		document.querySelector('main').insertAdjacentHTML('beforeend', '<input id="unlabelled"><img src="data:," id="no-alt">');
		return true;
	})()`))
	found := map[string]bool{}
	for _, v := range violations(t, ctx, "a broken page") {
		found[v.ID] = true
	}
	if !found["label"] || !found["image-alt"] {
		t.Fatalf("axe on a page with an unlabelled input and an image without alt found %v", found)
	}

	// Sign-in shows only on a server with credentials: one of its own.
	signed := startServer(t, "credentials: [{accessKeyId: AKIDA11Y, secretAccessKey: a11y-secret}]\nadminTokens: [a11y-admin-token-0123456789]\n")
	run(t, ctx, "sign-in", chromedp.Navigate(signed.URL+"/console/"), chromedp.WaitVisible(chromedp.CSS(`#accessKeyId`)))
	audit(t, ctx, "sign-in")
}
