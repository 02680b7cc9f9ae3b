package appautoscaling

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	aas "github.com/aws/aws-sdk-go-v2/service/applicationautoscaling"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/endpoint"
	"github.com/capstan-dev/capstan/internal/store"
)

// fakeVariants is an in-memory Variants: endpoint/variant → desired and
// reservation limit. It records SetDesired calls; setErr, when set, is
// returned by SetDesired.
type fakeVariants struct {
	mu     sync.Mutex
	v      map[string]*fakeVariant
	calls  []int
	setErr error
}

type fakeVariant struct{ desired, limit int }

var _ Variants = (*fakeVariants)(nil)

func newFakeVariants() *fakeVariants { return &fakeVariants{v: map[string]*fakeVariant{}} }

func (f *fakeVariants) add(ep, variant string, desired, limit int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.v[ep+"/"+variant] = &fakeVariant{desired, limit}
}

func (f *fakeVariants) get(ep, variant string) (desired, limit int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	v := f.v[ep+"/"+variant]
	return v.desired, v.limit
}

func (f *fakeVariants) setLimit(ep, variant string, limit int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.v[ep+"/"+variant].limit = limit
}

func (f *fakeVariants) setCalls() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]int(nil), f.calls...)
}

func (f *fakeVariants) lookup(ep, variant string) (*fakeVariant, error) {
	found := false
	for k := range f.v {
		if len(k) > len(ep) && k[:len(ep)+1] == ep+"/" {
			found = true
		}
	}
	if !found {
		return nil, fmt.Errorf("fake: %w", &endpoint.Error{Kind: endpoint.ErrNotFound, Resource: endpoint.ResEndpoint, Name: ep})
	}
	v := f.v[ep+"/"+variant]
	if v == nil {
		return nil, fmt.Errorf("fake: %w", &endpoint.Error{Kind: endpoint.ErrNotFound, Resource: "variant", Name: variant})
	}
	return v, nil
}

func (f *fakeVariants) Variant(_ context.Context, ep, variant string) (int, int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	v, err := f.lookup(ep, variant)
	if err != nil {
		return 0, 0, err
	}
	return v.desired, v.limit, nil
}

func (f *fakeVariants) SetDesired(_ context.Context, ep, variant string, n int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.setErr != nil {
		return f.setErr
	}
	v, err := f.lookup(ep, variant)
	if err != nil {
		return err
	}
	v.desired = n
	f.calls = append(f.calls, n)
	return nil
}

// fakeSource is a hand-fed metric source: values by endpoint, variant,
// metric and statistic; a missing entry is an error, as for an unknown
// metric. It counts reads.
type fakeSource struct {
	mu     sync.Mutex
	values map[readKey]float64
	errs   map[readKey]error
	reads  map[readKey]int
}

func newFakeSource() *fakeSource {
	return &fakeSource{values: map[readKey]float64{}, errs: map[readKey]error{}, reads: map[readKey]int{}}
}

func (s *fakeSource) set(ep, variant, metric, stat string, v float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := readKey{ep, variant, metric, stat}
	s.values[k] = v
	delete(s.errs, k)
}

func (s *fakeSource) fail(ep, variant, metric, stat string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.errs[readKey{ep, variant, metric, stat}] = err
}

func (s *fakeSource) readCount(ep, variant, metric, stat string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reads[readKey{ep, variant, metric, stat}]
}

type fakeReader struct {
	s  *fakeSource
	ep string
}

var _ Reader = fakeReader{}

func (r fakeReader) Read(_ context.Context, variant, metric, stat string, period time.Duration) (float64, error) {
	if period != time.Minute {
		return 0, fmt.Errorf("unexpected period %v", period)
	}
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	k := readKey{r.ep, variant, metric, stat}
	r.s.reads[k]++
	if err := r.s.errs[k]; err != nil {
		return 0, err
	}
	v, ok := r.s.values[k]
	if !ok {
		return 0, fmt.Errorf("unknown metric %s", metric)
	}
	return v, nil
}

// env is one API over a fresh store, a fake clock, fake variants and a
// hand-fed metric source, served over HTTP.
type env struct {
	t      *testing.T
	api    *API
	srv    *httptest.Server
	clk    *clock.Fake
	vars   *fakeVariants
	src    *fakeSource
	reg    *prometheus.Registry
	client *aas.Client
	ctx    context.Context
}

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func newEnv(t *testing.T, mutate ...func(*Options)) *env {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e := &env{t: t, clk: clock.NewFake(t0), vars: newFakeVariants(), src: newFakeSource(), reg: prometheus.NewRegistry(), ctx: context.Background()}
	var mu sync.Mutex
	n := 0
	o := Options{
		AccountID: "123456789012", Region: "eu-west-1", Clock: e.clk, Registerer: e.reg,
		Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
		NewReader: func(ep string) Reader { return fakeReader{e.src, ep} },
		NewID: func() string {
			mu.Lock()
			defer mu.Unlock()
			n++
			return fmt.Sprintf("00000000-0000-4000-8000-%012d", n)
		},
	}
	for _, m := range mutate {
		m(&o)
	}
	e.api = NewAPI(st, e.vars, o)
	e.srv = httptest.NewServer(e.api)
	t.Cleanup(e.srv.Close)
	e.client = aas.New(aas.Options{
		BaseEndpoint: aws.String(e.srv.URL),
		Region:       "eu-west-1",
		Credentials:  credentials.NewStaticCredentialsProvider("AKID", "secret", ""),
		Retryer:      aws.NopRetryer{},
	})
	return e
}

// reconcile runs one evaluation and fails the test on error.
func (e *env) reconcile() {
	e.t.Helper()
	if err := e.api.Controller().Reconcile(e.ctx); err != nil {
		e.t.Fatalf("reconcile: %v", err)
	}
}
