package server

import (
	"container/list"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/config"
)

// The connection limits: what one client, or many, can hold of the server.
// Deadlines on connections are wall-clock by nature (the kernel's sockets
// know no other time); rate limits follow the server's clock.

// newHTTPServer wraps handler with the limits and returns the server and the
// listener to serve it on: ln capped at MaxConnections, and at
// MaxConnectionsPerPeer for one remote IP (see connLimiter). No blanket
// read or write timeout: streamed responses may last minutes. Instead
// request bodies and response writes are bounded per read and per write
// (see deadlines), and idle keep-alive connections close after IdleTimeout,
// or sooner when the cap needs their slot.
func newHTTPServer(ln net.Listener, handler http.Handler, l config.Limits) (*http.Server, net.Listener) {
	cl := newConnLimiter(ln, l)
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: l.ReadHeaderTimeout.Duration, IdleTimeout: l.IdleTimeout.Duration,
		MaxHeaderBytes: 64 << 10, ConnState: cl.connState}
	return srv, cl
}

// connLimiter is the listener's cap on open connections. The server's
// ConnState hook tells it which connections sit idle between requests, so
// a full server makes room by closing the connection idle longest instead
// of leaving newcomers queued behind keep-alives that may idle for the
// whole IdleTimeout and renew it with every request. A connection that is
// active, or new and still sending its first request (bounded by
// ReadHeaderTimeout), is never closed to make room: with all of them busy
// a newcomer waits in the kernel's accept queue, as before.
//
// One remote IP holds at most perPeer connections: past that its own
// longest-idle connection makes room, and with none idle the new one is
// closed at once (waiting would stall the accept loop for everyone).
// Closing an idle connection races with a client that starts a request on
// it just then, as IdleTimeout does; HTTP clients retry such a request on a
// new connection.
type connLimiter struct {
	net.Listener
	max, perPeer  int
	limitLoopback bool

	mu      sync.Mutex
	changed *sync.Cond // a connection closed or went idle, or the listener closed
	open    int
	peers   map[string]int // open connections per capped peer
	idle    *list.List     // idle *limitedConns, the longest idle first
	closed  bool
}

func newConnLimiter(ln net.Listener, l config.Limits) *connLimiter {
	cl := &connLimiter{Listener: ln, max: l.MaxConnections, perPeer: l.MaxConnectionsPerPeer, limitLoopback: l.LimitLoopback,
		peers: map[string]int{}, idle: list.New()}
	if cl.perPeer < 1 || cl.perPeer > cl.max {
		cl.perPeer = cl.max
	}
	cl.changed = sync.NewCond(&cl.mu)
	return cl
}

// limitedConn is an admitted connection; its fields are guarded by l.mu.
type limitedConn struct {
	net.Conn
	l        *connLimiter
	peer     string        // "" for a peer without a cap of its own
	admitted bool          // counted in l.open; false once closed or evicted
	idleAt   *list.Element // in l.idle while idle
}

// Close gives the connection's slot back (once) and closes it.
func (c *limitedConn) Close() error {
	c.l.mu.Lock()
	c.l.drop(c)
	c.l.mu.Unlock()
	return c.Conn.Close()
}

// Accept returns the next connection the caps admit.
func (l *connLimiter) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if lc := l.admit(c); lc != nil {
			return lc, nil
		}
	}
}

// admit makes room for c and counts it, or closes it and returns nil (its
// peer is at its cap with nothing idle, or the listener closed).
func (l *connLimiter) admit(c net.Conn) *limitedConn {
	lc := &limitedConn{Conn: c, l: l, peer: peerKey(c.RemoteAddr().String(), l.limitLoopback)}
	l.mu.Lock()
	defer l.mu.Unlock()
	if lc.peer != "" && l.peers[lc.peer] >= l.perPeer && !l.evictOldestIdle(lc.peer) {
		_ = c.Close()
		return nil
	}
	for l.open >= l.max {
		if l.closed {
			_ = c.Close()
			return nil
		}
		if !l.evictOldestIdle("") {
			l.changed.Wait()
		}
	}
	lc.admitted = true
	l.open++
	if lc.peer != "" {
		l.peers[lc.peer]++
	}
	return lc
}

// evictOldestIdle closes the connection idle longest (of peer, or of
// anyone for ""); false when there is none. l.mu is held.
func (l *connLimiter) evictOldestIdle(peer string) bool {
	for e := l.idle.Front(); e != nil; e = e.Next() {
		if c := e.Value.(*limitedConn); peer == "" || c.peer == peer {
			l.drop(c)
			// Its serve goroutine sees the read fail and ends it; that Close
			// finds the slot already given back.
			_ = c.Conn.Close()
			return true
		}
	}
	return false
}

// drop gives c's slot back, once. l.mu is held.
func (l *connLimiter) drop(c *limitedConn) {
	if !c.admitted {
		return
	}
	c.admitted = false
	if c.idleAt != nil {
		l.idle.Remove(c.idleAt)
		c.idleAt = nil
	}
	l.open--
	if c.peer != "" {
		if l.peers[c.peer]--; l.peers[c.peer] <= 0 {
			delete(l.peers, c.peer)
		}
	}
	l.changed.Broadcast()
}

// connState is the http.Server's ConnState hook: it keeps l.idle in the
// order connections went idle. A hijacked connection leaves net/http's
// care but keeps its slot until its new owner closes it.
func (l *connLimiter) connState(c net.Conn, s http.ConnState) {
	lc, ok := c.(*limitedConn)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !lc.admitted {
		return
	}
	switch s {
	case http.StateIdle:
		if lc.idleAt == nil {
			lc.idleAt = l.idle.PushBack(lc)
			l.changed.Broadcast()
		}
	case http.StateActive, http.StateHijacked:
		if lc.idleAt != nil {
			l.idle.Remove(lc.idleAt)
			lc.idleAt = nil
		}
	case http.StateClosed:
		l.drop(lc)
	}
}

// Close stops accepting, releasing an Accept that waits for room.
func (l *connLimiter) Close() error {
	l.mu.Lock()
	l.closed = true
	l.changed.Broadcast()
	l.mu.Unlock()
	return l.Listener.Close()
}

// counts reports the open and the idle connections (tests).
func (l *connLimiter) counts() (open, idle int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open, l.idle.Len()
}

// deadlines bounds the two ways a client can hold a handler: a body that
// stops arriving (each read of the request body must make progress within
// BodyReadTimeout) and a response it stops reading (each write or flush
// must complete within WriteTimeout). A client that keeps sending, or a
// stream that keeps flowing, is never cut.
func deadlines(next http.Handler, l config.Limits) http.Handler {
	readTO, writeTO := l.BodyReadTimeout.Duration, l.WriteTimeout.Duration
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		_ = rc.SetWriteDeadline(socketDeadline(writeTO))
		if r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0 {
			// Also bounds the server draining a body the handler left unread.
			_ = rc.SetReadDeadline(socketDeadline(readTO))
			r = withBody(r, &progressBody{ReadCloser: r.Body, rc: rc, timeout: readTO})
		}
		next.ServeHTTP(&deadlineWriter{ResponseWriter: w, rc: rc, timeout: writeTO}, r)
		// The final flush happens after the handler returns.
		_ = rc.SetWriteDeadline(socketDeadline(writeTO))
	})
}

// withBody returns a shallow copy of r reading body. The copy matters:
// after the handler, net/http decides from the request it made whether an
// unread body may be drained (a small one) or the connection closed (a
// large one, as a refused upload leaves it); a body of another type there
// makes it drain, waiting on a client that may never send.
func withBody(r *http.Request, body io.ReadCloser) *http.Request {
	r = r.WithContext(r.Context())
	r.Body = body
	return r
}

// socketDeadline is d from now by the wall clock: the kernel's sockets know
// no other time, so connection deadlines never follow the (dev) clock.
func socketDeadline(d time.Duration) time.Time { return clock.Real{}.Now().Add(d) }

// progressBody extends the connection's read deadline after every read that
// delivers bytes, until the body's end: there net/http clears the deadline
// itself and reads the connection in the background to notice a client
// going away, and a deadline set again there would cancel a long streamed
// response.
type progressBody struct {
	io.ReadCloser
	rc      *http.ResponseController
	timeout time.Duration
}

func (b *progressBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 && err == nil {
		_ = b.rc.SetReadDeadline(socketDeadline(b.timeout))
	}
	return n, err
}

// deadlineWriter moves the write deadline forward before every write and
// flush. Unwrap lets http.ResponseController reach the connection's writer.
type deadlineWriter struct {
	http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
}

func (w *deadlineWriter) Write(p []byte) (int, error) {
	_ = w.rc.SetWriteDeadline(socketDeadline(w.timeout))
	return w.ResponseWriter.Write(p)
}

func (w *deadlineWriter) Flush() {
	_ = w.rc.SetWriteDeadline(socketDeadline(w.timeout))
	_ = w.rc.Flush()
}

func (w *deadlineWriter) FlushError() error {
	_ = w.rc.SetWriteDeadline(socketDeadline(w.timeout))
	return w.rc.Flush()
}

func (w *deadlineWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// bodyBudget caps the request-body bytes of all requests in flight
// together, and the share of them one configured credential or one peer
// holds (the budget is taken before authentication, so a request's
// credential is the one it claims). A request with a Content-Length takes
// its length up front, or is refused at once, with Retry-After (clients
// retry; waiting would hold the connection and its headers for nothing):
// 503 when the whole budget is spent, the door's throttling answer when
// its credential's or peer's share is. A chunked body takes its bytes as
// they arrive; when the budget runs out mid-body the read fails with
// errBodyBudget, which the API answers as a bad body. Bytes are given back
// when the handler returns: until then they may be held (the gateway keeps
// a body to retry on another replica).
func bodyBudget(next http.Handler, p *principals, l config.Limits) http.Handler {
	b := newBudget(l)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := r.ContentLength
		if n == 0 || r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		sh := share{cred: p.credential(r), peer: peerKey(r.RemoteAddr, p.limitLoopback)}
		if n > 0 {
			if limit, field := b.capFor(sh); n > limit {
				refuse(w, r, refusal{kind: refuseTooLarge,
					msg: fmt.Sprintf("The request body of %d bytes exceeds the server's limit of %d bytes (limits.%s).", n, limit, field)})
				return
			}
			if field := b.take(sh, n); field != "" {
				refuse(w, r, busyRefusal(field))
				return
			}
			defer b.give(sh, n)
		} else {
			cb := &countedBody{ReadCloser: r.Body, b: b, sh: sh}
			defer cb.release()
			r = withBody(r, cb)
		}
		next.ServeHTTP(w, r)
	})
}

// busyRefusal is the answer when field's budget has no room: the whole
// budget's is the server's (503), a share's is the client's (throttled).
func busyRefusal(field string) refusal {
	if field == "maxInflightBodyBytes" {
		return refusal{kind: refuseBusy, retryAfter: time.Second,
			msg: "The server is busy: too many request bytes in flight (limits.maxInflightBodyBytes); retry shortly."}
	}
	return refusal{kind: refuseThrottled, retryAfter: time.Second,
		msg: fmt.Sprintf("Too many request bytes in flight for this client (limits.%s); retry shortly.", field)}
}

// errBodyBudget is a chunked body's read once the server's body budget, or
// the client's share of it, is spent.
var errBodyBudget = errors.New("the server is busy: too many request bytes in flight (limits.maxInflightBodyBytes, or this client's share of it); retry shortly")

// budget counts the body bytes in flight: in all, per credential and per
// peer, each against its cap.
type budget struct {
	total, perCred, perPeer int64

	mu   sync.Mutex
	used int64
	held map[string]int64 // "cred:"+credential or "peer:"+peer → bytes; no zero entries
}

// share names whom a request's bytes count against beyond the whole
// budget: its claimed configured credential and its peer ("" for none).
type share struct{ cred, peer string }

func newBudget(l config.Limits) *budget {
	b := &budget{total: l.MaxInflightBodyBytes, perCred: l.MaxInflightBodyBytesPerCredential, perPeer: l.MaxInflightBodyBytesPerPeer,
		held: map[string]int64{}}
	if b.perCred <= 0 || b.perCred > b.total {
		b.perCred = b.total
	}
	if b.perPeer <= 0 || b.perPeer > b.total {
		b.perPeer = b.total
	}
	return b
}

// parts are the budgets sh draws on besides the whole one: key, cap, field.
func (b *budget) parts(sh share) []struct {
	key   string
	limit int64
	field string
} {
	type part = struct {
		key   string
		limit int64
		field string
	}
	ps := make([]part, 0, 2)
	if sh.cred != "" {
		ps = append(ps, part{"cred:" + sh.cred, b.perCred, "maxInflightBodyBytesPerCredential"})
	}
	if sh.peer != "" {
		ps = append(ps, part{"peer:" + sh.peer, b.perPeer, "maxInflightBodyBytesPerPeer"})
	}
	return ps
}

// capFor is the most sh may ever hold, and the setting that says so.
func (b *budget) capFor(sh share) (int64, string) {
	limit, field := b.total, "maxInflightBodyBytes"
	for _, p := range b.parts(sh) {
		if p.limit < limit {
			limit, field = p.limit, p.field
		}
	}
	return limit, field
}

// take reserves n bytes for sh, all or nothing; when they do not fit it
// takes none and names the setting that refused them.
func (b *budget) take(sh share, n int64) string {
	ps := b.parts(sh)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+n > b.total {
		return "maxInflightBodyBytes"
	}
	for _, p := range ps {
		if b.held[p.key]+n > p.limit {
			return p.field
		}
	}
	b.used += n
	for _, p := range ps {
		b.held[p.key] += n
	}
	return ""
}

// give returns n bytes sh took.
func (b *budget) give(sh share, n int64) {
	ps := b.parts(sh)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= n
	for _, p := range ps {
		if b.held[p.key] -= n; b.held[p.key] <= 0 {
			delete(b.held, p.key)
		}
	}
}

// countedBody takes the bytes of a body without Content-Length from the
// budget as they are read.
type countedBody struct {
	io.ReadCloser
	b    *budget
	sh   share
	mu   sync.Mutex
	held int64
}

func (c *countedBody) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	if n > 0 {
		if c.b.take(c.sh, int64(n)) != "" {
			return 0, errBodyBudget
		}
		c.mu.Lock()
		c.held += int64(n)
		c.mu.Unlock()
	}
	return n, err
}

func (c *countedBody) release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.b.give(c.sh, c.held)
	c.held = 0
}

// principals says whom a request counts against, as the limits see it
// before any authentication: the configured credential it names, and the
// peer it comes from.
type principals struct {
	akids         map[string]bool     // configured access key ids
	keys          map[[32]byte]string // digest of a configured bearer key → its name
	limitLoopback bool
}

func newPrincipals(cfg config.Config) *principals {
	p := &principals{akids: map[string]bool{}, keys: map[[32]byte]string{}, limitLoopback: cfg.Limits.LimitLoopback}
	for _, c := range cfg.Credentials {
		p.akids[c.AccessKeyID] = true
	}
	for i, k := range cfg.APIKeys {
		p.keys[keyDigest(k)] = fmt.Sprintf("apiKeys[%d]", i)
	}
	for i, k := range cfg.AdminTokens {
		p.keys[keyDigest(k)] = fmt.Sprintf("adminTokens[%d]", i)
	}
	return p
}

// credential names the configured credential r claims, "" for none: the
// access key id of its SigV4 Authorization (unverified), or the name of
// the API key or admin token it bears. Made-up keys name none, so they
// cannot multiply the per-credential limits.
func (p *principals) credential(r *http.Request) string {
	if akid, ok := sigv4KeyID(r.Header.Get("Authorization")); ok && p.akids[akid] {
		return "akid:" + akid
	}
	if tok, ok := bearerToken(r); ok {
		if name, ok := p.keys[keyDigest(tok)]; ok {
			return name
		}
	}
	return ""
}

// peerKey is the remote IP of hostport for the per-address limits, "" for
// a loopback peer unless limitLoopback: that is this host, where the
// operator (and its benchmarks and tests, or a reverse proxy relaying
// every client) already has the whole machine.
func peerKey(hostport string, limitLoopback bool) string {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() && !limitLoopback {
		return ""
	}
	return "ip:" + host
}

// rateLimiter is a token bucket per credential: the access key id a SigV4
// request names, the bearer key (API key or admin token) a request carries,
// or, for requests without a configured one, the remote IP. A request is
// counted before it is authenticated: a forged signature still spends its
// claimed key's tokens, then fails the signature check.
type rateLimiter struct {
	clk   clock.Clock
	limit rate.Limit
	burst int
	who   *principals
	mu    sync.Mutex
	bkts  map[string]*rate.Limiter
	sweep int // sweep full buckets when bkts grows past this
}

func newRateLimiter(cfg config.Config, clk clock.Clock) *rateLimiter {
	return &rateLimiter{clk: clk, limit: rate.Limit(cfg.Limits.RateLimit.RequestsPerSecond), burst: cfg.Limits.RateLimit.Burst,
		who: newPrincipals(cfg), bkts: map[string]*rate.Limiter{}, sweep: minSweep}
}

// minSweep is the bucket count below which idle buckets are left alone.
const minSweep = 4096

// key names the bucket r is counted in, "" for none. Only configured
// credentials get their own bucket, so made-up keys cannot grow the map
// beyond one bucket per remote IP. Loopback callers without a configured
// credential are not limited unless limits.limitLoopback (see peerKey).
func (rl *rateLimiter) key(r *http.Request) string {
	if cred := rl.who.credential(r); cred != "" {
		return cred
	}
	return peerKey(r.RemoteAddr, rl.who.limitLoopback)
}

// sigv4KeyID reads the access key id out of a SigV4 Authorization header
// ("AWS4-HMAC-SHA256 Credential=AKID/date/region/service/aws4_request, ...").
func sigv4KeyID(auth string) (string, bool) {
	rest, ok := strings.CutPrefix(auth, "AWS4-HMAC-SHA256 ")
	if !ok {
		return "", false
	}
	for _, part := range strings.Split(rest, ",") {
		if cred, ok := strings.CutPrefix(strings.TrimSpace(part), "Credential="); ok {
			akid, _, ok := strings.Cut(cred, "/")
			return akid, ok && akid != ""
		}
	}
	return "", false
}

// allow takes one token from key's bucket; when empty it reports how long
// until the next token.
func (rl *rateLimiter) allow(key string) (bool, time.Duration) {
	now := rl.clk.Now()
	rl.mu.Lock()
	defer rl.mu.Unlock()
	b, ok := rl.bkts[key]
	if !ok {
		if len(rl.bkts) >= rl.sweep {
			rl.dropFull(now)
		}
		b = rate.NewLimiter(rl.limit, rl.burst)
		rl.bkts[key] = b
	}
	if b.AllowN(now, 1) {
		return true, 0
	}
	return false, time.Duration((1 - b.TokensAt(now)) / float64(rl.limit) * float64(time.Second))
}

// dropFull forgets buckets that have refilled: a fresh one is the same. The
// next sweep waits until the map doubles, so the cost stays constant per
// request even when every bucket is busy.
func (rl *rateLimiter) dropFull(now time.Time) {
	for k, b := range rl.bkts {
		if b.TokensAt(now) >= float64(rl.burst) {
			delete(rl.bkts, k)
		}
	}
	rl.sweep = max(minSweep, 2*len(rl.bkts))
}

// middleware refuses requests over their bucket's rate in the door's shape.
// /healthz is exempt: a load balancer's probe must not be throttled by the
// traffic it is judging.
func (rl *rateLimiter) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			next.ServeHTTP(w, r)
			return
		}
		if key := rl.key(r); key != "" {
			if ok, wait := rl.allow(key); !ok {
				refuse(w, r, refusal{kind: refuseThrottled, retryAfter: wait,
					msg: fmt.Sprintf("Rate exceeded: at most %g requests/s (burst %d) per credential or client address (limits.rateLimit).", float64(rl.limit), rl.burst)})
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// guard is the whole chain of limits around the server's routes.
func guard(mux http.Handler, cfg config.Config, clk clock.Clock) http.Handler {
	rl := newRateLimiter(cfg, clk)
	return deadlines(rl.middleware(bodyBudget(mux, rl.who, cfg.Limits)), cfg.Limits)
}
