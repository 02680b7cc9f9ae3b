package bench

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/capstan-dev/capstan/internal/clock"
)

// Deps are what a run talks to. Zero values get real defaults.
type Deps struct {
	Clock clock.Clock
	HTTP  *http.Client
	// Out receives the final table; Progress the live progress (nil: none).
	Out      io.Writer
	Progress io.Writer
	// ProgressTTY redraws one progress line in place instead of printing lines.
	ProgressTTY bool
	// NewClient overrides the client per target (tests, benchmarks).
	NewClient func(t Target) (Client, error)
	Logger    *slog.Logger
}

// StageResult is one stage's summaries, one per target in --compare order.
type StageResult struct {
	Name        string    `json:"name"`
	Arrival     string    `json:"arrival"`
	Rate        float64   `json:"rate,omitempty"`
	Concurrency int       `json:"concurrency,omitempty"`
	Summaries   []Summary `json:"summaries"`
	// Ratios are each later target's figures divided by the first target's.
	Ratios []Ratio `json:"ratios,omitempty"`
}

// Result is a whole run: its configuration, the workload and every summary.
type Result struct {
	Config         Config            `json:"config"`
	WorkloadName   string            `json:"workload_name"`
	WorkloadParams map[string]string `json:"workload_params"`
	StartedAt      time.Time         `json:"started_at"`
	Stages         []StageResult     `json:"stages"`
	Records        []Record          `json:"records,omitempty"`
}

// Run executes the benchmark cfg describes and writes its outputs.
func Run(ctx context.Context, cfg Config, deps Deps) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if deps.Clock == nil {
		deps.Clock = clock.Real{}
	}
	if deps.HTTP == nil {
		deps.HTTP = NewHTTPClient()
	}
	if deps.Out == nil {
		deps.Out = io.Discard
	}
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	wl, err := NewWorkload(cfg.Workload, cfg.Seed)
	if err != nil {
		return nil, err
	}
	clients := make([]Client, len(cfg.Targets))
	for i, t := range cfg.Targets {
		if clients[i], err = newClient(cfg, deps, t); err != nil {
			return nil, err
		}
	}
	res := &Result{Config: cfg, WorkloadName: wl.Name(), WorkloadParams: wl.Params(), StartedAt: deps.Clock.Now()}

	stages := []stage{}
	switch cfg.Arrival {
	case ArrivalSweep:
		stages = append(stages,
			stage{Name: "synchronous", Arrival: ArrivalConcurrency, Concurrency: 1},
			stage{Name: "throughput", Arrival: ArrivalConcurrency, Concurrency: cfg.MaxConcurrency})
	case ArrivalConcurrency:
		stages = append(stages, stage{Name: "concurrency", Arrival: ArrivalConcurrency, Concurrency: cfg.Concurrency})
	case ArrivalTrace:
		stages = append(stages, stage{Name: "trace-" + cfg.TraceResolved.Name, Arrival: ArrivalTrace, Rate: cfg.Rate})
	default:
		stages = append(stages, stage{Name: cfg.Arrival, Arrival: cfg.Arrival, Rate: cfg.Rate})
	}
	for i := 0; i < len(stages); i++ {
		st := stages[i]
		deps.Logger.InfoContext(ctx, "bench stage", "stage", st.String())
		sr, recs, err := runStage(ctx, cfg, deps, wl, clients, st, i)
		if err != nil {
			return res, err
		}
		res.Stages = append(res.Stages, sr)
		if cfg.Detailed {
			res.Records = append(res.Records, recs...)
		}
		// A sweep's rates come from what the first target achieved
		// synchronously and at full concurrency.
		if cfg.Arrival == ArrivalSweep && i == 1 {
			lo, hi := res.Stages[0].Summaries[0].RequestsPerSecond, sr.Summaries[0].RequestsPerSecond
			for k, r := range sweepRates(lo, hi, cfg.SweepPoints-2) {
				stages = append(stages, stage{Name: "rate-" + strconv.Itoa(k+1), Arrival: ArrivalConstant, Rate: r})
			}
		}
		if ctx.Err() != nil {
			break
		}
	}
	printTable(deps.Out, res)
	if err := writeOutputs(cfg, res); err != nil {
		return res, err
	}
	return res, ctx.Err()
}

func newClient(cfg Config, deps Deps, t Target) (Client, error) {
	if deps.NewClient != nil {
		return deps.NewClient(t)
	}
	switch cfg.API {
	case APISageMaker:
		creds, region, err := SageMakerCredentialsFromEnv()
		if err != nil {
			return nil, err
		}
		return NewSageMakerClient(deps.HTTP, deps.Clock, t.URL, cfg.Stream, creds, region), nil
	default:
		return &OpenAIClient{HTTP: deps.HTTP, Clock: deps.Clock, BaseURL: t.URL, Chat: cfg.API == APIChat, Stream: cfg.Stream}, nil
	}
}

// targetRun is one target's state within a stage.
type targetRun struct {
	client   Client
	started  atomic.Int64 // requests started (the --requests bound)
	done     atomic.Int64
	failed   atomic.Int64
	inflight atomic.Int64
	tickets  atomic.Int64 // closed loop: next ticket
	sem      chan struct{}
	mu       sync.Mutex
	recs     []Record
}

type stageRun struct {
	cfg     Config
	deps    Deps
	wl      Workload
	st      stage
	idx     int
	start   time.Time
	targets []*targetRun
	fpMu    sync.Mutex
	fp      []uint64 // per-ticket content hash, target 0's tickets
	multi   bool     // jobs are multi-turn sessions
	wg      sync.WaitGroup
}

func runStage(ctx context.Context, cfg Config, deps Deps, wl Workload, clients []Client, st stage, idx int) (StageResult, []Record, error) {
	sr := &stageRun{cfg: cfg, deps: deps, wl: wl, st: st, idx: idx}
	_, sr.multi = wl.(*multiTurnWorkload)
	for _, c := range clients {
		tr := &targetRun{client: c}
		if cfg.MaxConcurrency > 0 && st.Arrival != ArrivalConcurrency {
			tr.sem = make(chan struct{}, cfg.MaxConcurrency)
		}
		sr.targets = append(sr.targets, tr)
	}
	var before []metricSample
	if cfg.ScrapeMetrics {
		before = sr.scrapeAll(ctx)
	}
	sr.start = deps.Clock.Now()
	stopProgress := sr.progress(ctx)
	if st.Arrival == ArrivalConcurrency {
		sr.closedLoop(ctx)
	} else {
		sr.openLoop(ctx)
	}
	sr.wg.Wait()
	stopProgress()
	var after []metricSample
	if cfg.ScrapeMetrics {
		after = sr.scrapeAll(ctx)
	}
	fp := sr.fingerprint()
	res := StageResult{Name: st.Name, Arrival: st.Arrival, Rate: st.Rate, Concurrency: st.Concurrency}
	var all []Record
	for i, tr := range sr.targets {
		s := summarize(tr.recs, cfg.SLO)
		s.Target, s.TargetURL = cfg.Targets[i].Name, cfg.Targets[i].URL
		s.Stage, s.Arrival, s.OfferedRate, s.Concurrency = st.Name, st.Arrival, st.Rate, st.Concurrency
		s.WorkloadFingerprint = fp
		if before != nil && after != nil {
			s.Server = diffMetrics(before[i], after[i])
		}
		if st.Arrival == ArrivalTrace {
			s.Phases = phaseSummaries(*cfg.TraceResolved, tr.recs, cfg.SLO)
		}
		res.Summaries = append(res.Summaries, s)
		all = append(all, tr.recs...)
	}
	res.Ratios = ratios(res.Summaries)
	return res, all, nil
}

func (sr *stageRun) scrapeAll(ctx context.Context) []metricSample {
	out := make([]metricSample, len(sr.cfg.Targets))
	for i, t := range sr.cfg.Targets {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		m, err := scrape(sctx, sr.deps.HTTP, t.URL)
		cancel()
		if err != nil {
			sr.deps.Logger.Debug("metrics not scraped", "target", t.Name, "err", err)
			continue
		}
		out[i] = m
	}
	return out
}

// elapsed is time since the stage started on the run's clock.
func (sr *stageRun) elapsed() time.Duration { return sr.deps.Clock.Now().Sub(sr.start) }

// recordTicket hashes a ticket's content (and arrival offset) into the
// stage's workload fingerprint.
func (sr *stageRun) recordTicket(ticket int, off time.Duration, job *Job) {
	h := xxhash.New()
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(off))
	_, _ = h.Write(b[:])
	for _, it := range job.Items {
		_, _ = h.WriteString(it.Prompt)
		binary.LittleEndian.PutUint64(b[:], uint64(it.OutputTokens))
		_, _ = h.Write(b[:])
		_, _ = h.WriteString(it.SessionID)
	}
	sr.fpMu.Lock()
	for len(sr.fp) <= ticket {
		sr.fp = append(sr.fp, 0)
	}
	sr.fp[ticket] = h.Sum64()
	sr.fpMu.Unlock()
}

func (sr *stageRun) fingerprint() string {
	h := xxhash.New()
	var b [8]byte
	for _, v := range sr.fp {
		binary.LittleEndian.PutUint64(b[:], v)
		_, _ = h.Write(b[:])
	}
	return fmt.Sprintf("%016x/%d", h.Sum64(), len(sr.fp))
}

// openLoop fires jobs at the schedule's offsets, each to every target, the
// target order rotating per arrival so none is systematically first.
func (sr *stageRun) openLoop(ctx context.Context) {
	var sched arrivals = rateSchedule{newSchedule(sr.st.Arrival, sr.st.Rate, sr.cfg.Seed, sr.idx)}
	if sr.st.Arrival == ArrivalTrace {
		sched = newTraceSchedule(*sr.cfg.TraceResolved, sr.cfg.Seed, sr.idx)
	}
	n := len(sr.targets)
	for ticket := 0; ; ticket++ {
		off, ok := sched.next()
		if !ok {
			return
		}
		if sr.cfg.Duration > 0 && off >= sr.cfg.Duration {
			return
		}
		// Single-request jobs are bounded by ticket, exactly; sessions by the
		// requests their turns started.
		if sr.cfg.Requests > 0 && ((!sr.multi && ticket >= sr.cfg.Requests) || (sr.multi && sr.allStarted())) {
			return
		}
		if wait := off - sr.elapsed(); wait > 0 {
			if clock.Sleep(ctx, sr.deps.Clock, wait) != nil {
				return
			}
		}
		if ctx.Err() != nil {
			return
		}
		job := sr.wl.Job(ticket)
		for k := range n {
			ti := (ticket + k) % n
			sr.wg.Add(1)
			go func() {
				defer sr.wg.Done()
				sr.runJob(ctx, ti, ticket, off, &job)
			}()
		}
	}
}

func (sr *stageRun) allStarted() bool {
	for _, tr := range sr.targets {
		if tr.started.Load() < int64(sr.cfg.Requests) {
			return false
		}
	}
	return true
}

// closedLoop runs Concurrency workers per target, each taking the next ticket
// as soon as its previous job finished.
func (sr *stageRun) closedLoop(ctx context.Context) {
	for ti, tr := range sr.targets {
		for range sr.st.Concurrency {
			sr.wg.Add(1)
			go func() {
				defer sr.wg.Done()
				for ctx.Err() == nil {
					if sr.cfg.Duration > 0 && sr.elapsed() >= sr.cfg.Duration {
						return
					}
					if sr.cfg.Requests > 0 && tr.started.Load() >= int64(sr.cfg.Requests) {
						return
					}
					ticket := int(tr.tickets.Add(1) - 1)
					if !sr.multi && sr.cfg.Requests > 0 && ticket >= sr.cfg.Requests {
						return
					}
					job := sr.wl.Job(ticket)
					if !sr.runJob(ctx, ti, ticket, 0, &job) {
						return
					}
				}
			}()
		}
	}
}

// runJob sends a job's items in order to one target. It returns false once
// the stage's bound is reached.
func (sr *stageRun) runJob(ctx context.Context, ti, ticket int, off time.Duration, job *Job) bool {
	tr := sr.targets[ti]
	for k, it := range job.Items {
		if it.ThinkTime > 0 {
			if clock.Sleep(ctx, sr.deps.Clock, it.ThinkTime) != nil {
				return false
			}
			// No new turns once the stage's time is up.
			if sr.cfg.Duration > 0 && sr.elapsed() >= sr.cfg.Duration {
				return false
			}
		}
		if sr.cfg.Requests > 0 && tr.started.Add(1) > int64(sr.cfg.Requests) {
			return false
		} else if sr.cfg.Requests == 0 {
			tr.started.Add(1)
		}
		if k == 0 && ti == 0 {
			sr.recordTicket(ticket, off, job)
		}
		if tr.sem != nil {
			select {
			case tr.sem <- struct{}{}:
			case <-ctx.Done():
				return false
			}
		}
		rec := sr.do(ctx, ti, ticket, off, &it)
		if tr.sem != nil {
			<-tr.sem
		}
		if !rec.OK() && it.SessionID != "" {
			return true // a broken session ends; its later turns would send a history the server never answered
		}
	}
	return true
}

// do sends one request; off is its job's scheduled arrival (0 closed-loop).
func (sr *stageRun) do(ctx context.Context, ti, ticket int, off time.Duration, it *Item) Record {
	tr := sr.targets[ti]
	rec := Record{Target: ti, Stage: sr.idx, Ticket: ticket, Session: it.SessionID, Turn: it.Turn, Start: sr.elapsed(), Scheduled: off}
	req := Request{Item: it, Model: sr.cfg.Model, RequestID: requestID(ti, sr.idx, ticket, it.Turn)}
	rctx, cancel := context.WithTimeout(ctx, sr.cfg.Timeout)
	tr.inflight.Add(1)
	tr.client.Do(rctx, &req, &rec)
	tr.inflight.Add(-1)
	cancel()
	tr.done.Add(1)
	if !rec.OK() {
		tr.failed.Add(1)
	}
	tr.mu.Lock()
	tr.recs = append(tr.recs, rec)
	tr.mu.Unlock()
	return rec
}
