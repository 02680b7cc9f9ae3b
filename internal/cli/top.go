package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/manifestapi"
	"github.com/capstan-dev/capstan/internal/top"
)

// Bounds of --interval and --count: a refresh faster than 100ms measures
// mostly scrape noise; a window beyond an hour is not a live view.
const (
	minTopInterval = 100 * time.Millisecond
	maxTopInterval = time.Hour
	maxTopCount    = 1_000_000
)

// ANSI sequences that hide the cursor while top redraws, and show it again.
const (
	hideCursor = "\x1b[?25l"
	showCursor = "\x1b[?25h"
)

type topOptions struct {
	g        *globalOptions
	clk      clock.Clock
	http     *http.Client
	token    string
	interval time.Duration
	once     bool
	count    int
	// tty forces the terminal view (tests); nil: stdout decides.
	tty func(io.Writer) bool
}

func newTopCommand(g *globalOptions) *cobra.Command {
	return topCommand(&topOptions{g: g, clk: clock.Real{}, http: &http.Client{Timeout: 30 * time.Second}})
}

func topCommand(o *topOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "top",
		Short: "Live view of endpoints and deployments: request rate, TTFT, replicas, KV hit rate, queue",
		Long: `top scrapes the server's /metrics every --interval and shows, for every
SageMaker endpoint and manifest deployment, over the window between the last two
scrapes: requests per second, time to first token p50/p95 (time to first byte
when no streamed request finished in the window; the header says which),
replicas ready/desired, the share of prompt tokens served from the KV cache,
and the requests in flight and queued now. "-" means no data in the window.

In a terminal it redraws in place, busiest first; q or Ctrl-C quits. Over a
pipe it prints one block of plain lines per refresh, each headed by its
timestamp; --once prints one refresh (after one interval) and exits, --count N
prints N. With adminTokens configured, /metrics needs one: --token or
CAPSTAN_TOKEN.`,
		Example: `  capstan top
  capstan top --once --interval 1s
  capstan top --count 10 --interval 5s > top.log`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.interval < minTopInterval || o.interval > maxTopInterval {
				return fmt.Errorf("--interval %s: want between %s and %s", o.interval, minTopInterval, maxTopInterval)
			}
			if o.count < 0 || o.count > maxTopCount {
				return fmt.Errorf("--count %d: want between 0 (until quit) and %d", o.count, maxTopCount)
			}
			if o.once {
				if cmd.Flags().Changed("count") && o.count != 1 {
					return errors.New("--once is --count 1; give one of them")
				}
				o.count = 1
			}
			return o.run(cmd)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.token, "token", "", "admin token (one of the server's adminTokens) sent as 'Authorization: Bearer' (env CAPSTAN_TOKEN)")
	f.DurationVar(&o.interval, "interval", 2*time.Second, "time between refreshes (the window rates and quantiles cover)")
	f.BoolVar(&o.once, "once", false, "print one refresh after one interval, then exit")
	f.IntVar(&o.count, "count", 0, "exit after N refreshes (0: until q or Ctrl-C)")
	return cmd
}

func (o *topOptions) isTerminal(w io.Writer) bool {
	if o.tty != nil {
		return o.tty(w)
	}
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// size is the terminal's width and height, or 0, 0 when unknown.
func (o *topOptions) size(w io.Writer) (int, int) {
	f, ok := w.(*os.File)
	if !ok {
		return 0, 0
	}
	width, height, err := term.GetSize(int(f.Fd()))
	if err != nil {
		return 0, 0
	}
	return width, height
}

func (o *topOptions) run(cmd *cobra.Command) error {
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	out := cmd.OutOrStdout()
	screen := o.isTerminal(out)
	if screen {
		var restore func()
		ctx, restore = o.keys(ctx, cmd.InOrStdin())
		defer restore()
		_, _ = io.WriteString(out, hideCursor)
		defer func() { _, _ = io.WriteString(out, showCursor) }()
	}
	base := strings.TrimRight(o.g.serverURL(), "/")
	prev, err := o.scrape(ctx, base)
	if err != nil {
		return err
	}
	if screen {
		// Something to look at while the first window fills.
		fmt.Fprintf(out, "%s%s  measuring the first %s window…\r\n", top.ClearHome, base, o.interval)
	}
	for n := 0; o.count == 0 || n < o.count; n++ {
		if err := clock.Sleep(ctx, o.clk, o.interval); err != nil {
			return nil // q, Ctrl-C or SIGTERM: a clean exit
		}
		cur, err := o.scrape(ctx, base)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		order := top.ByName
		if screen {
			order = top.ByRate
		}
		f := top.Diff(prev, cur, o.routes(ctx, base, cur), order)
		if screen {
			width, height := o.size(out)
			err = f.WriteScreen(out, "q or Ctrl-C quits  ·  "+base, width, height)
		} else {
			err = f.WritePlain(out)
		}
		if err != nil {
			return err
		}
		prev = cur
	}
	return nil
}

// keys puts a terminal stdin in raw mode and ends the returned context on
// q, Q or Ctrl-C; restore puts the terminal back.
func (o *topOptions) keys(ctx context.Context, in io.Reader) (context.Context, func()) {
	ctx, cancel := context.WithCancel(ctx)
	restore := func() { cancel() }
	if f, ok := in.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		if st, err := term.MakeRaw(int(f.Fd())); err == nil {
			restore = func() {
				cancel()
				_ = term.Restore(int(f.Fd()), st)
			}
		}
	}
	go func() {
		buf := make([]byte, 16)
		for {
			n, err := in.Read(buf)
			for _, c := range buf[:n] {
				if c == 'q' || c == 'Q' || c == 3 { // 3: Ctrl-C in raw mode
					cancel()
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	return ctx, restore
}

// scrape reads /metrics once, stamped with the clock when the answer came.
func (o *topOptions) scrape(ctx context.Context, base string) (*top.Scrape, error) {
	resp, err := o.get(ctx, base+"/metrics", "text/plain;version=0.0.4")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		if resp.StatusCode == http.StatusUnauthorized {
			return nil, fmt.Errorf("the server at %s requires an admin token for /metrics (one of its adminTokens): pass --token or set CAPSTAN_TOKEN (HTTP 401)", base)
		}
		return nil, fmt.Errorf("GET %s/metrics: HTTP %d: %s", base, resp.StatusCode, strings.TrimSpace(string(msg)))
	}
	return top.Parse(resp.Body, o.clk.Now())
}

func (o *topOptions) get(ctx context.Context, u, accept string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	req.Header.Set("Accept", accept)
	if t := adminToken(o.token); t != "" {
		req.Header.Set("Authorization", "Bearer "+t)
	}
	resp, err := o.http.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("cannot reach the capstan server at %s (is `capstan serve` running? set --server or CAPSTAN_SERVER): %w", strings.TrimSuffix(u, "/metrics"), err)
	}
	return resp, nil
}

// routes asks the manifests API under which endpoint name each deployment
// of the scrape serves (spec.endpointName / sageMakerEndpoint.name). It is
// best effort: a deployment it cannot resolve is shown under its own name,
// which is the route when the manifest names no endpoint.
func (o *topOptions) routes(ctx context.Context, base string, s *top.Scrape) map[top.Deployment]string {
	if len(s.Deployments()) == 0 {
		return nil
	}
	out := map[top.Deployment]string{}
	c := &manifestsClient{base: base, token: adminToken(o.token), http: o.http}
	for _, res := range manifestapi.Resources {
		var l struct {
			Items []json.RawMessage `json:"items"`
		}
		if err := c.do(ctx, http.MethodGet, manifestapi.CollectionPath(res, ""), nil, &l); err != nil {
			continue
		}
		for _, it := range l.Items {
			obj, err := decodeObject(it)
			if err != nil {
				continue
			}
			m := obj.GetMeta()
			if ep := summarize(obj).sageMakerEndpoint; ep != "" {
				out[top.Deployment{Kind: obj.GetKind(), Namespace: m.Namespace, Name: m.Name}] = ep
			}
		}
	}
	return out
}
