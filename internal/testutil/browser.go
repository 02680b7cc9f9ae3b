package testutil

import (
	"context"
	"os"
	"testing"

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
