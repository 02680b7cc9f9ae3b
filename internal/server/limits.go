package server

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/netutil"
	"golang.org/x/sync/semaphore"
	"golang.org/x/time/rate"

	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/config"
)

// The connection limits: what one client, or many, can hold of the server.
// Deadlines on connections are wall-clock by nature (the kernel's sockets
// know no other time); rate limits follow the server's clock.

// newHTTPServer wraps handler with the limits and returns the server and the
// listener to serve it on: ln capped at MaxConnections (further connections
// wait in the kernel's accept queue until one closes). No blanket read or
// write timeout: streamed responses may last minutes. Instead request
// bodies and response writes are bounded per read and per write (see
// deadlines), and idle keep-alive connections close after IdleTimeout.
func newHTTPServer(ln net.Listener, handler http.Handler, l config.Limits) (*http.Server, net.Listener) {
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: l.ReadHeaderTimeout.Duration, IdleTimeout: l.IdleTimeout.Duration,
		MaxHeaderBytes: 64 << 10}
	return srv, netutil.LimitListener(ln, l.MaxConnections)
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
// together. A request with a Content-Length takes its length up front, or
// is refused at once with 503 and Retry-After (clients retry; waiting would
// hold the connection and its headers for nothing). A chunked body takes
// its bytes as they arrive; when the budget runs out mid-body the read
// fails with errBodyBudget, which the API answers as a bad body. Bytes are
// given back when the handler returns: until then they may be held (the
// gateway keeps a body to retry on another replica).
func bodyBudget(next http.Handler, max int64) http.Handler {
	sem := semaphore.NewWeighted(max)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch n := r.ContentLength; {
		case n > max:
			doorOf(r.URL.Path).write(w, refusal{kind: refuseTooLarge,
				msg: fmt.Sprintf("The request body of %d bytes exceeds the server's limit of %d bytes (limits.maxInflightBodyBytes).", n, max)})
			return
		case n > 0:
			if !sem.TryAcquire(n) {
				doorOf(r.URL.Path).write(w, refusal{kind: refuseBusy, retryAfter: time.Second,
					msg: "The server is busy: too many request bytes in flight (limits.maxInflightBodyBytes); retry shortly."})
				return
			}
			defer sem.Release(n)
		case n < 0 && r.Body != nil:
			cb := &countedBody{ReadCloser: r.Body, sem: sem}
			defer cb.release()
			r = withBody(r, cb)
		}
		next.ServeHTTP(w, r)
	})
}

// errBodyBudget is a chunked body's read once the server's body budget is spent.
var errBodyBudget = errors.New("the server is busy: too many request bytes in flight (limits.maxInflightBodyBytes); retry shortly")

// countedBody takes the bytes of a body without Content-Length from the
// budget as they are read.
type countedBody struct {
	io.ReadCloser
	sem  *semaphore.Weighted
	mu   sync.Mutex
	held int64
}

func (b *countedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		if !b.sem.TryAcquire(int64(n)) {
			return 0, errBodyBudget
		}
		b.mu.Lock()
		b.held += int64(n)
		b.mu.Unlock()
	}
	return n, err
}

func (b *countedBody) release() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.sem.Release(b.held)
	b.held = 0
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
	akids map[string]bool     // configured access key ids
	keys  map[[32]byte]string // digest of a configured bearer key → its name
	mu    sync.Mutex
	bkts  map[string]*rate.Limiter
	sweep int // sweep full buckets when bkts grows past this
}

func newRateLimiter(cfg config.Config, clk clock.Clock) *rateLimiter {
	rl := &rateLimiter{clk: clk, limit: rate.Limit(cfg.Limits.RateLimit.RequestsPerSecond), burst: cfg.Limits.RateLimit.Burst,
		akids: map[string]bool{}, keys: map[[32]byte]string{}, bkts: map[string]*rate.Limiter{}, sweep: minSweep}
	for _, c := range cfg.Credentials {
		rl.akids[c.AccessKeyID] = true
	}
	for i, k := range cfg.APIKeys {
		rl.keys[keyDigest(k)] = fmt.Sprintf("apiKeys[%d]", i)
	}
	for i, k := range cfg.AdminTokens {
		rl.keys[keyDigest(k)] = fmt.Sprintf("adminTokens[%d]", i)
	}
	return rl
}

// minSweep is the bucket count below which idle buckets are left alone.
const minSweep = 4096

// key names the bucket r is counted in, "" for none. Only configured
// credentials get their own bucket, so made-up keys cannot grow the map
// beyond one bucket per remote IP. Loopback callers without a configured
// credential are not limited: they are this host, where the operator (and
// its benchmarks and tests) already has the whole machine.
func (rl *rateLimiter) key(r *http.Request) string {
	if akid, ok := sigv4KeyID(r.Header.Get("Authorization")); ok && rl.akids[akid] {
		return "akid:" + akid
	}
	if tok, ok := bearerToken(r); ok {
		if name, ok := rl.keys[keyDigest(tok)]; ok {
			return name
		}
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return ""
	}
	return "ip:" + host
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
				doorOf(r.URL.Path).write(w, refusal{kind: refuseThrottled, retryAfter: wait,
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
	return deadlines(rl.middleware(bodyBudget(mux, cfg.Limits.MaxInflightBodyBytes)), cfg.Limits)
}
