package gateway

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/capstan-dev/capstan/internal/clock"
)

// upstream is the data path's HTTP/1.1 client to replicas. net/http's
// Transport runs two goroutines per connection and hands every request and
// response between them and the caller over channels; at thousands of small
// requests per second on two cores those hand-offs and their wake-ups were
// most of the gateway's cost (docs/performance.md). Here the calling
// goroutine writes the request and reads the response on a pooled
// connection itself: no goroutine, no channel, no http.Request.
//
// Scope: POST with a known-length body to plain-HTTP replicas on a trusted
// network. A reused connection that the replica had closed while idle is
// retried once on a fresh one, as net/http does for a request it knows
// was not processed.
type upstream struct {
	clk     clock.Clock
	dialer  *net.Dialer
	maxIdle int           // per address
	idleFor time.Duration // idle connections older than this are closed, not reused

	mu   sync.Mutex
	idle map[string][]*upConn // by address, most recently used last
}

type upConn struct {
	nc       net.Conn
	br       *bufio.Reader
	bw       *bufio.Writer
	addr     string
	lastUsed time.Time
}

func newUpstream(clk clock.Clock) *upstream {
	return &upstream{clk: clk, dialer: &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second},
		maxIdle: 256, idleFor: 60 * time.Second, idle: map[string][]*upConn{}}
}

// aLongTimeAgo is a deadline that unblocks a connection's reads and writes.
var aLongTimeAgo = time.Unix(1, 0)

func (u *upstream) get(addr string) *upConn {
	now := u.clk.Now()
	u.mu.Lock()
	defer u.mu.Unlock()
	cs := u.idle[addr]
	for len(cs) > 0 {
		pc := cs[len(cs)-1]
		cs[len(cs)-1] = nil
		cs = cs[:len(cs)-1]
		if now.Sub(pc.lastUsed) < u.idleFor {
			u.idle[addr] = cs
			return pc
		}
		// The newest is too old, so all are: drop them.
		pc.nc.Close()
		for _, old := range cs {
			old.nc.Close()
		}
		cs = nil
	}
	delete(u.idle, addr)
	return nil
}

func (u *upstream) put(pc *upConn) {
	pc.lastUsed = u.clk.Now()
	u.mu.Lock()
	cs := u.idle[pc.addr]
	if len(cs) >= u.maxIdle {
		u.mu.Unlock()
		pc.nc.Close()
		return
	}
	u.idle[pc.addr] = append(cs, pc)
	u.mu.Unlock()
}

// closeIdleExcept closes idle connections to addresses not in keep (replicas
// that left every route).
func (u *upstream) closeIdleExcept(keep map[string]bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for addr, cs := range u.idle {
		if keep[addr] {
			continue
		}
		for _, pc := range cs {
			pc.nc.Close()
		}
		delete(u.idle, addr)
	}
}

func (u *upstream) dial(ctx context.Context, addr string) (*upConn, error) {
	nc, err := u.dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return &upConn{nc: nc, br: bufio.NewReaderSize(nc, 16<<10), bw: bufio.NewWriterSize(nc, 4<<10), addr: addr}, nil
}

// skipRequestHeaders are never forwarded: hop-by-hop (RFC 9110 §7.6.1),
// and the ones this client writes itself.
var skipRequestHeaders = map[string]bool{"Connection": true, "Keep-Alive": true, "Proxy-Connection": true, "Te": true,
	"Trailer": true, "Transfer-Encoding": true, "Upgrade": true, "Content-Length": true, "Host": true}

// do POSTs body to http://addr/path. The response body must be closed; a
// body read to EOF returns its connection to the pool.
func (u *upstream) do(ctx context.Context, addr, apiKey, path string, hdr http.Header, body []byte) (*http.Response, error) {
	for try := 0; ; try++ {
		// The retry after a closed idle connection dials afresh: a replica
		// that closes idle connections (llama-server after 5 s) has
		// usually closed every other pooled one too.
		var pc *upConn
		if try == 0 {
			pc = u.get(addr)
		}
		reused := pc != nil
		if !reused {
			var err error
			if pc, err = u.dial(ctx, addr); err != nil {
				return nil, err
			}
		}
		resp, err := u.roundTrip(ctx, pc, apiKey, path, hdr, body)
		if err == nil {
			return resp, nil
		}
		pc.nc.Close()
		if reused && try == 0 && ctx.Err() == nil && closedIdle(err) {
			continue // the replica closed this idle connection; nothing was processed
		}
		return nil, err
	}
}

// closedIdle: the error a reused connection gives when its peer had closed
// it before our request arrived.
func closedIdle(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

func (u *upstream) roundTrip(ctx context.Context, pc *upConn, apiKey, path string, hdr http.Header, body []byte) (*http.Response, error) {
	stop := func() bool { return true }
	if ctx.Done() != nil {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		// Cancellation (the client went away) unblocks our reads and writes;
		// the connection is then closed, never reused.
		stop = context.AfterFunc(ctx, func() { _ = pc.nc.SetDeadline(aLongTimeAgo) })
	}
	if err := writeRequest(pc.bw, pc.addr, apiKey, path, hdr, body); err != nil {
		if ctx.Err() == nil {
			if resp := readEarlyResponse(pc); resp != nil {
				// The replica answered before it had read the whole body
				// (one over its size limit) and closed the connection: that
				// answer is the request's, not a connection failure.
				resp.Body = &upBody{rc: resp.Body, pc: pc, u: u, stop: stop, ctx: ctx}
				return resp, nil
			}
		}
		stop()
		return nil, ctxErr(ctx, fmt.Errorf("write request: %w", err))
	}
	resp, err := http.ReadResponse(pc.br, nil)
	if err != nil {
		stop()
		return nil, ctxErr(ctx, fmt.Errorf("read response: %w", err))
	}
	ub := &upBody{rc: resp.Body, pc: pc, u: u, stop: stop, ctx: ctx, reuse: !resp.Close}
	if resp.Body == http.NoBody || resp.ContentLength == 0 {
		ub.eof = true
	}
	resp.Body = ub
	return resp, nil
}

// earlyResponseWait bounds the read of an answer (head and body) a replica
// sent before it stopped reading the request: that answer, a short error,
// is already on its way or in the socket's buffer when the write fails, so
// this only guards a peer that neither answers nor closes.
const earlyResponseWait = 2 * time.Second

// readEarlyResponse reads the response a replica wrote before closing a
// connection whose request body it did not read to the end: net/http's
// server does so for a handler that refuses an oversized body, and RFC 9112
// §9.5 asks a client to watch for such an answer while it sends a body.
// nil when there is none: the write failed because the connection was lost.
func readEarlyResponse(pc *upConn) *http.Response {
	// A socket deadline is the kernel's wall time, not the gateway's clock:
	// a dev clock's jump must not expire it.
	_ = pc.nc.SetReadDeadline(time.Now().Add(earlyResponseWait))
	resp, err := http.ReadResponse(pc.br, nil)
	if err != nil || resp.StatusCode < 200 {
		return nil
	}
	return resp
}

// ctxErr prefers the context's error: a read that failed because the
// request was cancelled should say so.
func ctxErr(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("%w (%w)", cerr, err)
	}
	return err
}

func writeRequest(w *bufio.Writer, addr, apiKey, path string, hdr http.Header, body []byte) error {
	w.WriteString("POST ")
	w.WriteString(path)
	w.WriteString(" HTTP/1.1\r\nHost: ")
	w.WriteString(addr)
	w.WriteString("\r\n")
	if apiKey != "" && validHeader(apiKey) {
		w.WriteString("Authorization: Bearer ")
		w.WriteString(apiKey)
		w.WriteString("\r\n")
	}
	for k, vs := range hdr {
		if skipRequestHeaders[k] || clientCredentials[k] || !validHeader(k) {
			continue
		}
		for _, v := range vs {
			if !validHeader(v) {
				continue
			}
			w.WriteString(k)
			w.WriteString(": ")
			w.WriteString(v)
			w.WriteString("\r\n")
		}
	}
	w.WriteString("Content-Length: ")
	w.Write(strconv.AppendInt(w.AvailableBuffer(), int64(len(body)), 10))
	w.WriteString("\r\n\r\n")
	w.Write(body)
	return w.Flush()
}

// validHeader rejects what could split a request (net/http's server already
// refuses such headers; this guards other callers of Invoke).
func validHeader(s string) bool { return !strings.ContainsAny(s, "\r\n") }

// upBody returns its connection to the pool when the response was read to
// the end, and closes it otherwise (a half-read stream cannot be reused).
type upBody struct {
	rc    io.ReadCloser
	pc    *upConn
	u     *upstream
	stop  func() bool
	ctx   context.Context // the request's: a read cut short by its end says so
	eof   bool
	reuse bool
	done  bool
}

func (b *upBody) Read(p []byte) (int, error) {
	if b.done {
		return 0, errors.New("read on a closed response body")
	}
	n, err := b.rc.Read(p)
	switch {
	case err == io.EOF:
		b.eof = true
	case err != nil:
		// Cancellation unblocks the read with a past deadline; report the
		// cancellation (a client that went away), not an i/o timeout.
		err = ctxErr(b.ctx, err)
	}
	return n, err
}

func (b *upBody) Close() error {
	if b.done {
		return nil
	}
	b.done = true
	if b.stop() && b.eof && b.reuse {
		b.u.put(b.pc)
		return nil
	}
	return b.pc.nc.Close()
}
