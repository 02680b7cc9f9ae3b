// Package spaceproxy serves running spaces at /spaces/<namespace>/<name>/:
// HTTP and WebSocket requests go to the space's app on loopback, with the
// app's token added by capstan, so the user never handles it and the app is
// never reachable but through capstan.
//
// When any authentication is configured a caller needs one of adminTokens: as
// 'Authorization: Bearer <token>', or the cookie that opening a space's URL
// with ?capstan_token=<token> once sets (browsers cannot add the header to a
// page load). Without credentials capstan serves only loopback, and so does
// this proxy, even when the server was told to listen wider.
package spaceproxy

import (
	"bufio"
	"crypto/subtle"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"time"

	"github.com/capstan-dev/capstan/internal/spaces"
)

// Path is where spaces are served.
const Path = "/spaces/"

// CookieName holds an admin token for one space's path.
const CookieName = "capstan_space_token"

// QueryToken is the one-time login parameter.
const QueryToken = "capstan_token"

// Spaces is what the proxy needs of internal/spaces' Service.
type Spaces interface {
	Target(ns, name string) (spaces.Target, bool)
	Phase(ns, name string) (string, bool)
	Touch(ns, name string)
}

// Options configure the Handler.
type Options struct {
	Spaces Spaces
	// RequireToken is set when any authentication is configured: every
	// caller then needs one of AdminTokens, and with none configured the
	// proxy refuses everyone, as the other admin surfaces do.
	RequireToken bool
	AdminTokens  []string
	// LoopbackOnly refuses callers that are not on this host (set when no
	// credentials are configured).
	LoopbackOnly bool
	Logger       *slog.Logger
}

// Handler is the proxy.
type Handler struct{ o Options }

// New returns the proxy.
func New(o Options) *Handler {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Handler{o: o}
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.URL.Path, Path)
	ns, rest, _ := strings.Cut(rest, "/")
	name, _, hasSlash := strings.Cut(rest, "/")
	if ns == "" || name == "" {
		http.Error(w, "a space is served at /spaces/<namespace>/<name>/", http.StatusNotFound)
		return
	}
	base := spaces.BasePath(ns, name)
	if h.o.LoopbackOnly && !loopback(r.RemoteAddr) {
		http.Error(w, "spaces are served only to this host when no credentials are configured (set adminTokens in capstan.yaml)", http.StatusForbidden)
		return
	}
	if h.o.RequireToken && len(h.o.AdminTokens) == 0 {
		http.Error(w, "spaces are closed: authentication is configured but adminTokens is empty; set adminTokens in capstan.yaml", http.StatusUnauthorized)
		return
	}
	if h.o.RequireToken {
		if q := r.URL.Query().Get(QueryToken); q != "" && h.valid(q) && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
			http.SetCookie(w, &http.Cookie{Name: CookieName, Value: q, Path: base, HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
			u := *r.URL
			qs := u.Query()
			qs.Del(QueryToken)
			u.RawQuery = qs.Encode()
			http.Redirect(w, r, u.RequestURI(), http.StatusFound)
			return
		}
		if !h.authorized(r) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="capstan"`)
			http.Error(w, "this space needs one of the configured adminTokens: send 'Authorization: Bearer <token>', or open "+base+"?"+QueryToken+"=<token> once in a browser", http.StatusUnauthorized)
			return
		}
	}
	if !hasSlash {
		http.Redirect(w, r, base, http.StatusMovedPermanently)
		return
	}
	t, ok := h.o.Spaces.Target(ns, name)
	if !ok {
		phase, exists := h.o.Spaces.Phase(ns, name)
		if !exists {
			http.Error(w, fmt.Sprintf("no space %s/%s", ns, name), http.StatusNotFound)
			return
		}
		w.Header().Set("Retry-After", "5")
		http.Error(w, fmt.Sprintf("space %s/%s is not running (phase %s)", ns, name, phase), http.StatusServiceUnavailable)
		return
	}
	h.o.Spaces.Touch(ns, name)
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(&url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", t.Port)})
			// The app checks Origin against Host on WebSockets.
			pr.Out.Host = pr.In.Host
			pr.Out.Header.Set("Authorization", "token "+t.Token)
			stripCookie(pr.Out, CookieName)
			pr.SetXForwarded()
		},
		ErrorLog: slog.NewLogLogger(h.o.Logger.Handler(), slog.LevelWarn),
	}
	rp.ServeHTTP(hijackable{w}, r)
}

func (h *Handler) valid(tok string) bool {
	match := 0
	for _, k := range h.o.AdminTokens {
		match |= subtle.ConstantTimeCompare([]byte(tok), []byte(k))
	}
	return match == 1
}

func (h *Handler) authorized(r *http.Request) bool {
	if scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " "); ok && strings.EqualFold(scheme, "Bearer") && h.valid(strings.TrimSpace(tok)) {
		return true
	}
	c, err := r.Cookie(CookieName)
	return err == nil && h.valid(c.Value)
}

func loopback(remote string) bool {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// stripCookie removes one cookie from an outgoing request: capstan's token
// is not the app's business.
func stripCookie(r *http.Request, name string) {
	cs := r.Cookies()
	r.Header.Del("Cookie")
	for _, c := range cs {
		if c.Name != name {
			r.AddCookie(c)
		}
	}
}

// hijackable clears the connection deadlines the server's limits set when
// the proxy takes the connection over for a WebSocket: a kernel's channel
// stays open for as long as the notebook does.
type hijackable struct{ http.ResponseWriter }

func (w hijackable) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w hijackable) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err == nil {
		_ = c.SetDeadline(time.Time{})
	}
	return c, brw, err
}

func (w hijackable) Flush() { _ = http.NewResponseController(w.ResponseWriter).Flush() }
