package spaces_test

import (
	"context"
	"flag"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/capstan-dev/capstan/internal/testutil"
)

var updateDocs = flag.Bool("update-docs", false, "copy the screenshots docs/spaces.md shows into docs/images/spaces")

// evalUntil evaluates js in the page until it returns true.
func evalUntil(t testing.TB, ctx context.Context, what, js string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		var ok bool
		tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		ok, err := chromedp.Run(tctx, chromedp.Evaluate[bool](js))
		cancel()
		if err == nil && ok {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	body, _ := chromedp.Run(tctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
	t.Fatalf("%s: timed out; page text:\n%s", what, body)
}

// TestNotebookInBrowser opens a space's URL in headless Chromium: the
// notebook UI loads through capstan's proxy, a notebook opens, its kernel
// connects over the proxied WebSocket, and a cell run from the page prints
// the MIG slice the space holds.
func TestNotebookInBrowser(t *testing.T) {
	s := startServer(t, migCluster)
	s.apply(workspaceYAML("nb", "Running", ""))
	w := s.waitPhase("nb", "Running", 90*time.Second)
	nb := `{"type":"notebook","content":{"cells":[{"cell_type":"code","source":"import os\nprint(\"my slice:\", os.environ[\"CAPSTAN_MIG_SLICE\"])","metadata":{},"outputs":[],"execution_count":null}],"metadata":{"kernelspec":{"name":"python3","display_name":"Python 3"}},"nbformat":4,"nbformat_minor":5}}`
	if code, b := s.do(http.MethodPut, "/spaces/default/nb/api/contents/slice.ipynb", []byte(nb), nil); code != http.StatusCreated {
		t.Fatalf("save notebook: %d %s", code, b)
	}
	ctx := testutil.NewBrowser(t, 1280, 800)
	run := func(what string, a ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if _, err := chromedp.Run(tctx, chromedp.Steps(a...)); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	// The status's URL, as a user would open it.
	run("open the space", chromedp.Navigate(w.Status.AccessURL))
	evalUntil(t, ctx, "the file list", `!!document.querySelector("#notebook_list") && document.body.innerText.includes("slice.ipynb")`, 30*time.Second)
	shot(t, ctx, "tree")
	run("open the notebook", chromedp.Navigate(s.URL+"/spaces/default/nb/notebooks/slice.ipynb"))
	evalUntil(t, ctx, "the kernel to connect", `typeof Jupyter !== "undefined" && !!Jupyter.notebook && !!Jupyter.notebook.kernel && Jupyter.notebook.kernel.is_connected()`, 60*time.Second)
	run("run the cell", chromedp.Evaluate[chromedp.Void](`Jupyter.notebook.execute_all_cells()`))
	evalUntil(t, ctx, "the cell's output", `[...document.querySelectorAll(".output_area")].some(e => e.innerText.includes("my slice: 7g.80gb"))`, 60*time.Second)
	shot(t, ctx, "notebook")
}

// shot saves a screenshot among the test artefacts, and into
// docs/images/spaces with -update-docs.
func shot(t testing.TB, ctx context.Context, name string) {
	t.Helper()
	tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	png, err := chromedp.Run(tctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	dirs := []string{os.Getenv("CAPSTAN_ARTIFACTS")}
	if dirs[0] == "" {
		dirs[0] = filepath.Join(testutil.RepoRoot(t), "test", "artifacts")
	}
	dirs[0] = filepath.Join(dirs[0], "spaces")
	if *updateDocs {
		dirs = append(dirs, filepath.Join(testutil.RepoRoot(t), "docs", "images", "spaces"))
	}
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, name+".png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("screenshot %s", strings.Join(dirs, ", "))
}
