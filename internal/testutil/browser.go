package testutil

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"

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
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(ChromiumPath),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(width, height),
	}
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
