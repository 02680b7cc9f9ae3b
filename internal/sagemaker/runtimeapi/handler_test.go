package runtimeapi

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"

	"github.com/capstan-dev/capstan/internal/gateway"
)

const (
	testAccount = "123456789012"
	testRegion  = "us-west-2"
)

// harness is the real gateway and handler in front of httptest engines.
type harness struct {
	gw  *gateway.Gateway
	srv *httptest.Server
}

func newHarness(t *testing.T, opts Options) *harness {
	t.Helper()
	gw := gateway.New(gateway.Options{Seed: 1})
	opts.AccountID, opts.Region = testAccount, testRegion
	srv := httptest.NewServer(NewHandler(gw, opts))
	t.Cleanup(srv.Close)
	return &harness{gw: gw, srv: srv}
}

func engine(t *testing.T, h http.HandlerFunc) string {
	t.Helper()
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return strings.TrimPrefix(s.URL, "http://")
}

func (h *harness) route(endpoint string, variants ...gateway.VariantRoute) {
	h.gw.SetRoute(gateway.Route{Endpoint: endpoint, Variants: variants})
}

func variant(name string, addrs ...string) gateway.VariantRoute {
	v := gateway.VariantRoute{Name: name, Weight: 1}
	for i, a := range addrs {
		v.Backends = append(v.Backends, gateway.Backend{ID: fmt.Sprintf("%s-%d", name, i), Addr: a})
	}
	return v
}

func (h *harness) post(t *testing.T, path string, hdr map[string]string, body []byte) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, h.srv.URL+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// echoEngine answers 200 with what it received, as JSON.
func echoEngine(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set(hdrCustomAttributes, "engine=sim")
	_ = json.NewEncoder(w).Encode(map[string]string{
		"path": r.URL.Path, "body": string(body), "content_type": r.Header.Get("Content-Type"),
		"accept": r.Header.Get("Accept"), "custom": r.Header.Get(hdrCustomAttributes),
		"inference_id": r.Header.Get(hdrInferenceID),
	})
}

func TestErrorsGolden(t *testing.T) {
	h := newHarness(t, Options{MaxBodyBytes: 1024})
	bad400 := engine(t, func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"error":"max_new_tokens must be positive"}`, http.StatusBadRequest)
	})
	bad500 := engine(t, func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "CUDA out of memory", http.StatusInternalServerError)
	})
	ok := engine(t, echoEngine)
	h.route("bad-client", variant("AllTraffic", bad400))
	h.route("bad-server", variant("primary", bad500))
	h.route("empty", gateway.VariantRoute{Name: "AllTraffic", Weight: 1})
	h.route("good", variant("AllTraffic", ok))
	h.gw.SetRoute(gateway.Route{Endpoint: "expired", Variants: []gateway.VariantRoute{variant("AllTraffic", ok)},
		Unavailable: gateway.UnavailableExpired})
	h.gw.SetRoute(gateway.Route{Endpoint: "cold", Activator: nopActivator{}, HoldTimeout: time.Millisecond,
		Variants: []gateway.VariantRoute{{Name: "AllTraffic", Weight: 1}}})

	tests := []struct {
		name   string
		path   string
		header map[string]string
		body   []byte
	}{
		{name: "unknown_endpoint", path: "/endpoints/nope/invocations"},
		{name: "unknown_endpoint_stream", path: "/endpoints/nope/invocations-response-stream"},
		{name: "bad_endpoint_name", path: "/endpoints/bad_name/invocations"},
		{name: "unknown_variant", path: "/endpoints/good/invocations", header: map[string]string{hdrTargetVariant: "Other"}},
		{name: "bad_target_variant", path: "/endpoints/good/invocations", header: map[string]string{hdrTargetVariant: "no_underscores"}},
		{name: "long_target_variant", path: "/endpoints/good/invocations", header: map[string]string{hdrTargetVariant: strings.Repeat("a", 64)}},
		{name: "bad_inference_id", path: "/endpoints/good/invocations", header: map[string]string{hdrInferenceID: "inf\u200bid"}},
		{name: "long_inference_id", path: "/endpoints/good/invocations", header: map[string]string{hdrInferenceID: strings.Repeat("i", 65)}},
		{name: "long_custom_attributes", path: "/endpoints/good/invocations", header: map[string]string{hdrCustomAttributes: strings.Repeat("x", 1025)}},
		{name: "non_ascii_custom_attributes", path: "/endpoints/good/invocations", header: map[string]string{hdrCustomAttributes: "caf\u00e9"}},
		{name: "body_too_large", path: "/endpoints/good/invocations", body: bytes.Repeat([]byte("x"), 1025)},
		{name: "model_client_error", path: "/endpoints/bad-client/invocations", body: []byte(`{"inputs":"hi"}`)},
		{name: "model_server_error", path: "/endpoints/bad-server/invocations", body: []byte(`{"inputs":"hi"}`)},
		{name: "model_server_error_stream", path: "/endpoints/bad-server/invocations-response-stream", body: []byte(`{"inputs":"hi"}`)},
		{name: "capacity_expired", path: "/endpoints/expired/invocations"},
		{name: "no_backend", path: "/endpoints/empty/invocations"},
		{name: "activation_timeout", path: "/endpoints/cold/invocations"},
		{name: "unknown_operation", path: "/endpoints/good/nothing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := h.post(t, tt.path, tt.header, tt.body)
			body, _ := io.ReadAll(resp.Body)
			if resp.Header.Get(hdrRequestID) == "" {
				t.Fatal("no x-amzn-RequestId")
			}
			if !json.Valid(body) {
				t.Fatalf("error body is not JSON: %s", body)
			}
			got := fmt.Sprintf("%d\nX-Amzn-ErrorType: %s\nContent-Type: %s\n\n%s\n",
				resp.StatusCode, resp.Header.Get("X-Amzn-ErrorType"), resp.Header.Get("Content-Type"), body)
			golden(t, "errors/"+tt.name+".golden", []byte(got))
		})
	}
}

func TestInvokeEndpoint(t *testing.T) {
	h := newHarness(t, Options{})
	h.route("good", variant("AllTraffic", engine(t, echoEngine)))
	resp := h.post(t, "/endpoints/good/invocations", map[string]string{
		"Content-Type":      "application/json",
		hdrAccept:           "application/json",
		hdrCustomAttributes: "c=1",
		hdrInferenceID:      "inf-1",
		hdrTargetVariant:    "AllTraffic",
	}, []byte(`{"inputs":"hi"}`))
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	var got map[string]string
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"path": "/invocations", "body": `{"inputs":"hi"}`, "content_type": "application/json",
		"accept": "application/json", "custom": "c=1", "inference_id": "inf-1"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("engine saw %s=%q, want %q", k, got[k], v)
		}
	}
	for k, v := range map[string]string{hdrInvokedVariant: "AllTraffic", "Content-Type": "application/json", hdrCustomAttributes: "engine=sim"} {
		if resp.Header.Get(k) != v {
			t.Errorf("response header %s = %q, want %q", k, resp.Header.Get(k), v)
		}
	}
}

// decodeFrames reads every event-stream message of body.
func decodeFrames(t *testing.T, body io.Reader) []eventstream.Message {
	t.Helper()
	dec := eventstream.NewDecoder()
	var out []eventstream.Message
	br := bufio.NewReader(body)
	for {
		if _, err := br.Peek(1); err == io.EOF {
			return out
		}
		msg, err := dec.Decode(br, nil)
		if err != nil {
			t.Fatalf("decode frame %d: %v", len(out), err)
		}
		out = append(out, msg)
	}
}

func header(m eventstream.Message, name string) string {
	if v := m.Headers.Get(name); v != nil {
		return v.String()
	}
	return ""
}

func TestInvokeEndpointWithResponseStream(t *testing.T) {
	chunks := []string{"data: {\"token\":\"a\"}\n\n", "data: {\"token\":\"b\"}\n\n", "data: [DONE]\n\n"}
	type seen struct{ body, accept string }
	seenC := make(chan seen, 1)
	streamer := engine(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		seenC <- seen{string(b), r.Header.Get("Accept")}
		w.Header().Set("Content-Type", "text/event-stream")
		for _, c := range chunks {
			io.WriteString(w, c)
			w.(http.Flusher).Flush()
		}
	})
	breaker := engine(t, func(w http.ResponseWriter, r *http.Request) {
		// Promise more than is sent, then reset the connection mid-body.
		conn, buf, _ := w.(http.Hijacker).Hijack()
		buf.WriteString("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: 1000\r\n\r\ndata: partial\n\n")
		buf.Flush()
		conn.(*net.TCPConn).SetLinger(0)
		conn.Close()
	})
	h := newHarness(t, Options{})
	h.route("stream", variant("AllTraffic", streamer))
	h.route("broken", variant("AllTraffic", breaker))

	t.Run("payload parts", func(t *testing.T) {
		resp := h.post(t, "/endpoints/stream/invocations-response-stream",
			map[string]string{"Content-Type": "application/json", hdrStreamAccept: "text/event-stream"}, []byte(`{"inputs":"hi"}`))
		if resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
		for k, v := range map[string]string{"Content-Type": eventStreamType, hdrStreamCType: "text/event-stream", hdrInvokedVariant: "AllTraffic"} {
			if resp.Header.Get(k) != v {
				t.Errorf("header %s = %q, want %q", k, resp.Header.Get(k), v)
			}
		}
		frames := decodeFrames(t, resp.Body)
		var joined strings.Builder
		for _, f := range frames {
			if header(f, ":event-type") != "PayloadPart" || header(f, ":message-type") != "event" {
				t.Fatalf("frame headers %v", f.Headers)
			}
			joined.Write(f.Payload)
		}
		if joined.String() != strings.Join(chunks, "") {
			t.Fatalf("payload = %q", joined.String())
		}
		if len(frames) < 1 {
			t.Fatal("no frames")
		}
		if s := <-seenC; s.body != `{"stream":true,"inputs":"hi"}` || s.accept != "text/event-stream" {
			t.Fatalf("engine saw body %s accept %q", s.body, s.accept)
		}
	})
	t.Run("broken upstream", func(t *testing.T) {
		resp := h.post(t, "/endpoints/broken/invocations-response-stream", nil, []byte(`{"inputs":"hi"}`))
		if resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
		frames := decodeFrames(t, resp.Body)
		if len(frames) < 2 {
			t.Fatalf("want data then an exception, got %d frames", len(frames))
		}
		if string(frames[0].Payload) != "data: partial\n\n" {
			t.Fatalf("first payload %q", frames[0].Payload)
		}
		last := frames[len(frames)-1]
		if header(last, ":message-type") != "exception" || header(last, ":exception-type") != "ModelStreamError" {
			t.Fatalf("last frame headers %v", last.Headers)
		}
		var body struct{ Message, ErrorCode string }
		if err := json.Unmarshal(last.Payload, &body); err != nil || body.ErrorCode != "StreamBroken" {
			t.Fatalf("exception payload %s (%v)", last.Payload, err)
		}
	})
}

func TestBodyLimit(t *testing.T) {
	var got atomic.Int64
	h := newHarness(t, Options{}) // default limit: 6,291,456 bytes
	h.route("big", variant("AllTraffic", engine(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got.Store(int64(len(b)))
	})))
	tests := []struct {
		name       string
		size       int
		wantStatus int
	}{
		{name: "at the limit", size: DefaultMaxBodyBytes, wantStatus: 200},
		{name: "one byte over", size: DefaultMaxBodyBytes + 1, wantStatus: http.StatusRequestEntityTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got.Store(0)
			resp := h.post(t, "/endpoints/big/invocations", nil, bytes.Repeat([]byte("a"), tt.size))
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("status %d, want %d", resp.StatusCode, tt.wantStatus)
			}
			if tt.wantStatus == 200 && got.Load() != int64(tt.size) {
				t.Fatalf("engine got %d bytes", got.Load())
			}
			if tt.wantStatus != 200 && (got.Load() != 0 || resp.Header.Get("X-Amzn-ErrorType") != codeValidation) {
				t.Fatalf("oversized body reached the engine (%d bytes) or wrong code %q", got.Load(), resp.Header.Get("X-Amzn-ErrorType"))
			}
		})
	}
}

type nopActivator struct{}

func (nopActivator) Activate(string) {}

func TestActivationOverflow(t *testing.T) {
	h := newHarness(t, Options{})
	ok := engine(t, echoEngine)
	cold := gateway.Route{Endpoint: "cold", Activator: nopActivator{}, MaxHeld: 1,
		Variants: []gateway.VariantRoute{{Name: "AllTraffic", Weight: 1}}}
	h.gw.SetRoute(cold)
	done := make(chan int, 1)
	go func() {
		resp := h.post(t, "/endpoints/cold/invocations", nil, []byte(`{"inputs":"hi"}`))
		done <- resp.StatusCode
	}()
	deadline := time.Now().Add(10 * time.Second)
	for h.gw.Snapshot("cold").Held < 1 {
		if time.Now().After(deadline) {
			t.Fatal("first request never held")
		}
		time.Sleep(5 * time.Millisecond)
	}
	resp := h.post(t, "/endpoints/cold/invocations", nil, []byte(`{"inputs":"hi"}`))
	body, _ := io.ReadAll(resp.Body)
	got := fmt.Sprintf("%d\nX-Amzn-ErrorType: %s\nContent-Type: %s\n\n%s\n",
		resp.StatusCode, resp.Header.Get("X-Amzn-ErrorType"), resp.Header.Get("Content-Type"), body)
	golden(t, "errors/activation_overflow.golden", []byte(got))
	cold.Variants = []gateway.VariantRoute{variant("AllTraffic", ok)}
	h.gw.SetRoute(cold)
	if s := <-done; s != 200 {
		t.Fatalf("held request got %d after the backend arrived", s)
	}
}
