package server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	sm "github.com/aws/aws-sdk-go-v2/service/sagemaker"

	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/config"
)

// The fair-share limits: no one client, idle or uploading, holds what
// everyone needs. Loopback peers stand for remote ones with
// limits.limitLoopback, and a second peer is 127.0.0.2 (all of 127/8 is
// loopback on Linux).

const healthz = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"

// readStatus reads one response from c, with d as the bound.
func readStatus(t *testing.T, c net.Conn, d time.Duration) (*http.Response, error) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(d))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	return resp, err
}

// waitIdle waits until cl counts idle connections, so that the order they
// went idle is the order the test made them.
func waitIdle(t *testing.T, cl *connLimiter, idle int) { waitCounts(t, cl, -1, idle) }

// waitCounts waits until cl counts open (-1: any) and idle connections.
func waitCounts(t *testing.T, cl *connLimiter, open, idle int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		o, n := cl.counts()
		if n == idle && (open < 0 || o == open) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d idle connections of %d open, want %d of %d", n, o, idle, open)
		}
	}
}

// idleConns opens n keep-alive connections from dialer that each make one
// request, read the answer and sit idle, oldest first.
func idleConns(t *testing.T, h *harness, d *net.Dialer, n int) []net.Conn {
	t.Helper()
	return idleConnsAfter(t, h, d, n, healthz, http.StatusOK)
}

// idleConnsAfter is idleConns with req answered want.
func idleConnsAfter(t *testing.T, h *harness, d *net.Dialer, n int, req string, want int) []net.Conn {
	t.Helper()
	cl := h.srv.ln.(*connLimiter)
	_, idle0 := cl.counts()
	var cs []net.Conn
	for i := 0; i < n; i++ {
		c, err := d.Dial("tcp", h.srv.Addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if _, err := io.WriteString(c, req); err != nil {
			t.Fatal(err)
		}
		if resp, err := readStatus(t, c, 10*time.Second); err != nil || resp.StatusCode != want {
			t.Fatalf("idle connection %d: %v %v", i, resp, err)
		}
		cs = append(cs, c)
		waitIdle(t, cl, idle0+i+1)
	}
	return cs
}

// assertClosed reads c to its end: the server closed it. The deadline is
// only a bound.
func assertClosed(t *testing.T, c net.Conn, what string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	if err == nil || (errors.As(err, &ne) && ne.Timeout()) {
		t.Fatalf("%s is still open (read: %v)", what, err)
	}
}

// assertServes sends one more request on c and reads its 200.
func assertServes(t *testing.T, c net.Conn, what string) {
	t.Helper()
	if _, err := io.WriteString(c, healthz); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if resp, err := readStatus(t, c, 10*time.Second); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %v %v", what, resp, err)
	}
}

// clientFrom is an HTTP client whose connections come from ip, bounded by
// timeout.
func clientFrom(ip string, timeout time.Duration) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	return &http.Client{Timeout: timeout, Transport: &http.Transport{DialContext: d.DialContext}}
}

// secondPeer is a dialer from 127.0.0.2, or skips the test where that
// address cannot be bound (it is loopback on Linux, not on macOS).
func secondPeer(t *testing.T, addr string) *net.Dialer {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Skipf("no second loopback address: %v", err)
	}
	c.Close()
	return d
}

// Keep-alive connections that sit idle do not lock anyone out: with the
// cap held by idle connections that each made one request, a new client
// is answered at once and the connection idle longest is the one closed.
// Before, the newcomer waited in the accept queue for idleTimeout (120 s
// by default, renewed by every request on the held connections).
func TestIdleConnectionsMakeRoom(t *testing.T) {
	l := shortLimits()
	l.MaxConnections = 4
	l.IdleTimeout = config.Duration{Duration: time.Minute}
	for _, tc := range []struct {
		name string
		cfg  config.Config
		req  string
		want int
	}{
		{"answered", config.Config{Limits: l}, healthz, http.StatusOK},
		{"refused 401", config.Config{Limits: l, APIKeys: []string{testAPIKey}}, "GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n", http.StatusUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := startHarness(t, tc.cfg)
			held := idleConnsAfter(t, h, &net.Dialer{}, l.MaxConnections, tc.req, tc.want)

			client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{}} // the bound: served at once, not after the 120 s idle timeout (5 s leaves room for a loaded CI machine)
			t.Cleanup(client.CloseIdleConnections)
			resp, err := client.Get(h.url + "/healthz")
			if err != nil {
				t.Fatalf("a new client behind %d idle keep-alive connections: %v", l.MaxConnections, err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("/healthz: %s", resp.Status)
			}
			assertClosed(t, held[0], "the connection idle longest")
			for i, c := range held[1:] {
				assertServes(t, c, fmt.Sprintf("idle connection %d", i+1))
			}
		})
	}
}

// Connections beyond maxConnections wait while none is idle: here all are
// still sending their headers.
func TestConnectionCap(t *testing.T) {
	l := shortLimits()
	l.MaxConnections = 4
	l.ReadHeaderTimeout = config.Duration{Duration: time.Minute}
	h := startHarness(t, config.Config{Limits: l})
	var held []net.Conn
	for i := 0; i < l.MaxConnections; i++ {
		held = append(held, stall(t, h.srv.Addr, "GET /healthz HTTP/1.1\r\nHost: x\r\n"))
	}
	extra := stall(t, h.srv.Addr, healthz)
	if resp, err := readStatus(t, extra, 500*time.Millisecond); err == nil {
		t.Fatalf("connection %d was served past maxConnections %d: %s", l.MaxConnections+1, l.MaxConnections, resp.Status)
	}
	held[0].Close()
	if resp, err := readStatus(t, extra, 10*time.Second); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("waiting connection not served once a slot freed: %v %v", resp, err)
	}
}

// One peer holds at most maxConnectionsPerPeer connections: past it its own
// longest-idle one is closed, or with none idle the new one is refused,
// while another peer is served. Loopback is exempt unless limitLoopback.
func TestConnectionsPerPeer(t *testing.T) {
	limits := func(limitLoopback bool) config.Limits {
		l := shortLimits()
		l.MaxConnections = 8
		l.MaxConnectionsPerPeer = 2
		l.ReadHeaderTimeout = config.Duration{Duration: time.Minute} // the busy ones stay busy
		l.IdleTimeout = config.Duration{Duration: time.Minute}
		l.LimitLoopback = limitLoopback
		return l
	}
	busy := func(t *testing.T, h *harness, n int) {
		for i := 0; i < n; i++ {
			stall(t, h.srv.Addr, "GET /healthz HTTP/1.1\r\nHost: x\r\n")
		}
	}
	t.Run("loopback exempt by default", func(t *testing.T) {
		h := startHarness(t, config.Config{Limits: limits(false)})
		busy(t, h, 3)
		resp, err := clientFrom("127.0.0.1", 10*time.Second).Get(h.url + "/healthz")
		if err != nil {
			t.Fatalf("a fourth loopback connection past maxConnectionsPerPeer 2: %v", err)
		}
		resp.Body.Close()
	})
	t.Run("limitLoopback", func(t *testing.T) {
		h := startHarness(t, config.Config{Limits: limits(true)})
		other := secondPeer(t, h.srv.Addr)
		busy(t, h, 2)
		c, err := net.Dial("tcp", h.srv.Addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		_, _ = io.WriteString(c, healthz) // may already fail: the server closed it
		assertClosed(t, c, "a third connection of a peer with two busy ones")

		client := clientFrom("127.0.0.2", 10*time.Second)
		resp, err := client.Get(h.url + "/healthz")
		if err != nil {
			t.Fatalf("another peer: %v", err)
		}
		resp.Body.Close()
		client.CloseIdleConnections()
		waitCounts(t, h.srv.ln.(*connLimiter), 2, 0) // the two busy ones

		idle := idleConns(t, h, other, 2)
		fresh, err := other.Dial("tcp", h.srv.Addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { fresh.Close() })
		assertServes(t, fresh, "a third connection of a peer with idle ones")
		assertClosed(t, idle[0], "the peer's connection idle longest")
		assertServes(t, idle[1], "the peer's other idle connection")
	})
}

// slowUpload opens a request with a Content-Length of n that sends head, a
// few body bytes and then nothing, and reads its answer in the background:
// one arrives only if the request is refused (the test closes the rest).
func slowUpload(t *testing.T, addr, head string, n int, answers chan<- *http.Response) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := fmt.Fprintf(c, "%sContent-Length: %d\r\n\r\n{\"a\":\"", head, n); err != nil {
		t.Fatal(err)
	}
	go func() {
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return // closed by the test
		}
		resp.Body.Close()
		answers <- resp
	}()
}

// One claimed credential, or one peer, holds at most its share of the
// in-flight body budget: slow uploads under one access key id with a bad
// signature, one API key, or from one peer without a credential are
// refused once they hold maxInflightBodyBytesPerCredential or …PerPeer, in
// the door's throttling shape, while a request of another
// credential or peer is served. Before, they held the whole budget and
// every other request on every door was answered 503.
func TestBodyBudgetFairShare(t *testing.T) {
	const (
		budget  = 4 << 20
		share   = budget / 4
		upload  = 1 << 19 // above net/http's 256 KiB post-handler drain, so a refusal is answered at once
		uploads = 10      // more than the whole budget, which 8 fill to the byte
		held    = share / upload
	)
	l := shortLimits()
	l.MaxInflightBodyBytes = budget
	l.MaxInflightBodyBytesPerCredential, l.MaxInflightBodyBytesPerPeer = share, share
	l.BodyReadTimeout = config.Duration{Duration: time.Minute} // the test closes the uploads
	const (
		victim = "AKIDVICTIM"
		good   = "AKIDGOOD"
	)
	forged := func(addr string) string {
		now := time.Now().UTC()
		return fmt.Sprintf("POST / HTTP/1.1\r\nHost: %s\r\nContent-Type: application/x-amz-json-1.1\r\nX-Amz-Target: SageMaker.ListEndpoints\r\n"+
			"X-Amz-Date: %s\r\nAuthorization: AWS4-HMAC-SHA256 Credential=%s/%s/us-east-1/sagemaker/aws4_request, "+
			"SignedHeaders=host;x-amz-date;x-amz-target, Signature=%s\r\n",
			addr, now.Format("20060102T150405Z"), victim, now.Format("20060102"), strings.Repeat("0", 64))
	}
	chat := func(auth string) string {
		if auth != "" {
			auth = "Authorization: Bearer " + auth + "\r\n"
		}
		return "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" + auth
	}
	// served checks that a small chat request reaches the OpenAI API: no
	// model is deployed, so the API's own answer is 404 model_not_found.
	served := func(t *testing.T, c *http.Client, url, key string) {
		t.Helper()
		req, _ := http.NewRequest("POST", url+"/v1/chat/completions", strings.NewReader(`{"model":"none","messages":[{"role":"user","content":"hi"}]}`))
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound || !isOpenAIError(t, resp, "model_not_found") {
			t.Fatalf("another client's request was not served: %s", resp.Status)
		}
	}
	tests := []struct {
		name     string
		cfg      config.Config
		head     func(addr string) string
		refusal  func(*http.Response) bool
		other    func(t *testing.T, h *harness)
		twoPeers bool
	}{
		{"claimed access key id, bad signature",
			config.Config{Credentials: []config.Credential{{AccessKeyID: good, SecretAccessKey: testSecret}, {AccessKeyID: victim, SecretAccessKey: testSecret + "v"}}},
			forged,
			func(r *http.Response) bool {
				return r.StatusCode == http.StatusBadRequest && r.Header.Get("X-Amzn-ErrorType") == "ThrottlingException" && r.Header.Get("Retry-After") != ""
			},
			func(t *testing.T, h *harness) {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				if _, err := h.sm.ListEndpoints(ctx, &sm.ListEndpointsInput{}); err != nil { // signed by AKIDGOOD
					t.Fatalf("a signed request of another access key: %v", err)
				}
			}, false},
		{"api key",
			config.Config{APIKeys: []string{testAPIKey, testAPIKey + "-b"}},
			func(string) string { return chat(testAPIKey) },
			func(r *http.Response) bool {
				return r.StatusCode == http.StatusTooManyRequests && r.Header.Get("Retry-After") != ""
			},
			func(t *testing.T, h *harness) {
				served(t, clientFrom("127.0.0.1", 10*time.Second), h.url, testAPIKey+"-b")
			}, false},
		{"one peer without a credential",
			config.Config{Limits: config.Limits{LimitLoopback: true}},
			func(string) string { return chat("") },
			func(r *http.Response) bool {
				return r.StatusCode == http.StatusTooManyRequests && r.Header.Get("Retry-After") != ""
			},
			func(t *testing.T, h *harness) { served(t, clientFrom("127.0.0.2", 10*time.Second), h.url, "") }, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			ll := l
			ll.LimitLoopback = cfg.Limits.LimitLoopback
			cfg.Limits = ll
			h := startHarness(t, cfg)
			if tc.twoPeers {
				secondPeer(t, h.srv.Addr)
			}
			answers := make(chan *http.Response, uploads)
			for i := 0; i < uploads; i++ {
				slowUpload(t, h.srv.Addr, tc.head(h.srv.Addr), upload, answers)
			}
			// Every upload past the share is refused; the rest trickle on.
			bound := time.After(10 * time.Second)
			for refused := 0; refused < uploads-held; refused++ {
				select {
				case resp := <-answers:
					if !tc.refusal(resp) {
						t.Fatalf("upload refused with %s %v, want the door's throttling answer", resp.Status, resp.Header)
					}
				case <-bound:
					t.Fatalf("%d of %d slow uploads of %d bytes refused, want %d: they hold more than their share of %d bytes",
						refused, uploads, upload, uploads-held, share)
				}
			}
			tc.other(t, h)
		})
	}
}

// The body budget's accounting: a request takes its bytes from the whole
// budget, its credential's share and its peer's share, all or nothing, and
// the refusal names the setting that refused it.
func TestBudgetShares(t *testing.T) {
	l := config.Limits{MaxInflightBodyBytes: 100, MaxInflightBodyBytesPerCredential: 40, MaxInflightBodyBytesPerPeer: 60}
	a, b := share{cred: "akid:A", peer: "ip:192.0.2.1"}, share{cred: "akid:B", peer: "ip:192.0.2.1"}
	c, anon, local := share{cred: "akid:C", peer: "ip:192.0.2.2"}, share{peer: "ip:192.0.2.3"}, share{}
	type step struct {
		sh   share
		n    int64
		want string // "" = taken
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"a credential's share", []step{{a, 40, ""}, {a, 1, "maxInflightBodyBytesPerCredential"}, {b, 20, ""}}},
		{"a peer's share", []step{{a, 40, ""}, {b, 21, "maxInflightBodyBytesPerPeer"}, {b, 20, ""}, {c, 40, ""}}},
		{"the whole budget", []step{{a, 40, ""}, {c, 40, ""}, {anon, 21, "maxInflightBodyBytes"}, {anon, 20, ""}, {local, 1, "maxInflightBodyBytes"}}},
		{"no share for an exempt peer without a credential", []step{{local, 100, ""}, {a, 1, "maxInflightBodyBytes"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			bg := newBudget(l)
			var taken []step
			for i, s := range tc.steps {
				if got := bg.take(s.sh, s.n); got != s.want {
					t.Fatalf("step %d (%+v): %q, want %q", i, s, got, s.want)
				} else if got == "" {
					taken = append(taken, s)
				}
			}
			for _, s := range taken {
				bg.give(s.sh, s.n)
			}
			if bg.used != 0 || len(bg.held) != 0 {
				t.Fatalf("after giving all back: used %d, held %v", bg.used, bg.held)
			}
		})
	}
	if limit, field := newBudget(l).capFor(a); limit != 40 || field != "maxInflightBodyBytesPerCredential" {
		t.Fatalf("capFor: %d %s", limit, field)
	}
}

// With limitLoopback a loopback caller without a credential is counted
// against its address like any other.
func TestRateLimitLimitLoopback(t *testing.T) {
	cfg := config.Config{}
	cfg.Limits.RateLimit = config.RateLimit{RequestsPerSecond: 0.001, Burst: 2}
	cfg.Limits.LimitLoopback = true
	rl := newRateLimiter(cfg, clock.NewFake(time.Unix(0, 0)))
	h := rl.middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	for i, want := range []int{200, 200, 429} {
		r := httptest.NewRequest("GET", "/v1/models", nil)
		r.RemoteAddr = "127.0.0.1:4000"
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != want {
			t.Fatalf("loopback request %d: %d, want %d", i, w.Code, want)
		}
	}
}

// A hijacked connection keeps its slot until its new owner closes it, and
// closing the listener releases an Accept that waits for room.
func TestConnLimiterSlots(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cl := newConnLimiter(ln, config.Limits{MaxConnections: 1, MaxConnectionsPerPeer: 1})
	defer cl.Close()
	for i := 0; i < 2; i++ {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	first, err := cl.Accept()
	if err != nil {
		t.Fatal(err)
	}
	cl.connState(first, http.StateActive)
	cl.connState(first, http.StateHijacked)
	if open, idle := cl.counts(); open != 1 || idle != 0 {
		t.Fatalf("hijacked: %d open, %d idle", open, idle)
	}
	accepted := make(chan error, 1)
	go func() {
		c, err := cl.Accept()
		if err == nil {
			c.Close()
		}
		accepted <- err
	}()
	first.Close() // the hijacker is done: the waiting connection gets the slot
	select {
	case err := <-accepted:
		if err != nil {
			t.Fatalf("accept after the hijacked connection closed: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the slot of a closed hijacked connection was not given back")
	}

	held, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	c, err := cl.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	waiter, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer waiter.Close()
	go func() {
		_, err := cl.Accept()
		accepted <- err
	}()
	cl.Close()
	select {
	case err := <-accepted:
		if err == nil {
			t.Fatal("Accept admitted a connection past the cap")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("closing the listener did not release a waiting Accept")
	}
}
