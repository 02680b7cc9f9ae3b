// Package spaceproxy serves running spaces at /spaces/<namespace>/<name>/:
// HTTP and WebSocket requests go to the space's app on loopback, with the
// app's token added by capstan, so the user never handles it and the app is
// never reachable but through capstan.
//
// When any authentication is configured a caller needs one of adminTokens as
// 'Authorization: Bearer <token>', or the cookie that opening a space's URL
// with ?capstan_token=<token> once sets (browsers cannot add the header to a
// page load). That cookie is not the token: it is an HMAC, under a key made
// at start, over the space's namespace and name and an expiry, so it opens
// that one space for SessionTTL, until capstan restarts, and nothing else (it
// is no bearer token). Without credentials capstan serves only loopback, and
// so does this proxy, even when the server was told to listen wider.
//
// A WebSocket handshake that carries an Origin other than capstan's own (the
// scheme and Host the request reached capstan with) is refused with 403,
// whatever its credentials: browsers send Origin on every WebSocket, and
// WebSockets have no same-origin policy of their own, so otherwise any page
// the user visits could open a space's kernel channel with their cookie (or,
// without credentials, with none). Clients that are not browsers send no
// Origin and pass.
package spaceproxy

import (
	"bufio"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/spaces"
)

// Path is where spaces are served.
const Path = "/spaces/"

// CookieName is the cookie a ?capstan_token= login sets: a value signed for
// one space (see Handler), never the admin token. The name is the one that
// once held the token itself, so such an old cookie is still stripped before
// a request reaches the app, and refused.
const CookieName = "capstan_space_token"

// SessionTTL is how long a login cookie opens its space.
const SessionTTL = 12 * time.Hour

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
	// Clock dates login cookies; the real clock when nil.
	Clock  clock.Clock
	Logger *slog.Logger
}

// Handler is the proxy.
type Handler struct {
	o Options
	// key signs login cookies. It is made at start and kept nowhere, so a
	// restart signs every browser out, and it is not derived from an admin
	// token, so a leaked cookie gives nothing to guess a token against.
	key []byte
}

// New returns the proxy.
func New(o Options) *Handler {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	key := make([]byte, 32)
	_, _ = rand.Read(key) // never fails (crypto/rand since Go 1.24)
	return &Handler{o: o, key: key}
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
	if isUpgrade(r) {
		if origin, ok := r.Header["Origin"]; ok && (len(origin) != 1 || !ownOrigin(r, origin[0])) {
			h.o.Logger.Warn("space websocket from another origin refused", "space", ns+"/"+name, "origin", strings.Join(origin, ", "), "host", r.Host)
			http.Error(w, fmt.Sprintf("a space's WebSocket opens only from a page of capstan's own origin, %s; this one came from %q",
				schemeOf(r)+"://"+r.Host, strings.Join(origin, ", ")), http.StatusForbidden)
			return
		}
	}
	if h.o.RequireToken && len(h.o.AdminTokens) == 0 {
		http.Error(w, "spaces are closed: authentication is configured but adminTokens is empty; set adminTokens in capstan.yaml", http.StatusUnauthorized)
		return
	}
	if h.o.RequireToken {
		if q := r.URL.Query().Get(QueryToken); q != "" && h.valid(q) && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
			// A session cookie: the browser forgets it when it closes,
			// capstan refuses it after SessionTTL.
			v := h.sign(ns, name, h.o.Clock.Now().Add(SessionTTL))
			http.SetCookie(w, &http.Cookie{Name: CookieName, Value: v, Path: base, HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
			u := *r.URL
			qs := u.Query()
			qs.Del(QueryToken)
			u.RawQuery = qs.Encode()
			http.Redirect(w, r, u.RequestURI(), http.StatusFound)
			return
		}
		if !h.authorized(r, ns, name) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="capstan"`)
			http.Error(w, "this space needs one of the configured adminTokens: send 'Authorization: Bearer <token>', or open "+base+"?"+QueryToken+"=<token> once in a browser (the cookie that sets opens only this space, for "+fmt.Sprintf("%g", SessionTTL.Hours())+" hours or until capstan restarts)", http.StatusUnauthorized)
			return
		}
	}
	if !hasSlash {
		// The query stays: curl resolves code-server's "./?folder=…"
		// redirect to the base without its slash.
		to := base
		if r.URL.RawQuery != "" {
			to += "?" + r.URL.RawQuery
		}
		http.Redirect(w, r, to, http.StatusMovedPermanently)
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
			stripCookie(pr.Out, CookieName)
			if t.Cookie != "" {
				stripCookie(pr.Out, t.Cookie)
				pr.Out.AddCookie(&http.Cookie{Name: t.Cookie, Value: t.Token})
			} else {
				pr.Out.Header.Set("Authorization", "token "+t.Token)
			}
			if t.Base != "" {
				pr.Out.URL.Path = stripBase(pr.Out.URL.Path, t.Base)
				if pr.Out.URL.RawPath != "" {
					pr.Out.URL.RawPath = stripBase(pr.Out.URL.RawPath, t.Base)
				}
			}
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

// authorized reports whether r may reach space ns/name: an admin token as a
// bearer, or a login cookie signed for this space and not expired. A cookie
// is never taken as a token, nor a token as a cookie.
func (h *Handler) authorized(r *http.Request, ns, name string) bool {
	if scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " "); ok && strings.EqualFold(scheme, "Bearer") && h.valid(strings.TrimSpace(tok)) {
		return true
	}
	for _, c := range r.Cookies() {
		if c.Name == CookieName && h.verify(c.Value, ns, name) {
			return true
		}
	}
	return false
}

// cookieVersion starts every login cookie: v1.<expiry, Unix seconds>.<MAC>.
const cookieVersion = "v1"

// sign returns the login cookie for space ns/name that expires at exp.
func (h *Handler) sign(ns, name string, exp time.Time) string {
	e := strconv.FormatInt(exp.Unix(), 10)
	return cookieVersion + "." + e + "." + base64.RawURLEncoding.EncodeToString(h.mac(ns, name, e))
}

// verify reports whether v is a login cookie this proxy signed for ns/name
// that has not expired.
func (h *Handler) verify(v, ns, name string) bool {
	ver, rest, _ := strings.Cut(v, ".")
	e, sig, ok := strings.Cut(rest, ".")
	if ver != cookieVersion || !ok {
		return false
	}
	exp, err := strconv.ParseInt(e, 10, 64)
	if err != nil || strconv.FormatInt(exp, 10) != e || !h.o.Clock.Now().Before(time.Unix(exp, 0)) {
		return false
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	return err == nil && hmac.Equal(got, h.mac(ns, name, e))
}

// mac is the HMAC-SHA256 of a cookie's purpose, space and expiry, each
// length-prefixed so that no two spaces share an input.
func (h *Handler) mac(ns, name, exp string) []byte {
	m := hmac.New(sha256.New, h.key)
	for _, f := range []string{"capstan space cookie", ns, name, exp} {
		fmt.Fprintf(m, "%d:%s;", len(f), f)
	}
	return m.Sum(nil)
}

// isUpgrade reports whether r asks to switch protocols (a WebSocket), as
// httputil.ReverseProxy would take it: either header is enough here.
func isUpgrade(r *http.Request) bool {
	if r.Header.Get("Upgrade") != "" {
		return true
	}
	for _, v := range r.Header.Values("Connection") {
		for _, tok := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(tok), "upgrade") {
				return true
			}
		}
	}
	return false
}

// schemeOf is the scheme r reached capstan with. capstan has no list of
// trusted proxies, so X-Forwarded-Proto is only the client's word and does
// not count.
func schemeOf(r *http.Request) string {
	if r.TLS != nil {
		return "https"
	}
	return "http"
}

// ownOrigin reports whether origin, the Origin header of r, is capstan's own
// origin: the scheme r reached capstan with and r's Host, which a browser
// sets from the URL it opens (X-Forwarded-Host, like X-Forwarded-Proto, is
// the client's word). Hosts compare without case and with default ports
// made explicit; anything but a bare scheme://host[:port] is refused.
func ownOrigin(r *http.Request, origin string) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || u.User != nil || u.Opaque != "" || u.Path != "" || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return false
	}
	scheme := schemeOf(r)
	return strings.ToLower(u.Scheme) == scheme && r.Host != "" && canonHost(u.Host, scheme) == canonHost(r.Host, scheme)
}

// canonHost lower-cases host[:port] and drops the scheme's default port.
func canonHost(hostport, scheme string) string {
	hostport = strings.ToLower(hostport)
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return hostport // no port
	}
	if (scheme == "http" && port == "80") || (scheme == "https" && port == "443") {
		if strings.Contains(host, ":") {
			return "[" + host + "]"
		}
		return host
	}
	return hostport
}

func loopback(remote string) bool {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// stripBase is path without the space's base path, for an app that serves
// at /: "/spaces/ns/name/x" → "/x".
func stripBase(path, base string) string {
	return "/" + strings.TrimPrefix(strings.TrimPrefix(path, base), "/")
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
