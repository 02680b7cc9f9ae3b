package testutil

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// ChromiumPath is Debian's Chromium, which test/run.sh installs.
const ChromiumPath = "/usr/bin/chromium"

// NewBrowser starts headless Chromium with a window of width×height and
// returns a context whose actions run in its one tab; it is closed when
// the test ends. The flags keep Chromium off this machine's closed network.
func NewBrowser(t testing.TB, width, height int) context.Context {
	t.Helper()
	if _, err := os.Stat(ChromiumPath); err != nil {
		t.Fatalf("browser tests need Debian's chromium (test/run.sh installs it): %v", err)
	}
	opts := chromiumOptions(width, height)
	// Headless Chromium now and then crashes while it starts on a loaded
	// machine ("chrome failed to start"); a second start works.
	var err error
	for attempt := 1; attempt <= 3; attempt++ {
		// A fresh profile each time: a crashed start leaves its lock behind.
		actx, cancelA := chromedp.NewExecAllocator(context.Background(), append(opts, chromedp.UserDataDir(t.TempDir()))...)
		ctx, cancelB := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
		if err = chromedp.Do(ctx); err == nil {
			t.Cleanup(func() { cancelB(); cancelA() })
			return ctx
		}
		cancelB()
		cancelA()
		t.Logf("start chromium (attempt %d): %v", attempt, err)
	}
	t.Fatalf("start chromium: %v", err)
	return nil
}

// chromiumOptions start headless Chromium with a window of width×height,
// kept off this machine's closed network.
func chromiumOptions(width, height int) []chromedp.ExecAllocatorOption {
	return []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(ChromiumPath),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(width, height),
	}
}

// StartBrowser starts headless Chromium as NewBrowser does, but for many
// tests: no test owns it, so it outlives the test that starts it. Tests open
// their tabs in it with NewTab. The caller must call stop (from TestMain, say),
// which ends Chromium and removes its profile. logf gets Chromium's log.
func StartBrowser(width, height int, logf func(string, ...any)) (browser context.Context, stop func(), err error) {
	if _, err := os.Stat(ChromiumPath); err != nil {
		return nil, nil, fmt.Errorf("browser tests need Debian's chromium (test/run.sh installs it): %w", err)
	}
	// Retried as in NewBrowser, each time with a fresh profile.
	for attempt := 1; attempt <= 3; attempt++ {
		dir, derr := os.MkdirTemp("", "capstan-chromium-")
		if derr != nil {
			return nil, nil, derr
		}
		actx, cancelA := chromedp.NewExecAllocator(context.Background(), append(chromiumOptions(width, height), chromedp.UserDataDir(dir))...)
		ctx, cancelB := chromedp.NewContext(actx, chromedp.WithLogf(logf))
		if err = chromedp.Do(ctx); err == nil {
			return ctx, func() { cancelB(); cancelA(); _ = os.RemoveAll(dir) }, nil
		}
		cancelB()
		cancelA()
		_ = os.RemoveAll(dir)
		logf("start chromium (attempt %d): %v", attempt, err)
	}
	return nil, nil, fmt.Errorf("start chromium: %w", err)
}

// NewTab opens a tab for t in browser (a context from StartBrowser or
// NewBrowser) and returns a context whose actions run in it. The tab has a
// browser context of its own, as an incognito window does: no other tab sees
// its cookies, storage, cache or history. Its window is width×height
// (Chromium makes a window at least 500 px wide). The tab and its browser
// context close when t ends. An error means no tab opened: the browser may
// have died.
func NewTab(t testing.TB, browser context.Context, width, height int) (context.Context, error) {
	t.Helper()
	ctx, cancel := chromedp.NewContext(browser, chromedp.WithNewBrowserContext())
	if err := chromedp.Do(ctx); err != nil {
		cancel()
		return nil, fmt.Errorf("open a tab: %w", err)
	}
	t.Cleanup(cancel)
	w, err := chromedp.CallBrowser(ctx, cdpbrowser.GetWindowForTarget,
		cdpbrowser.GetWindowForTargetParams{TargetID: chromedp.FromContext(ctx).Target.TargetID})
	if err == nil && (w.Bounds == nil || w.Bounds.Width != int64(width) || w.Bounds.Height != int64(height)) {
		_, err = chromedp.CallBrowser(ctx, cdpbrowser.SetWindowBounds,
			cdpbrowser.SetWindowBoundsParams{WindowID: w.WindowID, Bounds: &cdpbrowser.Bounds{Width: int64(width), Height: int64(height)}})
	}
	if err != nil {
		return nil, fmt.Errorf("size the tab's window: %w", err)
	}
	return ctx, nil
}

// UncaughtErrors collects, from now on, the exceptions that no script of
// ctx's tab caught (uncaught throws and unhandled promise rejections), and
// returns a func that lists them so far, each as "message (url:line)".
func UncaughtErrors(t testing.TB, ctx context.Context) func() []string {
	t.Helper()
	var mu sync.Mutex
	var errs []string
	err := chromedp.Listen(ctx, func(ev any) {
		e, ok := ev.(*runtime.EventExceptionThrown)
		if !ok || e.ExceptionDetails == nil {
			return
		}
		d := e.ExceptionDetails
		msg := d.Text
		if d.Exception != nil && d.Exception.Description != "" {
			msg += " " + d.Exception.Description
		}
		mu.Lock()
		errs = append(errs, fmt.Sprintf("%s (%s:%d)", msg, d.URL, d.LineNumber+1))
		mu.Unlock()
	})
	if err != nil {
		t.Fatalf("watch the page's errors: %v", err)
	}
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), errs...)
	}
}
