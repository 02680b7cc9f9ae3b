package gateway

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/internal/clock"
)

// countingServer is an httptest server that counts the connections it accepted.
func countingServer(t *testing.T, h http.HandlerFunc) (addr string, conns *atomic.Int64, srv *httptest.Server) {
	t.Helper()
	conns = &atomic.Int64{}
	srv = httptest.NewUnstartedServer(h)
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://"), conns, srv
}

func TestUpstream(t *testing.T) {
	echo := func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Seen", r.Header.Get("X-Test")+"|"+r.Header.Get("Connection")+"|"+r.Host)
		switch r.URL.Path {
		case "/close":
			w.Header().Set("Connection", "close")
		case "/stream":
			for i := 0; i < 3; i++ {
				_, _ = io.WriteString(w, "data: x\n\n")
				w.(http.Flusher).Flush()
			}
			return
		case "/empty":
			w.WriteHeader(http.StatusNoContent)
			return
		}
		_, _ = w.Write(body)
	}
	tests := []struct {
		name      string
		paths     []string // requests in sequence, each read to the end
		wantBody  string   // of the last one
		wantConns int64
	}{
		{name: "keep-alive reuses one connection", paths: []string{"/a", "/b", "/c"}, wantBody: "hello", wantConns: 1},
		{name: "chunked stream then reuse", paths: []string{"/stream", "/a"}, wantBody: "hello", wantConns: 1},
		{name: "empty body then reuse", paths: []string{"/empty", "/a"}, wantBody: "hello", wantConns: 1},
		{name: "Connection: close is honoured", paths: []string{"/close", "/a"}, wantBody: "hello", wantConns: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addr, conns, _ := countingServer(t, echo)
			u := newUpstream(clock.Real{})
			var last string
			for _, p := range tt.paths {
				hdr := http.Header{"X-Test": {"v"}, "Connection": {"upgrade"}, "Content-Length": {"999"}}
				resp, err := u.do(context.Background(), addr, "", p, hdr, []byte("hello"))
				if err != nil {
					t.Fatalf("%s: %v", p, err)
				}
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil {
					t.Fatalf("%s: read: %v", p, err)
				}
				if seen := resp.Header.Get("X-Seen"); seen != "v||"+addr {
					t.Fatalf("%s: server saw headers %q (hop-by-hop must not be forwarded)", p, seen)
				}
				last = string(b)
			}
			if last != tt.wantBody {
				t.Fatalf("body %q, want %q", last, tt.wantBody)
			}
			if n := conns.Load(); n != tt.wantConns {
				t.Fatalf("server accepted %d connections, want %d", n, tt.wantConns)
			}
		})
	}
}

func TestUpstreamHalfReadBodyIsNotReused(t *testing.T) {
	addr, conns, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(strings.Repeat("x", 100<<10)))
	})
	u := newUpstream(clock.Real{})
	for range 2 {
		resp, err := u.do(context.Background(), addr, "", "/", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 10)
		_, _ = resp.Body.Read(buf)
		resp.Body.Close()
	}
	if n := conns.Load(); n != 2 {
		t.Fatalf("%d connections, want 2 (a half-read response must not be reused)", n)
	}
}

// A replica that closed an idle keep-alive connection: the next request on
// it fails before anything is processed and is retried on a fresh one.
func TestUpstreamRetriesConnectionClosedWhileIdle(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var accepted atomic.Int64
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			n := accepted.Add(1)
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				req, err := http.ReadRequest(br)
				if err != nil {
					return
				}
				_, _ = io.Copy(io.Discard, req.Body)
				_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
				if n == 1 {
					return // close the connection as soon as the first answer is out
				}
				time.Sleep(50 * time.Millisecond)
			}()
		}
	}()
	u := newUpstream(clock.Real{})
	for i := range 2 {
		resp, err := u.do(context.Background(), l.Addr().String(), "", "/", nil, []byte("x"))
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != "ok" {
			t.Fatalf("request %d: body %q", i, b)
		}
		if i == 0 {
			// Let the server's close reach us before the idle connection is reused.
			time.Sleep(20 * time.Millisecond)
		}
	}
	if n := accepted.Load(); n != 2 {
		t.Fatalf("%d connections accepted, want 2", n)
	}
}

func TestUpstreamCancelUnblocksAndDiscardsConnection(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	addr, conns, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			entered <- struct{}{}
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
		_, _ = io.WriteString(w, "ok")
	})
	defer close(release)
	u := newUpstream(clock.Real{})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := u.do(ctx, addr, "", "/slow", nil, nil)
		errc <- err
	}()
	<-entered
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	resp, err := u.do(context.Background(), addr, "", "/", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if n := conns.Load(); n != 2 {
		t.Fatalf("%d connections, want 2 (the cancelled one is not reused)", n)
	}
}

func TestUpstreamClosesIdleConnectionsOfRemovedBackends(t *testing.T) {
	addr, _, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") })
	u := newUpstream(clock.Real{})
	resp, err := u.do(context.Background(), addr, "", "/", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	u.closeIdleExcept(map[string]bool{addr: true})
	if len(u.idle[addr]) != 1 {
		t.Fatalf("kept backend lost its idle connection")
	}
	u.closeIdleExcept(map[string]bool{})
	if len(u.idle) != 0 {
		t.Fatalf("idle connections of a removed backend remain: %v", u.idle)
	}
}

// A body read cut short because the request's context ended reports the
// cancellation (the client went away), not the deadline used to unblock it.
func TestUpstreamCancelMidBodySaysCancelled(t *testing.T) {
	release := make(chan struct{})
	addr, _, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "first chunk")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	defer close(release)
	u := newUpstream(clock.Real{})
	ctx, cancel := context.WithCancel(context.Background())
	resp, err := u.do(ctx, addr, "", "/", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	buf := make([]byte, len("first chunk"))
	if _, err := io.ReadFull(resp.Body, buf); err != nil {
		t.Fatal(err)
	}
	cancel()
	if _, err := io.ReadAll(resp.Body); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

// A replica that refuses a body over its limit answers before reading it
// all and closes the connection; the write then fails, and the answer (not
// a connection error) is what the caller gets, the connection not reused.
func TestUpstreamReturnsAnswerSentBeforeTheBodyWasRead(t *testing.T) {
	const limit = 1 << 20
	addr, conns, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(io.LimitReader(r.Body, limit+1))
		if len(b) > limit {
			http.Error(w, "request body exceeds the limit", http.StatusBadRequest)
			return
		}
		_, _ = io.WriteString(w, "ok")
	})
	u := newUpstream(clock.Real{})
	resp, err := u.do(context.Background(), addr, "", "/", nil, make([]byte, 32<<20))
	if err != nil {
		t.Fatalf("err = %v, want the replica's 400", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "request body exceeds the limit") {
		t.Fatalf("%d %q", resp.StatusCode, b)
	}
	resp, err = u.do(context.Background(), addr, "", "/", nil, []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "ok" {
		t.Fatalf("second request: %q", b)
	}
	if n := conns.Load(); n != 2 {
		t.Fatalf("%d connections, want 2 (the refused request's connection is not reused)", n)
	}
}

// TestUpstreamRetryAfterClosedIdleDialsAfresh: a replica that closes idle
// connections (llama-server does after 5 s) has closed every pooled one, so
// the retry after the first dead connection dials a new one instead of
// taking the next dead one from the pool.
func TestUpstreamRetryAfterClosedIdleDialsAfresh(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	const pooled = 3
	closed := make(chan struct{}, pooled)
	go func() {
		for n := 1; ; n++ {
			c, err := l.Accept()
			if err != nil {
				return
			}
			if n <= pooled {
				c.Close() // an idle connection the replica closed
				closed <- struct{}{}
				continue
			}
			go func() {
				defer c.Close()
				req, err := http.ReadRequest(bufio.NewReader(c))
				if err != nil {
					return
				}
				_, _ = io.Copy(io.Discard, req.Body)
				_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
			}()
		}
	}()
	u := newUpstream(clock.Real{})
	addr := l.Addr().String()
	for range pooled {
		pc, err := u.dial(context.Background(), addr)
		if err != nil {
			t.Fatal(err)
		}
		u.put(pc)
	}
	for range pooled {
		<-closed
	}
	resp, err := u.do(context.Background(), addr, "", "/", nil, []byte("x"))
	if err != nil {
		t.Fatalf("with %d dead pooled connections: %v", pooled, err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "ok" {
		t.Fatalf("body %q", b)
	}
}

// TestUpstreamSendsReplicaKeyNotClientCredentials: the engine sees the
// replica's own key as its bearer token, never the client's Authorization
// or Cookie; without a key it sees no Authorization at all.
func TestUpstreamSendsReplicaKeyNotClientCredentials(t *testing.T) {
	addr, _, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Auth", r.Header.Get("Authorization"))
		w.Header().Set("X-Cookie", r.Header.Get("Cookie"))
		w.Header().Set("X-Kept", r.Header.Get("X-Request-Id"))
	})
	u := newUpstream(clock.Real{})
	client := http.Header{"Authorization": {"Bearer the-users-openai-key"}, "Cookie": {"capstan_space_token=v1.x"}, "X-Request-Id": {"r1"}}
	for _, tc := range []struct{ key, wantAuth string }{{"replica-key", "Bearer replica-key"}, {"", ""}} {
		resp, err := u.do(context.Background(), addr, tc.key, "/", client, []byte("x"))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if got := resp.Header.Get("X-Auth"); got != tc.wantAuth {
			t.Errorf("key %q: engine saw Authorization %q, want %q", tc.key, got, tc.wantAuth)
		}
		if got := resp.Header.Get("X-Cookie"); got != "" {
			t.Errorf("engine saw the client's cookie %q", got)
		}
		if got := resp.Header.Get("X-Kept"); got != "r1" {
			t.Errorf("engine saw X-Request-Id %q, want the client's r1", got)
		}
	}
}
