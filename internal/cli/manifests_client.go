package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/manifest"
	"github.com/capstan-dev/capstan/internal/manifestapi"
)

// manifestsOptions are what apply, get, describe and delete share: where the
// server is, the bearer token, and the clock AGE columns are measured with.
type manifestsOptions struct {
	g     *globalOptions
	token string
	clk   clock.Clock
	http  *http.Client
	// served is the server's time as its last answer's Date header gave
	// it, and seen when (by clk) that answer came: AGE columns measure
	// from the server's clock, which --dev-clock moves away from this
	// machine's. Zero until an answer carries a Date.
	served, seen time.Time
}

func newManifestsOptions(g *globalOptions, clk clock.Clock) *manifestsOptions {
	return &manifestsOptions{g: g, clk: clk, http: &http.Client{Timeout: 60 * time.Second}}
}

func (o *manifestsOptions) addFlags(cmd *cobra.Command) {
	cmd.Flags().StringVar(&o.token, "token", "", "admin token (one of the server's adminTokens) sent as 'Authorization: Bearer' (env CAPSTAN_TOKEN)")
}

// adminToken is flag, else $CAPSTAN_TOKEN: the server's adminTokens guard
// the manifests API and the dev clock alike.
func adminToken(flag string) string {
	if flag != "" {
		return flag
	}
	return os.Getenv("CAPSTAN_TOKEN")
}

// manifestsClient speaks the manifests HTTP API (internal/manifestapi).
type manifestsClient struct {
	base  string
	token string
	http  *http.Client
	// date hears the Date header of each answer that has one.
	date func(time.Time)
}

func (o *manifestsOptions) client() *manifestsClient {
	return &manifestsClient{base: strings.TrimRight(o.g.serverURL(), "/"), token: adminToken(o.token), http: o.http,
		date: func(t time.Time) { o.served, o.seen = t, o.clk.Now() }}
}

// now is the server's time: the last answer's Date plus what has passed
// here since, or this machine's time before any answer carried one.
func (o *manifestsOptions) now() time.Time {
	if o.served.IsZero() {
		return o.clk.Now()
	}
	return o.served.Add(clock.Since(o.clk, o.seen))
}

// do sends a request and decodes a 2xx JSON answer into out (when non-nil).
// A failure answer comes back as *manifestapi.Status.
func (c *manifestsClient) do(ctx context.Context, method, path string, body []byte, out any) error {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return fmt.Errorf("build request: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/yaml")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("cannot reach the capstan server at %s (is `capstan serve` running? set --server or CAPSTAN_SERVER): %w", c.base, err)
	}
	defer resp.Body.Close()
	if t, err := http.ParseTime(resp.Header.Get("Date")); err == nil && c.date != nil {
		c.date(t)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("read answer from %s: %w", c.base, err)
	}
	if resp.StatusCode/100 != 2 {
		var st manifestapi.Status
		if json.Unmarshal(data, &st) == nil && st.Kind == "Status" {
			return &st
		}
		if resp.StatusCode == http.StatusUnauthorized {
			return fmt.Errorf("the server at %s requires an admin token (one of its adminTokens): pass --token or set CAPSTAN_TOKEN (HTTP 401)", c.base)
		}
		return fmt.Errorf("%s %s: HTTP %d: %s", method, path, resp.StatusCode, strings.TrimSpace(string(data)))
	}
	if out == nil {
		return nil
	}
	if raw, ok := out.(*json.RawMessage); ok {
		*raw = data
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("decode answer of %s %s: %w", method, path, err)
	}
	return nil
}

// isNotFound reports whether err is the server's NotFound.
func isNotFound(err error) bool {
	var st *manifestapi.Status
	return errors.As(err, &st) && st.Reason == manifestapi.ReasonNotFound
}

// formatAPIError renders a server error the way kubectl does, with every
// field error of an Invalid answer on its own line, grouped by object.
func formatAPIError(err error) string {
	var st *manifestapi.Status
	if !errors.As(err, &st) {
		return err.Error()
	}
	if st.Reason != manifestapi.ReasonInvalid || st.Details == nil || len(st.Details.Causes) == 0 {
		return fmt.Sprintf("%s (%s)", st.Message, st.Reason)
	}
	var b strings.Builder
	last := ""
	for _, c := range st.Details.Causes {
		who := c.Object
		if who == "" && st.Details.Kind != "" {
			who = st.Details.Kind + "/" + st.Details.Name
		}
		if c.Document != nil {
			who = strings.TrimSpace(fmt.Sprintf("%s (document %d, line %d)", who, *c.Document, c.Line))
		}
		if who != last || b.Len() == 0 {
			if b.Len() > 0 {
				b.WriteByte('\n')
			}
			if who == "" {
				who = "the manifest"
			}
			fmt.Fprintf(&b, "%s is invalid:", who)
			last = who
		}
		if c.Field != "" {
			fmt.Fprintf(&b, "\n  * %s: %s", c.Field, c.Message)
		} else {
			fmt.Fprintf(&b, "\n  * %s", c.Message)
		}
	}
	return b.String()
}

// decodeObject turns one server object into its typed form by its kind.
func decodeObject(raw []byte) (manifest.Object, error) {
	var h struct {
		Kind string `json:"kind"`
	}
	if err := json.Unmarshal(raw, &h); err != nil {
		return nil, fmt.Errorf("decode object: %w", err)
	}
	var o manifest.Object
	switch h.Kind {
	case manifest.KindInferenceEndpointConfig:
		o = &manifest.InferenceEndpointConfig{}
	case manifest.KindJumpStartModel:
		o = &manifest.JumpStartModel{}
	default:
		return nil, fmt.Errorf("decode object: unexpected kind %q", h.Kind)
	}
	if err := json.Unmarshal(raw, o); err != nil {
		return nil, fmt.Errorf("decode %s: %w", h.Kind, err)
	}
	return o, nil
}

// resolveKind maps what the user typed to a resource, or says what is served.
func resolveKind(s string) (manifestapi.Resource, error) {
	r, ok := manifestapi.ResolveKind(s)
	if !ok {
		return r, fmt.Errorf("unknown resource type %q: use inferenceendpointconfig (iec), jumpstartmodel (jsm), workspace (ws) or workspacetemplate (wst)", s)
	}
	return r, nil
}

// namespaceOr returns ns, or the default namespace when empty.
func namespaceOr(ns string) string {
	if ns == "" {
		return manifest.DefaultNamespace
	}
	return ns
}

// humanAge renders a duration as kubectl's AGE column does.
func humanAge(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	s := int64(d / time.Second)
	switch {
	case s < 120:
		return fmt.Sprintf("%ds", s)
	case s < 600:
		return fmt.Sprintf("%dm%ds", s/60, s%60)
	case s < 3*3600:
		return fmt.Sprintf("%dm", s/60)
	case s < 8*3600:
		if m := (s % 3600) / 60; m != 0 {
			return fmt.Sprintf("%dh%dm", s/3600, m)
		}
		return fmt.Sprintf("%dh", s/3600)
	case s < 48*3600:
		return fmt.Sprintf("%dh", s/3600)
	case s < 8*86400:
		if h := (s % 86400) / 3600; h != 0 {
			return fmt.Sprintf("%dd%dh", s/86400, h)
		}
		return fmt.Sprintf("%dd", s/86400)
	case s < 2*365*86400:
		return fmt.Sprintf("%dd", s/86400)
	default:
		return fmt.Sprintf("%dy", s/(365*86400))
	}
}

// age is the AGE of a timestamp, "<unknown>" when unset.
func (o *manifestsOptions) age(t *time.Time) string {
	if t == nil || t.IsZero() {
		return "<unknown>"
	}
	return o.ageOf(*t)
}
