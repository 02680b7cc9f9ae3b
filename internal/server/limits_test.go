package server

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/config"
)

// shortLimits are the defaults with timeouts short enough for a test.
func shortLimits() config.Limits {
	var c config.Config
	c.Limits = config.Limits{ReadHeaderTimeout: config.Duration{Duration: 300 * time.Millisecond},
		BodyReadTimeout: config.Duration{Duration: 300 * time.Millisecond},
		WriteTimeout:    config.Duration{Duration: 300 * time.Millisecond}}
	c.Default()
	return c.Limits
}

// stall opens a connection that sends head and then nothing more.
func stall(t *testing.T, addr, head string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, head); err != nil {
		t.Fatal(err)
	}
	return c
}

// stalledPost is a request whose body stops after 10 of 1000 bytes.
func stalledPost(path string) string {
	return fmt.Sprintf("POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"model\":", path)
}

// A client that stops sending its body is cut after bodyReadTimeout, on
// every door (before, such connections stayed open for good).
func TestStalledBodyIsCut(t *testing.T) {
	h := startHarness(t, config.Config{Limits: shortLimits()})
	for _, path := range []string{"/v1/chat/completions", "/", "/endpoints/ep/invocations",
		"/apis/inference.sagemaker.aws.amazon.com/v1/namespaces/default/inferenceendpointconfigs"} {
		t.Run(path, func(t *testing.T) {
			c := stall(t, h.srv.Addr, stalledPost(path))
			_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
			_, err := io.ReadAll(c) // whatever the API answers, the connection must end
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatal("the server still holds a connection whose body stalled 5s ago")
			}
		})
	}
}

// An idle keep-alive connection is closed after idleTimeout.
func TestIdleConnectionClosed(t *testing.T) {
	l := shortLimits()
	l.IdleTimeout = config.Duration{Duration: 300 * time.Millisecond}
	h := startHarness(t, config.Config{Limits: l})
	c := stall(t, h.srv.Addr, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("healthz: %v %v", resp, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("idle connection still open after 5s (read: %v)", err)
	}
}

// /healthz answers while more clients than maxConnections stall: in their
// headers or their bodies, they are cut and the slots come back.
func TestHealthzAnswersWhileClientsStall(t *testing.T) {
	l := shortLimits()
	l.MaxConnections = 8
	h := startHarness(t, config.Config{Limits: l})
	for i := 0; i < 3*l.MaxConnections; i++ {
		if i%2 == 0 {
			stall(t, h.srv.Addr, "GET /healthz HTTP/1.1\r\nHost: x\r\n")
		} else {
			stall(t, h.srv.Addr, stalledPost("/v1/completions"))
		}
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Get(h.url + "/healthz")
	if err != nil {
		t.Fatalf("/healthz behind %d stalled clients: %v", 3*l.MaxConnections, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/healthz: %s", resp.Status)
	}
}

// Slow but steady traffic outlives every timeout: a body arriving a byte at
// a time, and a streamed response that keeps sending for longer than
// bodyReadTimeout and writeTimeout together.
func TestSlowSteadyTrafficSurvives(t *testing.T) {
	l := shortLimits()
	const chunks, gap = 12, 100 * time.Millisecond // 1.2s, 4× each timeout
	h := http.NewServeMux()
	h.HandleFunc("/upload", func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		fmt.Fprintf(w, "%d", len(b))
	})
	h.HandleFunc("/stream", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		rc := http.NewResponseController(w)
		for i := 0; i < chunks; i++ {
			if _, err := fmt.Fprintf(w, "data: %d\n\n", i); err != nil {
				return
			}
			if err := rc.Flush(); err != nil {
				return
			}
			select {
			case <-time.After(gap):
			case <-r.Context().Done():
				return
			}
		}
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, lim := newHTTPServer(ln, guard(h, config.Config{Limits: l}, clock.Real{}), l)
	go func() { _ = srv.Serve(lim) }()
	t.Cleanup(func() { srv.Close() })
	base := "http://" + ln.Addr().String()

	t.Run("slow body", func(t *testing.T) {
		pr, pw := io.Pipe()
		go func() {
			for i := 0; i < chunks; i++ {
				_, _ = pw.Write([]byte("x"))
				time.Sleep(gap)
			}
			pw.Close()
		}()
		resp, err := http.Post(base+"/upload", "text/plain", pr)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		got, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK || string(got) != fmt.Sprint(chunks) {
			t.Fatalf("slow body: %s %q", resp.Status, got)
		}
	})
	t.Run("long stream", func(t *testing.T) {
		resp, err := http.Post(base+"/stream", "application/json", strings.NewReader(`{"stream":true}`))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		got, err := io.ReadAll(resp.Body)
		if err != nil || strings.Count(string(got), "data: ") != chunks {
			t.Fatalf("stream cut short: %v %q", err, got)
		}
	})
}

// The body budget: a body larger than all of it is 413, one that does not
// fit next to the bodies in flight is 503 with Retry-After, each in the
// door's shape.
func TestBodyBudget(t *testing.T) {
	l := shortLimits()
	// The holder must stay for the whole test, on a loaded machine too: the
	// test closes it at the end, so a long timeout costs nothing.
	l.BodyReadTimeout = config.Duration{Duration: time.Minute}
	l.MaxInflightBodyBytes = 1 << 20
	h := startHarness(t, config.Config{Limits: l})
	post := func(path string, n int) *http.Response {
		t.Helper()
		resp, err := http.Post(h.url+path, "application/json", strings.NewReader(strings.Repeat(" ", n)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	if resp := post("/v1/completions", 2<<20); resp.StatusCode != http.StatusRequestEntityTooLarge || !isOpenAIError(t, resp, "request_too_large") {
		t.Fatalf("2 MiB body: %s", resp.Status)
	}
	// A stalled body of 900 KB holds the budget while it waits.
	stall(t, h.srv.Addr, strings.Replace(stalledPost("/v1/completions"), "Content-Length: 1000", "Content-Length: 900000", 1))
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp := post("/v1/completions", 200_000)
		if resp.StatusCode == http.StatusServiceUnavailable {
			if resp.Header.Get("Retry-After") == "" || !isOpenAIError(t, resp, "server_busy") {
				t.Fatalf("busy answer without Retry-After or OpenAI shape: %v", resp.Header)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("200 KB next to a held 900 KB of a 1 MiB budget: %s", resp.Status)
		}
		time.Sleep(20 * time.Millisecond) // until the stalled request is in its handler
	}
	resp := post("/", 200_000)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("X-Amzn-ErrorType") != "ServiceUnavailable" {
		t.Fatalf("AWS door busy answer: %s %v", resp.Status, resp.Header)
	}
}

func isOpenAIError(t *testing.T, resp *http.Response, code string) bool {
	t.Helper()
	var body struct {
		Error struct{ Message, Type, Code string } `json:"error"`
	}
	if err := decodeJSON(resp.Body, &body); err != nil {
		t.Fatalf("not JSON: %v", err)
	}
	return body.Error.Code == code && body.Error.Message != "" && body.Error.Type != ""
}
