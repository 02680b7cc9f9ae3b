package asyncinference

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/gateway"
	"github.com/capstan-dev/capstan/internal/store"
	"github.com/capstan-dev/capstan/internal/testutil"
)

// memS3 is an in-memory S3 with the two calls the workers make.
type memS3 struct {
	mu   sync.Mutex
	objs map[string][]byte
	read atomic.Int64 // body bytes handed out by GetObject
}

func newMemS3() *memS3 { return &memS3{objs: map[string][]byte{}} }

func (m *memS3) GetObject(_ context.Context, in *s3.GetObjectInput, _ ...func(*s3.Options)) (*s3.GetObjectOutput, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.objs[*in.Bucket+"/"+*in.Key]
	if !ok {
		return nil, &smithy.GenericAPIError{Code: "NoSuchKey", Message: "The specified key does not exist."}
	}
	n := int64(len(b))
	return &s3.GetObjectOutput{ContentLength: &n, Body: io.NopCloser(&countingReader{r: bytes.NewReader(b), n: &m.read})}, nil
}

type countingReader struct {
	r io.Reader
	n *atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

func (m *memS3) PutObject(_ context.Context, in *s3.PutObjectInput, _ ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	b, err := io.ReadAll(in.Body)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.objs[*in.Bucket+"/"+*in.Key] = b
	return &s3.PutObjectOutput{}, nil
}

func (m *memS3) put(uri string, b []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.objs[strings.TrimPrefix(uri, "s3://")] = b
}

func (m *memS3) get(uri string) ([]byte, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.objs[strings.TrimPrefix(uri, "s3://")]
	return b, ok
}

// wait polls (in real time) until uri exists.
func (m *memS3) wait(t *testing.T, uri string) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if b, ok := m.get(uri); ok {
			return string(b)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s was never written", uri)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

type staticConfigs map[string]string

func (s staticConfigs) AsyncConfig(_ context.Context, ep string) (json.RawMessage, error) {
	c, ok := s[ep]
	if !ok {
		return nil, ErrUnknownEndpoint
	}
	return json.RawMessage(c), nil
}

const asyncCfg = `{"ClientConfig":{"MaxConcurrentInvocationsPerInstance":2},"OutputConfig":{"S3OutputPath":"s3://b/out","S3FailurePath":"s3://b/fail/"}}`

type fixture struct {
	st  *store.Store
	gw  *gateway.Gateway
	s3  *memS3
	clk *clock.Fake
	cfg staticConfigs
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	return &fixture{st: st, gw: gateway.New(gateway.Options{Clock: clk, Seed: 1}), s3: newMemS3(), clk: clk,
		cfg: staticConfigs{"ep": asyncCfg, "sync": ``}}
}

func (f *fixture) manager(t *testing.T, o Options) *Manager {
	t.Helper()
	o.Store, o.Gateway, o.Configs, o.S3, o.Clock = f.st, f.gw, f.cfg, f.s3, f.clk
	o.Logger = slog.New(slog.DiscardHandler)
	if o.Registerer == nil {
		o.Registerer = prometheus.NewRegistry()
	}
	m, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func run(t *testing.T, m *Manager) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

func engine(t *testing.T, h http.HandlerFunc) gateway.Backend {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return gateway.Backend{ID: "r1", Addr: strings.TrimPrefix(srv.URL, "http://")}
}

func echo(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"echo":%q,"ct":%q}`, b, r.Header.Get("Content-Type"))
}

func (f *fixture) route(backends ...gateway.Backend) {
	f.gw.SetRoute(gateway.Route{Endpoint: "ep", Variants: []gateway.VariantRoute{{Name: "AllTraffic", Weight: 1, Backends: backends}}})
}

func TestSubmitAndProcess(t *testing.T) {
	f := newFixture(t)
	f.route(engine(t, echo))
	m := f.manager(t, Options{NewID: func() string { return "gen-id" }})
	run(t, m)
	f.s3.put("s3://b/in/1.json", []byte(`{"inputs":"x"}`))
	for _, tc := range []struct {
		name        string
		req         Request
		out, fail   string
		wantInFinal string
	}{
		{"plain", Request{InputLocation: "s3://b/in/1.json", InferenceID: "a", ContentType: "application/json"},
			"s3://b/out/a.out", "s3://b/fail/a-error.out", `"ct":"application/json"`},
		{"generated id", Request{InputLocation: "s3://b/in/1.json"}, "s3://b/out/gen-id.out", "s3://b/fail/gen-id-error.out", `{\"inputs\":\"x\"}`},
		{"extension and filename", Request{InputLocation: "s3://b/in/1.json", InferenceID: "c", OutputExtension: "/day1/", Filename: "r.json"},
			"s3://b/out/day1/r.json", "s3://b/fail/day1/c-error.out", `"echo"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.req.Endpoint = "ep"
			acc, err := m.Submit(context.Background(), tc.req)
			if err != nil {
				t.Fatal(err)
			}
			if acc.OutputLocation != tc.out || acc.FailureLocation != tc.fail {
				t.Fatalf("locations %q %q, want %q %q", acc.OutputLocation, acc.FailureLocation, tc.out, tc.fail)
			}
			if got := f.s3.wait(t, tc.out); !strings.Contains(got, tc.wantInFinal) {
				t.Fatalf("output %s lacks %s", got, tc.wantInFinal)
			}
		})
	}
	for _, tc := range []struct {
		ep   string
		want error
	}{{"sync", ErrNotAsync}, {"missing", ErrUnknownEndpoint}} {
		if _, err := m.Submit(context.Background(), Request{Endpoint: tc.ep, InputLocation: "s3://b/in/1.json"}); err != tc.want {
			t.Errorf("%s: %v, want %v", tc.ep, err, tc.want)
		}
	}
}

func TestFailures(t *testing.T) {
	f := newFixture(t)
	f.route(engine(t, func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "bad input shape", http.StatusUnprocessableEntity)
	}))
	// No S3FailurePath: failures go next to the outputs.
	f.cfg["ep"] = `{"OutputConfig":{"S3OutputPath":"s3://b/out"}}`
	m := f.manager(t, Options{})
	run(t, m)
	f.s3.put("s3://b/in/1.json", []byte(`{}`))
	acc, err := m.Submit(context.Background(), Request{Endpoint: "ep", InputLocation: "s3://b/in/1.json", InferenceID: "m"})
	if err != nil || acc.FailureLocation != "" {
		t.Fatalf("%+v %v", acc, err)
	}
	if got := f.s3.wait(t, "s3://b/out/m-error.out"); !strings.Contains(got, "Received client error (422) from AllTraffic") || !strings.Contains(got, "bad input shape") {
		t.Fatalf("model error object: %s", got)
	}
	if _, err := m.Submit(context.Background(), Request{Endpoint: "ep", InputLocation: "s3://b/in/none.json", InferenceID: "n"}); err != nil {
		t.Fatal(err)
	}
	if got := f.s3.wait(t, "s3://b/out/n-error.out"); !strings.Contains(got, "NoSuchKey") {
		t.Fatalf("missing input object: %s", got)
	}
	if _, ok := f.s3.get("s3://b/out/m.out"); ok {
		t.Fatal("output written for a failed request")
	}
}

// A request that waits for an instance longer than its TTL fails as expired.
func TestTTLExpiry(t *testing.T) {
	f := newFixture(t)
	f.route() // no instance, no activator: every try finds no backend
	m := f.manager(t, Options{RetryInterval: time.Second})
	run(t, m)
	f.s3.put("s3://b/in/1.json", []byte(`{}`))
	if _, err := m.Submit(context.Background(), Request{Endpoint: "ep", InputLocation: "s3://b/in/1.json", InferenceID: "t", RequestTTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, "the retry to wait on the clock", func() bool { return f.clk.Waiters() > 0 })
	if m.Backlog("ep") != 1 {
		t.Fatalf("backlog %d", m.Backlog("ep"))
	}
	for i := 0; i < 70; i++ {
		f.clk.Step(time.Second)
		if _, ok := f.s3.get("s3://b/fail/t-error.out"); ok {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	if got := f.s3.wait(t, "s3://b/fail/t-error.out"); !strings.Contains(got, "expired") || !strings.Contains(got, "RequestTTLSeconds (60)") {
		t.Fatalf("expiry object: %s", got)
	}
	testutil.Eventually(t, 10*time.Second, "the backlog to drain", func() bool { return m.Backlog("ep") == 0 })
}

// Accepted requests survive a restart: a new Manager on the same store runs them.
func TestRestartKeepsBacklog(t *testing.T) {
	f := newFixture(t)
	first := f.manager(t, Options{})
	f.s3.put("s3://b/in/1.json", []byte(`{"n":1}`))
	for _, id := range []string{"r1", "r2"} {
		if _, err := first.Submit(context.Background(), Request{Endpoint: "ep", InputLocation: "s3://b/in/1.json", InferenceID: id}); err != nil {
			t.Fatal(err)
		}
	}
	reg := prometheus.NewRegistry()
	second := f.manager(t, Options{Registerer: reg})
	if n := second.Backlog("ep"); n != 2 {
		t.Fatalf("restored backlog %d, want 2", n)
	}
	if v := promtest.ToFloat64(second.backlog.WithLabelValues("ep")); v != 2 {
		t.Fatalf("capstan_async_backlog %v", v)
	}
	// A request after the restart does not reuse a stored key.
	if _, err := second.Submit(context.Background(), Request{Endpoint: "ep", InputLocation: "s3://b/in/1.json", InferenceID: "r3"}); err != nil {
		t.Fatal(err)
	}
	f.route(engine(t, echo))
	run(t, second)
	for _, id := range []string{"r1", "r2", "r3"} {
		f.s3.wait(t, "s3://b/out/"+id+".out")
	}
	testutil.Eventually(t, 10*time.Second, "the restored backlog to drain", func() bool { return second.Backlog("ep") == 0 })
	var left int
	_ = f.st.View(func(tx *store.Tx) error {
		return tx.Each(bucketJobs, func(string, []byte) error { left++; return nil })
	})
	if left != 0 {
		t.Fatalf("%d finished requests still stored", left)
	}
}

// At most MaxConcurrentInvocationsPerInstance × instances are in process.
func TestConcurrencyBound(t *testing.T) {
	f := newFixture(t)
	var cur, peak atomic.Int32
	release := make(chan struct{})
	f.route(engine(t, func(w http.ResponseWriter, r *http.Request) {
		n := cur.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		<-release
		cur.Add(-1)
		echo(w, r)
	}))
	m := f.manager(t, Options{MaxQueue: 6})
	run(t, m)
	f.s3.put("s3://b/in/1.json", []byte(`{}`))
	for i := 0; i < 6; i++ {
		if _, err := m.Submit(context.Background(), Request{Endpoint: "ep", InputLocation: "s3://b/in/1.json", InferenceID: fmt.Sprint("c", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := m.Submit(context.Background(), Request{Endpoint: "ep", InputLocation: "s3://b/in/1.json"}); err == nil || !strings.Contains(err.Error(), ErrQueueFull.Error()) {
		t.Fatalf("7th request: %v, want queue full", err)
	}
	testutil.Eventually(t, 10*time.Second, "two requests in flight", func() bool { return cur.Load() == 2 })
	time.Sleep(50 * time.Millisecond) // a third would have arrived by now
	if p := peak.Load(); p != 2 {
		t.Fatalf("peak concurrency %d, want 2 (MaxConcurrentInvocationsPerInstance=2, one instance)", p)
	}
	close(release)
	for i := 0; i < 6; i++ {
		f.s3.wait(t, fmt.Sprintf("s3://b/out/c%d.out", i))
	}
}

// A backlog at zero instances calls Wake; the request is served once an
// instance appears.
func TestWakeFromZero(t *testing.T) {
	f := newFixture(t)
	f.route()
	be := engine(t, echo)
	var woke atomic.Int32
	m := f.manager(t, Options{RetryInterval: time.Second, Wake: func(_ context.Context, ep string) {
		woke.Add(1)
		f.route(be)
	}})
	run(t, m)
	f.s3.put("s3://b/in/1.json", []byte(`{}`))
	if _, err := m.Submit(context.Background(), Request{Endpoint: "ep", InputLocation: "s3://b/in/1.json", InferenceID: "w"}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, "a wake", func() bool { return woke.Load() == 1 })
	for i := 0; i < 10; i++ {
		if _, ok := f.s3.get("s3://b/out/w.out"); ok {
			break
		}
		f.clk.Step(time.Second)
		time.Sleep(10 * time.Millisecond)
	}
	f.s3.wait(t, "s3://b/out/w.out")
	if woke.Load() != 1 {
		t.Fatalf("woke %d times", woke.Load())
	}
}
