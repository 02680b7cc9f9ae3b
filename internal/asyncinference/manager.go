package asyncinference

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/semaphore"

	"github.com/capstan-dev/capstan/internal/awsjson"
	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/gateway"
	"github.com/capstan-dev/capstan/internal/store"
)

// Defaults and limits.
const (
	DefaultMaxQueue          = 1000
	DefaultRequestTTL        = 6 * time.Hour    // SageMaker's default RequestTTLSeconds
	DefaultInvocationTimeout = 15 * time.Minute // SageMaker's default InvocationTimeoutSeconds
	DefaultMaxPayloadBytes   = 64 << 20
	DefaultRetryInterval     = 2 * time.Second
	// defaultHeldInputs is MaxHeldInputBytes's default in inputs of
	// MaxPayloadBytes: the default MaxConcurrentInvocationsPerInstance.
	defaultHeldInputs = DefaultMaxConcurrentInvocationsPerInstance
	// maxFailureBody bounds the model error text kept in a failure object.
	maxFailureBody = 64 << 10
)

// bucketJobs holds accepted, unfinished requests, named endpoint/seq.
const bucketJobs = "asyncInvocations"

// Errors Submit returns; the runtime API words them.
var (
	// ErrUnknownEndpoint: no endpoint of that name.
	ErrUnknownEndpoint = errors.New("endpoint not found")
	// ErrNotAsync: the endpoint's config has no AsyncInferenceConfig.
	ErrNotAsync = errors.New("endpoint is not configured for asynchronous inference")
	// ErrQueueFull: the endpoint's queue holds MaxQueue requests.
	ErrQueueFull = errors.New("asynchronous inference queue is full")
	// ErrNoS3: the server has no S3 (Options.S3Unavailable, wrapped too).
	ErrNoS3 = errors.New("asynchronous inference reads its input from and writes its answer to S3")
)

// Configs finds an endpoint's AsyncInferenceConfig (raw, as stored; empty
// when the config has none). A missing endpoint is ErrUnknownEndpoint.
type Configs interface {
	AsyncConfig(ctx context.Context, endpoint string) (json.RawMessage, error)
}

// Invoker is the gateway's data path (*gateway.Gateway).
type Invoker interface {
	Invoke(ctx context.Context, inv gateway.Invocation) (*gateway.Result, error)
	Measure(inv gateway.Invocation, res *gateway.Result) *gateway.Observer
	Snapshot(endpoint string) gateway.EndpointSnapshot
}

// S3 is the part of the S3 client the workers use (*s3.Client).
type S3 interface {
	GetObject(ctx context.Context, in *s3.GetObjectInput, optFns ...func(*s3.Options)) (*s3.GetObjectOutput, error)
	PutObject(ctx context.Context, in *s3.PutObjectInput, optFns ...func(*s3.Options)) (*s3.PutObjectOutput, error)
}

// Options configure a Manager.
type Options struct {
	Store   *store.Store
	Gateway Invoker
	Configs Configs
	S3      S3
	// S3Unavailable, when set, says why the server has no S3 (no endpoint
	// configured): Submit refuses every request with it (ErrNoS3), since
	// neither the input nor the answer could be reached.
	S3Unavailable error
	// Wake, when set, is called (from the dispatcher's goroutine) when an
	// endpoint with queued requests has no instance (again after each failed
	// try while it still has none): it scales the endpoint
	// from zero. The gateway's activator is the second half of the path.
	Wake       func(ctx context.Context, endpoint string)
	Clock      clock.Clock
	Logger     *slog.Logger
	Registerer prometheus.Registerer
	// MaxQueue bounds accepted, unfinished requests per endpoint.
	MaxQueue int
	// MaxPayloadBytes bounds the input object read and the output written.
	// A larger input fails on its S3 size, unread.
	MaxPayloadBytes int64
	// MaxHeldInputBytes bounds the input bodies held in memory at once,
	// across endpoints (each is held from its read until its request ends;
	// a worker waits for room before reading). Default: four inputs of
	// MaxPayloadBytes; never less than one.
	MaxHeldInputBytes int64
	// RetryInterval is how long an endpoint's queue waits after a request
	// found no instance to serve it.
	RetryInterval time.Duration
	// NewID returns a fresh inference id (UUID form).
	NewID func() string
}

// Request is one InvokeEndpointAsync call.
type Request struct {
	Endpoint         string
	InputLocation    string
	ContentType      string
	Accept           string
	CustomAttributes string
	InferenceID      string        // "" = generated
	OutputExtension  string        // S3OutputPathExtension: a folder under S3OutputPath
	Filename         string        // replaces <InferenceId>.out
	RequestTTL       time.Duration // 0 = DefaultRequestTTL
	Timeout          time.Duration // 0 = DefaultInvocationTimeout
}

// Accepted is Submit's answer.
type Accepted struct {
	InferenceID     string
	OutputLocation  string
	FailureLocation string // "" when the config has no S3FailurePath
}

// job is one accepted request as stored.
type job struct {
	Key              string        `json:"key"`
	Endpoint         string        `json:"endpoint"`
	InferenceID      string        `json:"inferenceId"`
	InputLocation    string        `json:"inputLocation"`
	ContentType      string        `json:"contentType,omitempty"`
	Accept           string        `json:"accept,omitempty"`
	CustomAttributes string        `json:"customAttributes,omitempty"`
	OutputLocation   string        `json:"outputLocation"`
	FailureLocation  string        `json:"failureLocation"` // where failures are written (always set)
	Enqueued         time.Time     `json:"enqueued"`
	TTL              time.Duration `json:"ttl"`
	Timeout          time.Duration `json:"timeout"`
	PerInstance      int           `json:"perInstance"`

	// modelAnswer is the model's last retryable error (not stored): the
	// failure object of a request that expires says it.
	modelAnswer string
}

type queue struct {
	waiting   []job
	inflight  int
	notBefore time.Time
	woke      bool // Wake was called since the endpoint last had an instance
}

// Manager queues and runs asynchronous invocations.
type Manager struct {
	o   Options
	log *slog.Logger
	clk clock.Clock

	mu     sync.Mutex
	queues map[string]*queue
	seq    uint64
	wake   chan struct{}
	wg     sync.WaitGroup

	// held is the MaxHeldInputBytes budget, in bytes of input.
	held *semaphore.Weighted

	backlog   *prometheus.GaugeVec
	completed *prometheus.CounterVec
}

// New loads the stored backlog and returns a Manager; Run processes it.
func New(o Options) (*Manager, error) {
	if o.Store == nil || o.Gateway == nil || o.Configs == nil {
		return nil, errors.New("asyncinference: Store, Gateway and Configs are required")
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.MaxQueue <= 0 {
		o.MaxQueue = DefaultMaxQueue
	}
	if o.MaxPayloadBytes <= 0 {
		o.MaxPayloadBytes = DefaultMaxPayloadBytes
	}
	if o.MaxHeldInputBytes <= 0 {
		o.MaxHeldInputBytes = defaultHeldInputs * o.MaxPayloadBytes
	}
	o.MaxHeldInputBytes = max(o.MaxHeldInputBytes, o.MaxPayloadBytes)
	if o.RetryInterval <= 0 {
		o.RetryInterval = DefaultRetryInterval
	}
	if o.NewID == nil {
		o.NewID = awsjson.UUID
	}
	m := &Manager{o: o, log: o.Logger, clk: o.Clock, queues: map[string]*queue{}, wake: make(chan struct{}, 1),
		held: semaphore.NewWeighted(o.MaxHeldInputBytes),
		backlog: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "capstan_async_backlog",
			Help: "Asynchronous inference requests accepted and not finished (queued plus in process), per endpoint: SageMaker's ApproximateBacklogSize.",
		}, []string{"endpoint"}),
		completed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "capstan_async_invocations_total",
			Help: "Asynchronous inference requests finished, by outcome (success, failure, expired).",
		}, []string{"endpoint", "outcome"}),
	}
	if o.Registerer != nil {
		if err := o.Registerer.Register(m.backlog); err != nil {
			return nil, err
		}
		if err := o.Registerer.Register(m.completed); err != nil {
			return nil, err
		}
	}
	var jobs []job
	if err := o.Store.View(func(tx *store.Tx) error {
		var err error
		jobs, err = store.List[job](tx, bucketJobs)
		return err
	}); err != nil {
		return nil, fmt.Errorf("asyncinference: load backlog: %w", err)
	}
	// Keys are endpoint/seq with a zero-padded seq: name order is arrival order.
	for _, j := range jobs {
		q := m.queue(j.Endpoint)
		q.waiting = append(q.waiting, j)
		var s uint64
		if i := strings.LastIndexByte(j.Key, '/'); i >= 0 {
			_, _ = fmt.Sscanf(j.Key[i+1:], "%d", &s)
		}
		m.seq = max(m.seq, s)
	}
	for ep := range m.queues {
		m.publish(ep)
	}
	if len(jobs) > 0 {
		m.log.Info("asynchronous inference backlog restored", "requests", len(jobs))
	}
	return m, nil
}

func (m *Manager) queue(ep string) *queue {
	q := m.queues[ep]
	if q == nil {
		q = &queue{}
		m.queues[ep] = q
	}
	return q
}

// publish sets the backlog gauge (m.mu held).
func (m *Manager) publish(ep string) {
	q := m.queues[ep]
	m.backlog.WithLabelValues(ep).Set(float64(len(q.waiting) + q.inflight))
}

// Backlog is the endpoint's accepted, unfinished requests (ApproximateBacklogSize).
func (m *Manager) Backlog(endpoint string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	q := m.queues[endpoint]
	if q == nil {
		return 0
	}
	return len(q.waiting) + q.inflight
}

func (m *Manager) signal() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// Submit validates the endpoint, stores the request and queues it.
func (m *Manager) Submit(ctx context.Context, r Request) (Accepted, error) {
	raw, err := m.o.Configs.AsyncConfig(ctx, r.Endpoint)
	if err != nil {
		return Accepted{}, err
	}
	cfg, err := ParseConfig(raw)
	if err != nil {
		return Accepted{}, err
	}
	if cfg == nil || cfg.OutputConfig == nil || cfg.OutputConfig.S3OutputPath == "" {
		return Accepted{}, ErrNotAsync
	}
	if m.o.S3Unavailable != nil {
		return Accepted{}, fmt.Errorf("%w: %w", ErrNoS3, m.o.S3Unavailable)
	}
	id := r.InferenceID
	if id == "" {
		id = m.o.NewID()
	}
	name := r.Filename
	if name == "" {
		name = id + ".out"
	}
	acc := Accepted{InferenceID: id, OutputLocation: join(cfg.OutputConfig.S3OutputPath, r.OutputExtension, name)}
	failAt := join(cfg.OutputConfig.S3OutputPath, r.OutputExtension, id+"-error.out")
	if fp := cfg.OutputConfig.S3FailurePath; fp != "" {
		acc.FailureLocation = join(fp, r.OutputExtension, id+"-error.out")
		failAt = acc.FailureLocation
	}
	ttl, timeout := r.RequestTTL, r.Timeout
	if ttl <= 0 {
		ttl = DefaultRequestTTL
	}
	if timeout <= 0 {
		timeout = DefaultInvocationTimeout
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	q := m.queue(r.Endpoint)
	if len(q.waiting)+q.inflight >= m.o.MaxQueue {
		return Accepted{}, fmt.Errorf("endpoint %s holds %d requests: %w", r.Endpoint, m.o.MaxQueue, ErrQueueFull)
	}
	m.seq++
	j := job{Key: fmt.Sprintf("%s/%020d", r.Endpoint, m.seq), Endpoint: r.Endpoint, InferenceID: id, InputLocation: r.InputLocation,
		ContentType: r.ContentType, Accept: r.Accept, CustomAttributes: r.CustomAttributes,
		OutputLocation: acc.OutputLocation, FailureLocation: failAt, Enqueued: m.clk.Now(), TTL: ttl, Timeout: timeout,
		PerInstance: cfg.PerInstance()}
	if err := m.o.Store.Update(func(tx *store.Tx) error { return tx.Put(bucketJobs, j.Key, j) }); err != nil {
		return Accepted{}, fmt.Errorf("asyncinference: store request: %w", err)
	}
	q.waiting = append(q.waiting, j)
	m.publish(r.Endpoint)
	m.signal()
	return acc, nil
}

// Run dispatches queued requests until ctx ends, then waits for the
// workers it started (their requests stay stored if they did not finish).
func (m *Manager) Run(ctx context.Context) {
	t := m.clk.NewTicker(m.o.RetryInterval)
	defer t.Stop()
	defer m.wg.Wait()
	for {
		m.dispatch(ctx)
		select {
		case <-ctx.Done():
			return
		case <-m.wake:
		case <-t.C():
		}
	}
}

// dispatch starts workers for every endpoint with room.
func (m *Manager) dispatch(ctx context.Context) {
	now := m.clk.Now()
	var wake []string
	m.mu.Lock()
	eps := make([]string, 0, len(m.queues))
	for ep := range m.queues {
		eps = append(eps, ep)
	}
	sort.Strings(eps)
	for _, ep := range eps {
		q := m.queues[ep]
		if len(q.waiting) == 0 || now.Before(q.notBefore) {
			continue
		}
		replicas := m.o.Gateway.Snapshot(ep).Replicas
		limit := 1 // no instance: one request wakes the endpoint through the activator
		if replicas > 0 {
			q.woke = false
			limit = q.waiting[0].PerInstance * replicas
		} else if !q.woke && m.o.Wake != nil {
			q.woke = true
			wake = append(wake, ep)
		}
		for q.inflight < limit && len(q.waiting) > 0 {
			j := q.waiting[0]
			q.waiting = q.waiting[1:]
			q.inflight++
			m.wg.Add(1)
			go func() {
				defer m.wg.Done()
				m.process(ctx, j)
			}()
		}
	}
	m.mu.Unlock()
	for _, ep := range wake {
		m.log.Info("asynchronous inference: waking endpoint with no instance for its backlog", "endpoint", ep)
		m.o.Wake(ctx, ep)
	}
}

// errRetry marks a request that should go back to the queue.
var errRetry = errors.New("retry")

// modelRetryError: the model answered with a status worth another try
// (retryStatus); msg words the answer as a failure object would.
type modelRetryError struct{ msg string }

func (e *modelRetryError) Error() string        { return e.msg + " (will retry)" }
func (e *modelRetryError) Is(target error) bool { return target == errRetry }

// retryStatus says whether a model's error status is worth another try:
// the replica was unavailable, overloaded or timed out (408, 429, 502, 503,
// 504). Any other 4xx is the request's fault (a body over the engine's
// limit, bad input) and any other 5xx the model's failure on this input:
// sending the same body again would get the same answer, so the request
// fails at once.
func retryStatus(code int) bool {
	switch code {
	case http.StatusRequestTimeout, http.StatusTooManyRequests,
		http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// process runs one request and records its end.
func (m *Manager) process(ctx context.Context, j job) {
	outcome, err := m.run(ctx, j)
	m.mu.Lock()
	q := m.queue(j.Endpoint)
	if errors.Is(err, errRetry) || ctx.Err() != nil {
		q.inflight--
		var me *modelRetryError
		if errors.As(err, &me) {
			j.modelAnswer = me.msg
		}
		// Back to the head of its queue, kept in the store.
		q.waiting = append([]job{j}, q.waiting...)
		if ctx.Err() == nil {
			q.notBefore = m.clk.Now().Add(m.o.RetryInterval)
			// Wake again on the next try if there is still no instance: a
			// wake can fail (the endpoint was updating) and Wake is a no-op
			// for variants that already want instances.
			q.woke = false
		}
		m.publish(j.Endpoint)
		m.mu.Unlock()
		return
	}
	m.mu.Unlock()
	m.completed.WithLabelValues(j.Endpoint, outcome).Inc()
	// Out of the store before out of the backlog: a backlog of 0 means
	// nothing is left to run after a restart.
	if derr := m.o.Store.Update(func(tx *store.Tx) error { return tx.Delete(bucketJobs, j.Key) }); derr != nil {
		m.log.Warn("asynchronous inference: removing finished request", "endpoint", j.Endpoint, "inference_id", j.InferenceID, "err", derr)
	}
	m.mu.Lock()
	q.inflight--
	m.publish(j.Endpoint)
	m.mu.Unlock()
	level := slog.LevelInfo
	if outcome != "success" {
		level = slog.LevelWarn
	}
	m.log.Log(ctx, level, "asynchronous inference finished", "endpoint", j.Endpoint, "inference_id", j.InferenceID, "outcome", outcome, "err", err)
	m.signal()
}

// run does the work; errRetry asks for a later try.
func (m *Manager) run(ctx context.Context, j job) (outcome string, err error) {
	expired := func() bool { return m.clk.Now().Sub(j.Enqueued) > j.TTL }
	fail := func(outcome, msg string) (string, error) {
		if werr := m.put(ctx, j.FailureLocation, "text/plain", []byte(msg)); werr != nil {
			if expired() {
				return outcome, fmt.Errorf("%s; the failure object could not be written either: %w", msg, werr)
			}
			return "", fmt.Errorf("writing failure object %s: %w: %w", j.FailureLocation, werr, errRetry)
		}
		return outcome, errors.New(msg)
	}
	if expired() {
		msg := fmt.Sprintf("Request %s expired: it waited in the queue longer than its RequestTTLSeconds (%d).",
			j.InferenceID, int(j.TTL/time.Second))
		if j.modelAnswer != "" {
			msg += " Its last try: " + j.modelAnswer
		}
		return fail("expired", msg)
	}
	in, release, err := m.get(ctx, j.InputLocation)
	if err != nil {
		var nf *notFoundError
		if errors.As(err, &nf) {
			return fail("failure", err.Error())
		}
		m.log.Warn("asynchronous inference: reading input", "endpoint", j.Endpoint, "inference_id", j.InferenceID, "err", err)
		return "", fmt.Errorf("%w: %w", err, errRetry)
	}
	defer release()
	hdr := http.Header{}
	for k, v := range map[string]string{"Content-Type": j.ContentType, "Accept": j.Accept,
		"X-Amzn-SageMaker-Custom-Attributes": j.CustomAttributes, "X-Amzn-SageMaker-Inference-Id": j.InferenceID} {
		if v != "" {
			hdr.Set(k, v)
		}
	}
	inv := gateway.Invocation{Endpoint: j.Endpoint, Path: "/invocations", Header: hdr, Body: in}
	ictx, cancel := context.WithTimeout(ctx, j.Timeout)
	defer cancel()
	res, err := m.o.Gateway.Invoke(ictx, inv)
	if err != nil {
		var ae *gateway.ActivationError
		var qf *gateway.QueueFullError
		switch {
		case ctx.Err() != nil:
			return "", errRetry
		case errors.As(err, &ae), errors.As(err, &qf), errors.Is(err, gateway.ErrNoBackend):
			// No instance yet (scaling from zero) or all busy: wait in the queue.
			return "", fmt.Errorf("%w: %w", err, errRetry)
		case errors.Is(err, context.DeadlineExceeded):
			return fail("failure", fmt.Sprintf("Invocation %s timed out after InvocationTimeoutSeconds (%d).", j.InferenceID, int(j.Timeout/time.Second)))
		default:
			return fail("failure", fmt.Sprintf("Invocation %s failed: %v", j.InferenceID, err))
		}
	}
	resp := res.Response
	defer resp.Body.Close()
	obs := m.o.Gateway.Measure(inv, res)
	var out bytes.Buffer
	lw := &limitWriter{w: &out, n: m.o.MaxPayloadBytes}
	if resp.StatusCode >= 400 {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, maxFailureBody))
		msg := fmt.Sprintf("Received %s error (%d) from %s with message \"%s\".",
			errKind(resp.StatusCode), resp.StatusCode, res.Variant, strings.TrimSpace(string(body)))
		if retryStatus(resp.StatusCode) {
			m.log.Info("asynchronous inference: the model asks for a later try", "endpoint", j.Endpoint, "inference_id", j.InferenceID, "status", resp.StatusCode)
			return "", &modelRetryError{msg}
		}
		return fail("failure", msg)
	}
	if err := obs.Copy(lw, resp.Body); err != nil {
		if lw.over {
			return fail("failure", fmt.Sprintf("The model's response to %s is larger than %d bytes.", j.InferenceID, m.o.MaxPayloadBytes))
		}
		if errors.Is(err, context.DeadlineExceeded) || ictx.Err() != nil {
			return fail("failure", fmt.Sprintf("Invocation %s timed out after InvocationTimeoutSeconds (%d).", j.InferenceID, int(j.Timeout/time.Second)))
		}
		return fail("failure", fmt.Sprintf("Reading the model's response to %s: %v", j.InferenceID, err))
	}
	ct := resp.Header.Get("Content-Type")
	if err := m.put(ctx, j.OutputLocation, ct, out.Bytes()); err != nil {
		if expired() {
			return "failure", fmt.Errorf("writing output %s: %w", j.OutputLocation, err)
		}
		return "", fmt.Errorf("writing output %s: %w: %w", j.OutputLocation, err, errRetry)
	}
	return "success", nil
}

func errKind(status int) string {
	if status >= 500 {
		return "server"
	}
	return "client"
}

type limitWriter struct {
	w    io.Writer
	n    int64
	over bool
}

var errTooLarge = errors.New("payload too large")

func (l *limitWriter) Write(p []byte) (int, error) {
	if int64(len(p)) > l.n {
		l.over = true
		return 0, errTooLarge
	}
	l.n -= int64(len(p))
	return l.w.Write(p)
}

// notFoundError: the input object does not exist (a failure, not a retry).
type notFoundError struct{ msg string }

func (e *notFoundError) Error() string { return e.msg }

// get reads an input object, bounded by MaxPayloadBytes, once the
// MaxHeldInputBytes budget has room for it; release returns that room (call
// it when the input is no longer needed). An object whose S3 size is over
// MaxPayloadBytes fails unread.
func (m *Manager) get(ctx context.Context, uri string) (b []byte, release func(), err error) {
	loc, err := ParseS3URI(uri)
	if err != nil {
		return nil, nil, &notFoundError{fmt.Sprintf("Input location %s: %v", uri, err)}
	}
	if m.o.S3 == nil {
		return nil, nil, &notFoundError{"No S3 client is configured (modelSources.s3)."}
	}
	out, err := m.o.S3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(loc.Bucket), Key: aws.String(loc.Key)})
	if err != nil {
		if isS3NotFound(err) {
			return nil, nil, &notFoundError{fmt.Sprintf("Failed to download the input from %s: the object does not exist or is not accessible (%v).", uri, s3Code(err))}
		}
		return nil, nil, fmt.Errorf("reading %s: %w", uri, err)
	}
	defer out.Body.Close()
	tooLarge := &notFoundError{fmt.Sprintf("Input %s is larger than %d bytes.", uri, m.o.MaxPayloadBytes)}
	size, known := m.o.MaxPayloadBytes, out.ContentLength != nil && *out.ContentLength >= 0
	if known {
		if *out.ContentLength > m.o.MaxPayloadBytes {
			return nil, nil, tooLarge
		}
		size = *out.ContentLength
	}
	if err := m.held.Acquire(ctx, size); err != nil {
		return nil, nil, fmt.Errorf("reading %s: %w", uri, err)
	}
	held := size
	release = func() { m.held.Release(held) }
	if known {
		// One allocation of the declared size, not ReadAll's doublings.
		b = make([]byte, size)
		_, err = io.ReadFull(out.Body, b)
	} else {
		b, err = io.ReadAll(io.LimitReader(out.Body, m.o.MaxPayloadBytes+1))
	}
	if err != nil {
		release()
		return nil, nil, fmt.Errorf("reading %s: %w", uri, err)
	}
	if int64(len(b)) > m.o.MaxPayloadBytes {
		release()
		return nil, nil, tooLarge
	}
	if n := int64(len(b)); n < held {
		m.held.Release(held - n)
		held = n
	}
	return b, release, nil
}

func (m *Manager) put(ctx context.Context, uri, contentType string, body []byte) error {
	loc, err := ParseS3URI(uri)
	if err != nil {
		return err
	}
	if m.o.S3 == nil {
		return errors.New("no S3 client is configured")
	}
	in := &s3.PutObjectInput{Bucket: aws.String(loc.Bucket), Key: aws.String(loc.Key), Body: bytes.NewReader(body)}
	if contentType != "" {
		in.ContentType = aws.String(contentType)
	}
	_, err = m.o.S3.PutObject(ctx, in)
	return err
}
