package asyncinference

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	engineapi "github.com/capstan-dev/capstan/internal/engine"
	"github.com/capstan-dev/capstan/internal/engine/sim"
	"github.com/capstan-dev/capstan/internal/gateway"
	"github.com/capstan-dev/capstan/internal/testutil"
)

// cycle runs one dispatch synchronously and waits for the workers it
// started: the test steps time and tries one at a time, with no Run loop.
func cycle(m *Manager) {
	m.dispatch(context.Background())
	m.wg.Wait()
}

// limitedEngine answers like capstan's simulated engine (and most HTTP
// servers with a body limit): it reads at most limit bytes of the body and
// refuses a larger one with a 400, without reading the rest.
func limitedEngine(limit int64, tries *atomic.Int32) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		tries.Add(1)
		b, _ := io.ReadAll(io.LimitReader(r.Body, limit+1))
		if int64(len(b)) > limit {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprintf(w, `{"error":{"message":"request body exceeds the %d-byte limit","type":"invalid_request_error"}}`, limit)
			return
		}
		echo(w, r)
	}
}

// failing answers status with message for the first n tries, then echoes.
func failing(status, n int, message string, tries *atomic.Int32) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if int(tries.Add(1)) <= n {
			_, _ = io.Copy(io.Discard, r.Body)
			http.Error(w, message, status)
			return
		}
		echo(w, r)
	}
}

// The model's answer decides whether a request is retried: a client error
// (4xx but 408 and 429) and a 500 are final at the first try, and the body
// is never sent again; 429, 502, 503 and 504 are retried.
func TestModelErrorsFinalOrRetried(t *testing.T) {
	const always = 1 << 30
	tests := []struct {
		name      string
		input     int // bytes of input (0: a small JSON object)
		engine    func(tries *atomic.Int32) http.HandlerFunc
		wantTries int32
		wantOut   bool     // the answer was written (else the failure object)
		wantFail  []string // substrings of the failure object
	}{
		{name: "400 after reading the body", engine: func(tr *atomic.Int32) http.HandlerFunc {
			return failing(http.StatusBadRequest, always, `{"error":{"message":"bad input shape"}}`, tr)
		}, wantTries: 1, wantFail: []string{`Received client error (400) from AllTraffic`, `bad input shape`}},
		{name: "400 for a body over the engine's limit, sent before the body is read", input: 24 << 20,
			engine:    func(tr *atomic.Int32) http.HandlerFunc { return limitedEngine(1<<20, tr) },
			wantTries: 1, wantFail: []string{`Received client error (400) from AllTraffic`, `request body exceeds the 1048576-byte limit`}},
		{name: "413", engine: func(tr *atomic.Int32) http.HandlerFunc {
			return failing(http.StatusRequestEntityTooLarge, always, "too large", tr)
		}, wantTries: 1, wantFail: []string{`Received client error (413)`, `too large`}},
		{name: "422", engine: func(tr *atomic.Int32) http.HandlerFunc {
			return failing(http.StatusUnprocessableEntity, always, "unprocessable", tr)
		}, wantTries: 1, wantFail: []string{`Received client error (422)`, `unprocessable`}},
		{name: "500 is the model's failure", engine: func(tr *atomic.Int32) http.HandlerFunc {
			return failing(http.StatusInternalServerError, always, "CUDA error", tr)
		}, wantTries: 1, wantFail: []string{`Received server error (500)`, `CUDA error`}},
		{name: "503 is retried", engine: func(tr *atomic.Int32) http.HandlerFunc {
			return failing(http.StatusServiceUnavailable, 2, "model is still loading", tr)
		}, wantTries: 3, wantOut: true},
		{name: "502 and 504 are retried", engine: func(tr *atomic.Int32) http.HandlerFunc {
			return func(w http.ResponseWriter, r *http.Request) {
				switch tr.Add(1) {
				case 1:
					http.Error(w, "bad gateway", http.StatusBadGateway)
				case 2:
					http.Error(w, "gateway timeout", http.StatusGatewayTimeout)
				default:
					echo(w, r)
				}
			}
		}, wantTries: 3, wantOut: true},
		{name: "429 is retried", engine: func(tr *atomic.Int32) http.HandlerFunc {
			return failing(http.StatusTooManyRequests, 1, "queue full", tr)
		}, wantTries: 2, wantOut: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			var tries atomic.Int32
			f.route(engine(t, tt.engine(&tries)))
			m := f.manager(t, Options{RetryInterval: time.Second})
			in := []byte(`{"inputs":"x"}`)
			if tt.input > 0 {
				in = bytes.Repeat([]byte("x"), tt.input)
			}
			f.s3.put("s3://b/in/1.json", in)
			if _, err := m.Submit(context.Background(), Request{Endpoint: "ep", InputLocation: "s3://b/in/1.json", InferenceID: "r"}); err != nil {
				t.Fatal(err)
			}
			// Ten retry intervals: every retried case is done well within them,
			// and a final failure must not be tried again during them.
			for range 10 {
				cycle(m)
				f.clk.Step(time.Second)
			}
			if n := tries.Load(); n != tt.wantTries {
				t.Errorf("the engine saw %d tries, want %d", n, tt.wantTries)
			}
			out, gotOut := f.s3.get("s3://b/out/r.out")
			fail, gotFail := f.s3.get("s3://b/fail/r-error.out")
			if gotOut != tt.wantOut || gotFail == tt.wantOut {
				t.Fatalf("output written %v, failure written %v (%s); want output %v", gotOut, gotFail, fail, tt.wantOut)
			}
			if tt.wantOut && !strings.Contains(string(out), `"echo"`) {
				t.Errorf("output %s", out)
			}
			for _, s := range tt.wantFail {
				if !strings.Contains(string(fail), s) {
					t.Errorf("failure object %q lacks %q", fail, s)
				}
			}
			if b := m.Backlog("ep"); b != 0 {
				t.Errorf("backlog %d after the request finished", b)
			}
		})
	}
}

// A request whose engine keeps answering 503 is tried every RetryInterval
// until its RequestTTLSeconds, then fails as expired naming the last error.
func TestServerErrorRetriedUntilTTL(t *testing.T) {
	f := newFixture(t)
	var tries atomic.Int32
	f.route(engine(t, failing(http.StatusServiceUnavailable, 1<<30, "model is still loading", &tries)))
	m := f.manager(t, Options{RetryInterval: 10 * time.Second})
	f.s3.put("s3://b/in/1.json", []byte(`{}`))
	if _, err := m.Submit(context.Background(), Request{Endpoint: "ep", InputLocation: "s3://b/in/1.json", InferenceID: "r", RequestTTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		cycle(m)
		if _, ok := f.s3.get("s3://b/fail/r-error.out"); ok {
			break
		}
		f.clk.Step(10 * time.Second)
	}
	got, ok := f.s3.get("s3://b/fail/r-error.out")
	if !ok {
		t.Fatalf("no failure object after the TTL; %d tries", tries.Load())
	}
	for _, s := range []string{"expired", "RequestTTLSeconds (60)", "Received server error (503)", "model is still loading"} {
		if !strings.Contains(string(got), s) {
			t.Errorf("failure object %q lacks %q", got, s)
		}
	}
	// Tried at 0, 10, …, 60 s; at 70 s it is past its TTL and not sent.
	if n := tries.Load(); n != 7 {
		t.Errorf("%d tries, want 7 (one per RetryInterval within the TTL)", n)
	}
}

// A replica that cannot be reached is waited for, as a missing instance is.
func TestConnectionErrorRetried(t *testing.T) {
	f := newFixture(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close()
	f.route(gateway.Backend{ID: "r1", Addr: dead})
	m := f.manager(t, Options{RetryInterval: time.Second})
	f.s3.put("s3://b/in/1.json", []byte(`{}`))
	if _, err := m.Submit(context.Background(), Request{Endpoint: "ep", InputLocation: "s3://b/in/1.json", InferenceID: "r"}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		cycle(m)
		f.clk.Step(time.Second)
	}
	if _, ok := f.s3.get("s3://b/fail/r-error.out"); ok {
		t.Fatal("an unreachable replica failed the request")
	}
	f.route(engine(t, echo))
	for range 3 {
		cycle(m)
		f.clk.Step(time.Second)
	}
	f.s3.wait(t, "s3://b/out/r.out")
}

// An input larger than MaxPayloadBytes fails on its declared size: its body
// is not read and nothing is sent to the model.
func TestOversizedInputRefusedUnread(t *testing.T) {
	f := newFixture(t)
	var tries atomic.Int32
	f.route(engine(t, failing(http.StatusOK, 0, "", &tries)))
	m := f.manager(t, Options{MaxPayloadBytes: 1 << 20})
	f.s3.put("s3://b/in/big", bytes.Repeat([]byte("x"), 3<<20))
	if _, err := m.Submit(context.Background(), Request{Endpoint: "ep", InputLocation: "s3://b/in/big", InferenceID: "r"}); err != nil {
		t.Fatal(err)
	}
	cycle(m)
	got, ok := f.s3.get("s3://b/fail/r-error.out")
	if !ok || !strings.Contains(string(got), "is larger than 1048576 bytes") {
		t.Fatalf("failure object %q (written %v)", got, ok)
	}
	if n := f.s3.read.Load(); n != 0 {
		t.Errorf("%d bytes of the oversized input were read", n)
	}
	if n := tries.Load(); n != 0 {
		t.Errorf("the model was invoked %d times", n)
	}
}

// Inputs held in memory at once are bounded: with 1 MiB inputs and the
// default budget (four inputs of MaxPayloadBytes), at most four requests
// are in the model at once even though the endpoint allows eight.
func TestHeldInputsBounded(t *testing.T) {
	for _, tc := range []struct {
		name   string
		budget int64
		want   int32
	}{
		{"default: four of MaxPayloadBytes", 0, 4},
		{"MaxHeldInputBytes of two", 2 << 20, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.cfg["ep"] = `{"ClientConfig":{"MaxConcurrentInvocationsPerInstance":8},"OutputConfig":{"S3OutputPath":"s3://b/out"}}`
			var cur, peak atomic.Int32
			release := make(chan struct{})
			var once sync.Once
			open := func() { once.Do(func() { close(release) }) }
			f.route(engine(t, func(w http.ResponseWriter, r *http.Request) {
				n := cur.Add(1)
				for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
				}
				<-release
				cur.Add(-1)
				_, _ = io.Copy(io.Discard, r.Body)
				_, _ = io.WriteString(w, "ok")
			}))
			m := f.manager(t, Options{MaxPayloadBytes: 1 << 20, MaxHeldInputBytes: tc.budget})
			f.s3.put("s3://b/in/1", bytes.Repeat([]byte("x"), 1<<20))
			for i := range 8 {
				if _, err := m.Submit(context.Background(), Request{Endpoint: "ep", InputLocation: "s3://b/in/1", InferenceID: fmt.Sprint("h", i)}); err != nil {
					t.Fatal(err)
				}
			}
			t.Cleanup(open) // before the engine's Close, which waits for its handlers
			done := make(chan struct{})
			go func() { cycle(m); close(done) }()
			testutil.Eventually(t, 10*time.Second, "the requests to reach the model", func() bool { return cur.Load() >= tc.want })
			time.Sleep(50 * time.Millisecond) // one more would have arrived by now
			if p := peak.Load(); p != tc.want {
				t.Errorf("peak %d requests in the model, want %d", p, tc.want)
			}
			open()
			<-done
			for i := range 8 {
				f.s3.wait(t, fmt.Sprintf("s3://b/out/h%d.out", i))
			}
		})
	}
}

// The finding end to end on capstan's simulated engine (capstan engine sim,
// whose request bodies are limited to engineapi.MaxRequestBytes): an input over that
// limit is sent once, refused with the engine's 400, and its failure object
// carries the engine's message; the engine is not asked again.
func TestInputOverSimEngineLimitFailsOnce(t *testing.T) {
	e, err := sim.NewEngine(sim.Options{Model: "llama-3.1-8b", GPU: "h100"}, sim.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = e.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	var tries atomic.Int32
	srv := sim.NewServer(e)
	f := newFixture(t)
	f.route(engine(t, func(w http.ResponseWriter, r *http.Request) { tries.Add(1); srv.ServeHTTP(w, r) }))
	m := f.manager(t, Options{RetryInterval: time.Second})
	big := append([]byte(`{"inputs":"`), bytes.Repeat([]byte("x"), 3*engineapi.MaxRequestBytes)...)
	f.s3.put("s3://b/in/big.json", append(big, `"}`...))
	if _, err := m.Submit(context.Background(), Request{Endpoint: "ep", InputLocation: "s3://b/in/big.json", InferenceID: "big", ContentType: "application/json"}); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		cycle(m)
		f.clk.Step(time.Second)
	}
	got, ok := f.s3.get("s3://b/fail/big-error.out")
	if !ok {
		t.Fatalf("no failure object after %d tries", tries.Load())
	}
	want := fmt.Sprintf("request body exceeds the %d-byte limit", engineapi.MaxRequestBytes)
	if !strings.Contains(string(got), "Received client error (400) from AllTraffic") || !strings.Contains(string(got), want) {
		t.Fatalf("failure object %q, want the engine's 400 and %q", got, want)
	}
	if n := tries.Load(); n != 1 {
		t.Fatalf("the engine saw %d tries, want 1", n)
	}
	if b := m.Backlog("ep"); b != 0 {
		t.Fatalf("backlog %d", b)
	}
}

// sizelessS3 answers GetObject without a Content-Length.
type sizelessS3 struct{ *memS3 }

func (s sizelessS3) GetObject(ctx context.Context, in *s3.GetObjectInput, o ...func(*s3.Options)) (*s3.GetObjectOutput, error) {
	out, err := s.memS3.GetObject(ctx, in, o...)
	if out != nil {
		out.ContentLength = nil
	}
	return out, err
}

// An input of unknown size is read up to MaxPayloadBytes (a larger one
// fails), and the budget it held is returned whole when its request ends.
func TestInputOfUnknownSize(t *testing.T) {
	f := newFixture(t)
	f.route(engine(t, echo))
	m := f.manager(t, Options{MaxPayloadBytes: 1 << 20})
	m.o.S3 = sizelessS3{f.s3}
	f.s3.put("s3://b/in/small", []byte(`{"inputs":"x"}`))
	f.s3.put("s3://b/in/big", bytes.Repeat([]byte("x"), 2<<20))
	for _, id := range []string{"small", "big"} {
		if _, err := m.Submit(context.Background(), Request{Endpoint: "ep", InputLocation: "s3://b/in/" + id, InferenceID: id}); err != nil {
			t.Fatal(err)
		}
	}
	cycle(m)
	if out, ok := f.s3.get("s3://b/out/small.out"); !ok || !strings.Contains(string(out), `"echo"`) {
		t.Errorf("small input: output %q (written %v)", out, ok)
	}
	if got, ok := f.s3.get("s3://b/fail/big-error.out"); !ok || !strings.Contains(string(got), "is larger than 1048576 bytes") {
		t.Errorf("big input: failure object %q (written %v)", got, ok)
	}
	if !m.held.TryAcquire(m.o.MaxHeldInputBytes) {
		t.Error("input budget not returned after the requests ended")
	}
}
