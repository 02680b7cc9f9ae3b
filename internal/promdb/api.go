package promdb

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/util/annotations"

	"github.com/capstan-dev/capstan/internal/clock"
)

// Path is where capstan serve mounts the API: a Prometheus datasource's URL
// is the server's base URL + Path (without the trailing slash).
const Path = "/prometheus/"

// Limits of the API, enforced on every request.
const (
	// maxPoints per series of a range query, as Prometheus.
	maxPoints = 11000
	// maxQueryBytes bounds a PromQL expression.
	maxQueryBytes = 64 << 10
	// maxFormBytes bounds a POSTed form.
	maxFormBytes = 1 << 20
	// maxSamples bounds the samples one query holds in memory at once.
	maxSamples = 2_000_000
	// queryTimeout bounds one query; a request's timeout may lower it.
	queryTimeout = 30 * time.Second
	// maxConcurrent queries run at once; more wait for a slot.
	maxConcurrent = 4
	// maxMatchers is the most match[] selectors of a series or labels call.
	maxMatchers = 32
	// lookbackDelta is how far back an instant selector looks, as Prometheus.
	lookbackDelta = 5 * time.Minute
)

// API serves the read endpoints of Prometheus' HTTP API over a DB
// (https://prometheus.io/docs/prometheus/latest/querying/api/): query,
// query_range, labels, label/<name>/values, series and
// status/buildinfo, under Path + "api/v1/". A request without time, start
// or end reads the injected clock's now.
type API struct {
	db     *DB
	clock  clock.Clock
	engine *promql.Engine
	parser parser.Parser
	slots  chan struct{}
}

// NewAPI serves db's samples, reading now from clk.
func NewAPI(db *DB, clk clock.Clock) *API {
	return &API{
		db:    db,
		clock: clk,
		engine: promql.NewEngine(promql.EngineOpts{
			MaxSamples:    maxSamples,
			Timeout:       queryTimeout,
			LookbackDelta: lookbackDelta,
		}),
		parser: parser.NewParser(parser.Options{}),
		slots:  make(chan struct{}, maxConcurrent),
	}
}

// Handler serves the API's endpoints under Path.
func (a *API) Handler() http.Handler {
	mux := http.NewServeMux()
	v1 := Path + "api/v1/"
	mux.HandleFunc(v1+"query", a.query)
	mux.HandleFunc(v1+"query_range", a.queryRange)
	mux.HandleFunc(v1+"labels", a.labelNames)
	mux.HandleFunc("GET "+v1+"label/{name}/values", a.labelValues)
	mux.HandleFunc(v1+"series", a.series)
	mux.HandleFunc("GET "+v1+"status/buildinfo", func(w http.ResponseWriter, _ *http.Request) {
		writeData(w, map[string]string{"version": "capstan", "application": "capstan metrics store"}, nil)
	})
	mux.HandleFunc(Path, func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "not_found", fmt.Errorf("%s %s: capstan's metrics store serves only the read API (query, query_range, labels, label/<name>/values, series)", r.Method, r.URL.Path))
	})
	return mux
}

// apiError is an error worded for the API's errorType.
type apiError struct {
	typ  string
	code int
	err  error
}

func (e *apiError) Error() string { return e.err.Error() }

func badData(format string, args ...any) error {
	return &apiError{typ: "bad_data", code: http.StatusBadRequest, err: fmt.Errorf(format, args...)}
}

// form parses the request's parameters (query string and, for POST, a
// form body of at most maxFormBytes).
func form(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodGet && r.Method != http.MethodPost {
		return &apiError{typ: "bad_data", code: http.StatusMethodNotAllowed, err: fmt.Errorf("method %s: use GET or POST", r.Method)}
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		return badData("parse parameters: %v", err)
	}
	return nil
}

func (a *API) query(w http.ResponseWriter, r *http.Request) {
	qs, err := queryForm(w, r)
	if err != nil {
		fail(w, err)
		return
	}
	ts := a.clock.Now()
	if v := r.Form.Get("time"); v != "" {
		if ts, err = parseTime("time", v); err != nil {
			fail(w, err)
			return
		}
	}
	a.run(w, r, func(ctx context.Context) (promql.Query, error) {
		return a.engine.NewInstantQuery(ctx, a.db, nil, qs, ts)
	})
}

func (a *API) queryRange(w http.ResponseWriter, r *http.Request) {
	qs, err := queryForm(w, r)
	if err != nil {
		fail(w, err)
		return
	}
	start, err := parseTime("start", r.Form.Get("start"))
	if err != nil {
		fail(w, err)
		return
	}
	end, err := parseTime("end", r.Form.Get("end"))
	if err != nil {
		fail(w, err)
		return
	}
	if end.Before(start) {
		fail(w, badData("invalid parameter \"end\": end timestamp must not be before start time"))
		return
	}
	step, err := parseDuration("step", r.Form.Get("step"))
	if err != nil {
		fail(w, err)
		return
	}
	if step <= 0 {
		fail(w, badData("invalid parameter \"step\": zero or negative query resolution step widths are not accepted. Try a positive integer"))
		return
	}
	if end.Sub(start)/step > maxPoints {
		fail(w, badData("exceeded maximum resolution of %d points per timeseries. Try decreasing the query resolution (?step=XX)", maxPoints))
		return
	}
	a.run(w, r, func(ctx context.Context) (promql.Query, error) {
		return a.engine.NewRangeQuery(ctx, a.db, nil, qs, start, end, step)
	})
}

// queryForm parses the request's parameters and returns its query.
func queryForm(w http.ResponseWriter, r *http.Request) (string, error) {
	if err := form(w, r); err != nil {
		return "", err
	}
	qs := r.Form.Get("query")
	switch {
	case qs == "":
		return "", badData("invalid parameter \"query\": missing")
	case len(qs) > maxQueryBytes:
		return "", badData("invalid parameter \"query\": %d bytes, at most %d", len(qs), maxQueryBytes)
	}
	return qs, nil
}

// run evaluates one query in a slot, within the request's timeout (at most
// queryTimeout), and writes its result.
func (a *API) run(w http.ResponseWriter, r *http.Request, newQuery func(context.Context) (promql.Query, error)) {
	timeout := queryTimeout
	if v := r.Form.Get("timeout"); v != "" {
		d, err := parseDuration("timeout", v)
		if err != nil {
			fail(w, err)
			return
		}
		if d > 0 && d < timeout {
			timeout = d
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	select {
	case a.slots <- struct{}{}:
		defer func() { <-a.slots }()
	case <-ctx.Done():
		fail(w, &apiError{typ: "timeout", code: http.StatusServiceUnavailable, err: errors.New("query timed out waiting for a free slot")})
		return
	}
	q, err := newQuery(ctx)
	if err != nil {
		fail(w, queryError(err))
		return
	}
	defer q.Close()
	res := q.Exec(ctx)
	if res.Err != nil {
		fail(w, queryError(res.Err))
		return
	}
	writeData(w, encodeValue(res.Value), res.Warnings)
}

// queryError maps the engine's errors to the API's error types.
func queryError(err error) error {
	var perr parser.ParseErrors
	var perr1 *parser.ParseErr
	var canceled promql.ErrQueryCanceled
	var timeout promql.ErrQueryTimeout
	var tooMany promql.ErrTooManySamples
	var stor promql.ErrStorage
	switch {
	case errors.As(err, &perr), errors.As(err, &perr1):
		return badData("invalid parameter \"query\": %v", err)
	case errors.As(err, &canceled), errors.Is(err, context.Canceled):
		return &apiError{typ: "canceled", code: http.StatusServiceUnavailable, err: err}
	case errors.As(err, &timeout), errors.Is(err, context.DeadlineExceeded):
		return &apiError{typ: "timeout", code: http.StatusServiceUnavailable, err: err}
	case errors.As(err, &tooMany):
		return &apiError{typ: "execution", code: http.StatusUnprocessableEntity, err: err}
	case errors.As(err, &stor):
		return &apiError{typ: "internal", code: http.StatusInternalServerError, err: err}
	}
	return &apiError{typ: "execution", code: http.StatusUnprocessableEntity, err: err}
}

// selection is the matchers and time range of a labels or series call.
func (a *API) selection(w http.ResponseWriter, r *http.Request, required bool) ([][]*labels.Matcher, int64, int64, error) {
	if err := form(w, r); err != nil {
		return nil, 0, 0, err
	}
	raw := r.Form["match[]"]
	if required && len(raw) == 0 {
		return nil, 0, 0, badData("no match[] parameter provided")
	}
	if len(raw) > maxMatchers {
		return nil, 0, 0, badData("%d match[] parameters, at most %d", len(raw), maxMatchers)
	}
	var sets [][]*labels.Matcher
	for _, s := range raw {
		if len(s) > maxQueryBytes {
			return nil, 0, 0, badData("invalid parameter \"match[]\": %d bytes, at most %d", len(s), maxQueryBytes)
		}
		ms, err := a.parser.ParseMetricSelector(s)
		if err != nil {
			return nil, 0, 0, badData("invalid parameter \"match[]\": %v", err)
		}
		sets = append(sets, ms)
	}
	if len(sets) == 0 {
		sets = [][]*labels.Matcher{nil}
	}
	mint, maxt := int64(math.MinInt64), int64(math.MaxInt64)
	if v := r.Form.Get("start"); v != "" {
		t, err := parseTime("start", v)
		if err != nil {
			return nil, 0, 0, err
		}
		mint = t.UnixMilli()
	}
	if v := r.Form.Get("end"); v != "" {
		t, err := parseTime("end", v)
		if err != nil {
			return nil, 0, 0, err
		}
		maxt = t.UnixMilli()
	}
	return sets, mint, maxt, nil
}

func (a *API) labelNames(w http.ResponseWriter, r *http.Request) {
	sets, mint, maxt, err := a.selection(w, r, false)
	if err != nil {
		fail(w, err)
		return
	}
	q, _ := a.db.Querier(mint, maxt)
	seen := map[string]bool{}
	for _, ms := range sets {
		names, _, _ := q.LabelNames(r.Context(), nil, ms...)
		for _, n := range names {
			seen[n] = true
		}
	}
	writeData(w, sortedKeys(seen), nil)
}

func (a *API) labelValues(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if !model.UTF8Validation.IsValidLabelName(name) {
		fail(w, badData("invalid label name: %q", name))
		return
	}
	sets, mint, maxt, err := a.selection(w, r, false)
	if err != nil {
		fail(w, err)
		return
	}
	q, _ := a.db.Querier(mint, maxt)
	seen := map[string]bool{}
	for _, ms := range sets {
		vals, _, _ := q.LabelValues(r.Context(), name, nil, ms...)
		for _, v := range vals {
			seen[v] = true
		}
	}
	writeData(w, sortedKeys(seen), nil)
}

func (a *API) series(w http.ResponseWriter, r *http.Request) {
	sets, mint, maxt, err := a.selection(w, r, true)
	if err != nil {
		fail(w, err)
		return
	}
	q, _ := a.db.Querier(mint, maxt)
	seen := map[uint64]bool{}
	out := []map[string]string{}
	for _, ms := range sets {
		ss := q.Select(r.Context(), true, nil, ms...)
		for ss.Next() {
			l := ss.At().Labels()
			if h := l.Hash(); !seen[h] {
				seen[h] = true
				out = append(out, l.Map())
			}
		}
	}
	writeData(w, out, nil)
}

// parseTime reads a timestamp as Prometheus does: Unix seconds (a float) or
// RFC 3339, within years 0001–9999.
func parseTime(param, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, badData("invalid parameter %q: missing", param)
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		if math.IsNaN(f) || f < -62135596800 || f > 253402300799 {
			return time.Time{}, badData("invalid parameter %q: %q is out of range", param, s)
		}
		sec, frac := math.Modf(f)
		return time.Unix(int64(sec), int64(math.Round(frac*1e9))).UTC(), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	return time.Time{}, badData("invalid parameter %q: cannot parse %q to a valid timestamp", param, s)
}

// parseDuration reads a duration as Prometheus does: seconds (a float) or
// a Prometheus duration (30s, 5m, 1h30m), at most 10 years.
func parseDuration(param, s string) (time.Duration, error) {
	const most = 10 * 365 * 24 * time.Hour
	if s == "" {
		return 0, badData("invalid parameter %q: missing", param)
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		if math.IsNaN(f) || f < 0 || f > most.Seconds() {
			return 0, badData("invalid parameter %q: %q is out of range", param, s)
		}
		return time.Duration(f * float64(time.Second)), nil
	}
	d, err := model.ParseDuration(s)
	if err != nil || time.Duration(d) > most {
		return 0, badData("invalid parameter %q: cannot parse %q to a valid duration", param, s)
	}
	return time.Duration(d), nil
}

// The API's JSON shapes.
type (
	response struct {
		Status    string   `json:"status"`
		Data      any      `json:"data,omitempty"`
		ErrorType string   `json:"errorType,omitempty"`
		Error     string   `json:"error,omitempty"`
		Warnings  []string `json:"warnings,omitempty"`
	}
	queryData struct {
		ResultType string `json:"resultType"`
		Result     any    `json:"result"`
	}
	vectorSample struct {
		Metric map[string]string `json:"metric"`
		Value  point             `json:"value"`
	}
	matrixSeries struct {
		Metric map[string]string `json:"metric"`
		Values []point           `json:"values"`
	}
	// point is [unix seconds, "value"].
	point struct {
		t int64 // milliseconds
		v string
	}
)

func (p point) MarshalJSON() ([]byte, error) {
	return []byte("[" + strconv.FormatFloat(float64(p.t)/1000, 'f', -1, 64) + "," + strconv.Quote(p.v) + "]"), nil
}

func formatValue(v float64) string {
	switch {
	case math.IsNaN(v):
		return "NaN"
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

func encodeValue(v parser.Value) queryData {
	switch x := v.(type) {
	case promql.Vector:
		out := make([]vectorSample, 0, len(x))
		for _, s := range x {
			if s.H != nil {
				continue // capstan's store holds no native histograms
			}
			out = append(out, vectorSample{Metric: s.Metric.Map(), Value: point{s.T, formatValue(s.F)}})
		}
		return queryData{ResultType: "vector", Result: out}
	case promql.Matrix:
		out := make([]matrixSeries, 0, len(x))
		for _, s := range x {
			ps := make([]point, 0, len(s.Floats))
			for _, f := range s.Floats {
				ps = append(ps, point{f.T, formatValue(f.F)})
			}
			out = append(out, matrixSeries{Metric: s.Metric.Map(), Values: ps})
		}
		return queryData{ResultType: "matrix", Result: out}
	case promql.Scalar:
		return queryData{ResultType: "scalar", Result: point{x.T, formatValue(x.V)}}
	case promql.String:
		return queryData{ResultType: "string", Result: point{x.T, x.V}}
	}
	return queryData{ResultType: "vector", Result: []vectorSample{}}
}

func writeData(w http.ResponseWriter, data any, warnings annotations.Annotations) {
	resp := response{Status: "success", Data: data}
	for _, e := range warnings {
		resp.Warnings = append(resp.Warnings, e.Error())
	}
	writeJSON(w, http.StatusOK, resp)
}

// fail writes err in the API's error shape: an apiError with its type and
// status, anything else as an internal error.
func fail(w http.ResponseWriter, err error) {
	var ae *apiError
	if errors.As(err, &ae) {
		writeError(w, ae.code, ae.typ, ae.err)
		return
	}
	writeError(w, http.StatusInternalServerError, "internal", err)
}

func writeError(w http.ResponseWriter, code int, typ string, err error) {
	writeJSON(w, code, response{Status: "error", ErrorType: typ, Error: err.Error()})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

var _ storage.Queryable = (*DB)(nil)
