package openai

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/engine"
	"github.com/capstan-dev/capstan/internal/gateway"
)

// DefaultMaxBodyBytes bounds a request body: the engine's own limit, so a
// body the engine would refuse is refused here with OpenAI's 413 before it
// is buffered and routed.
const DefaultMaxBodyBytes = engine.MaxRequestBytes

// maxModelName bounds the model field before it is looked up.
const maxModelName = 256

// RequestIDHeader is echoed on every response and forwarded upstream.
const RequestIDHeader = "X-Request-Id"

// Options configure the front door.
type Options struct {
	Logger       *slog.Logger
	Clock        clock.Clock
	MaxBodyBytes int64
}

// Handler serves the OpenAI API over a gateway.
type Handler struct {
	gw   *gateway.Gateway
	log  *slog.Logger
	clk  clock.Clock
	max  int64
	mux  *http.ServeMux
	idPf string
	seq  atomic.Uint64 // request ids: idPf + sequence number
}

var _ http.Handler = (*Handler)(nil)

// NewHandler returns the front door for gw. Mount it at the server root (it
// answers /v1/models, /v1/chat/completions and /v1/completions only).
func NewHandler(gw *gateway.Gateway, opts Options) *Handler {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	var pf [6]byte
	_, _ = rand.Read(pf[:])
	h := &Handler{gw: gw, log: opts.Logger, clk: opts.Clock, max: opts.MaxBodyBytes, mux: http.NewServeMux(), idPf: hex.EncodeToString(pf[:])}
	h.mux.HandleFunc("GET /v1/models", h.models)
	h.mux.HandleFunc("POST /v1/chat/completions", h.generate)
	h.mux.HandleFunc("POST /v1/completions", h.generate)
	h.mux.HandleFunc("/v1/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, &apiError{status: http.StatusNotFound, typ: "invalid_request_error", code: "unknown_url",
			msg: fmt.Sprintf("Unknown request URL: %s %s.", r.Method, r.URL.Path)})
	})
	return h
}

// Paths lists the path patterns a server should route to the handler: all
// of /v1/, so a path the handler does not serve (/v1/embeddings) gets
// OpenAI's own 404 rather than another API's.
func Paths() []string {
	return []string{"/v1/"}
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id := r.Header.Get(RequestIDHeader)
	if id == "" || len(id) > 128 {
		id = h.newID()
		r.Header.Set(RequestIDHeader, id)
	}
	w.Header().Set(RequestIDHeader, id)
	h.mux.ServeHTTP(w, r)
}

// newID is the handler's random prefix (fixed per process) and a sequence
// number: unique without a read from the kernel's random source per request.
func (h *Handler) newID() string {
	var b [40]byte
	out := append(b[:0], h.idPf...)
	n := h.seq.Add(1)
	const digits = "0123456789abcdef"
	for i := 60; i >= 0; i -= 4 {
		out = append(out, digits[(n>>uint(i))&0xf])
	}
	return string(out)
}

func (h *Handler) models(w http.ResponseWriter, _ *http.Request) {
	type model struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		OwnedBy string `json:"owned_by"`
	}
	out := struct {
		Object string  `json:"object"`
		Data   []model `json:"data"`
	}{Object: "list", Data: []model{}}
	for _, ep := range h.gw.Endpoints() {
		out.Data = append(out.Data, model{ID: ep, Object: "model", OwnedBy: "capstan"})
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

// dropUpstream are request headers the front door removes before
// forwarding: the caller's credentials (the gateway's business, not the
// engine's) and Accept-Encoding (bodies pass through untouched).
var dropUpstream = []string{"Authorization", "Accept-Encoding"}

// dropHeaders are response headers not copied back: hop-by-hop, and the
// length (the server sets its own).
var dropHeaders = map[string]bool{"Connection": true, "Keep-Alive": true, "Proxy-Connection": true, "Te": true,
	"Trailer": true, "Transfer-Encoding": true, "Upgrade": true, "Content-Length": true, "Authorization": true,
	"Accept-Encoding": true}

// bodyPool holds request-body buffers: one per request in flight instead
// of io.ReadAll's growing allocations per request.
var bodyPool = sync.Pool{New: func() any { b := make([]byte, 0, 8<<10); return &b }}

// maxPooledBody: bigger buffers (long prompts) are left to the GC rather
// than kept in the pool.
const maxPooledBody = 256 << 10

// readBody reads the request body into buf, bounded by max.
func readBody(w http.ResponseWriter, r *http.Request, max int64, buf []byte) ([]byte, error) {
	if n := r.ContentLength; n > max {
		return buf, &http.MaxBytesError{Limit: max}
	} else if n >= 0 {
		// The server's body reader stops at Content-Length.
		if int64(cap(buf)) < n {
			buf = make([]byte, n)
		}
		buf = buf[:n]
		if _, err := io.ReadFull(r.Body, buf); err != nil {
			return buf, err
		}
		return buf, nil
	}
	// Chunked: read until EOF; MaxBytesReader fails past max and tells the
	// server to close the connection.
	rd := http.MaxBytesReader(w, r.Body, max)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := rd.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

func (h *Handler) generate(w http.ResponseWriter, r *http.Request) {
	start := h.clk.Now()
	id := r.Header.Get(RequestIDHeader)
	bp := bodyPool.Get().(*[]byte)
	body, err := readBody(w, r, h.max, (*bp)[:0])
	defer func() {
		// Only after the response is written: the gateway reads the body
		// while it routes and sends (and again on a retry).
		if cap(body) <= maxPooledBody {
			*bp = body[:0]
			bodyPool.Put(bp)
		}
	}()
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeError(w, &apiError{status: http.StatusRequestEntityTooLarge, typ: "invalid_request_error", code: "request_too_large",
				msg: fmt.Sprintf("Request body exceeds the %d-byte limit.", h.max)})
			return
		}
		writeError(w, &apiError{status: http.StatusBadRequest, typ: "invalid_request_error", msg: "Reading the request body failed: " + err.Error()})
		return
	}
	top, err := scanTop(body)
	var pe *paramError
	switch {
	case errors.As(err, &pe):
		writeError(w, &apiError{status: http.StatusBadRequest, typ: "invalid_request_error", param: pe.param, code: pe.code, msg: pe.msg})
		return
	case err != nil:
		writeError(w, &apiError{status: http.StatusBadRequest, typ: "invalid_request_error", msg: "We could not parse the JSON body of your request: " + err.Error()})
		return
	}
	switch {
	case top.model == "":
		writeError(w, &apiError{status: http.StatusBadRequest, typ: "invalid_request_error", param: "model",
			msg: "you must provide a model parameter"})
		return
	case len(top.model) > maxModelName:
		writeError(w, &apiError{status: http.StatusBadRequest, typ: "invalid_request_error", param: "model",
			msg: fmt.Sprintf("model name longer than %d bytes", maxModelName)})
		return
	}
	// Forward the request's own header map rather than a copy: hop-by-hop
	// headers, Content-Length and Host are never written upstream by the
	// gateway's client, so only the caller's credentials and its encoding
	// wish (bodies pass through untouched) are taken out here.
	for _, k := range dropUpstream {
		if _, ok := r.Header[k]; ok {
			delete(r.Header, k)
		}
	}
	inv := gateway.Invocation{Endpoint: top.model, Path: r.URL.Path, Header: r.Header, Body: top.cutModel(body)}
	res, err := h.gw.Invoke(r.Context(), inv)
	if err != nil {
		h.log.Warn("openai request failed", "request_id", id, "model", top.model, "err", err)
		writeError(w, toAPIError(err, top.model))
		return
	}
	defer res.Response.Body.Close()
	obs := h.gw.Measure(inv, res)
	for k, vs := range res.Response.Header {
		if !dropHeaders[k] {
			w.Header()[k] = vs
		}
	}
	w.Header().Set("X-Capstan-Backend", res.BackendID)
	w.WriteHeader(res.Response.StatusCode)
	streaming := strings.HasPrefix(res.Response.Header.Get("Content-Type"), "text/event-stream")
	if streaming {
		err = h.stream(w, res.Response.Body, obs)
	} else {
		err = obs.Copy(w, res.Response.Body)
	}
	if streaming && errors.Is(err, errUpstream) && r.Context().Err() == nil {
		// The replica died mid-stream: end the stream with an error event
		// (what OpenAI SDKs raise) rather than a silent truncation.
		_, _ = io.WriteString(w, "data: {\"error\":{\"message\":\"The model server failed mid-stream.\",\"type\":\"server_error\",\"param\":null,\"code\":\"upstream_error\"}}\n\n")
		_ = http.NewResponseController(w).Flush()
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		h.log.Warn("openai response interrupted", "request_id", id, "model", top.model, "backend", res.BackendID, "err", err)
	}
	h.log.Debug("openai request", "request_id", id, "model", top.model, "variant", res.Variant, "backend", res.BackendID,
		"status", res.Response.StatusCode, "duration", clock.Since(h.clk, start))
}

var errUpstream = errors.New("read from backend")

// bufPool holds stream relay buffers: one per stream in flight.
var bufPool = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// stream passes server-sent events through as they arrive, flushing after
// every read; the gateway times the token-carrying events.
func (h *Handler) stream(w http.ResponseWriter, body io.Reader, obs *gateway.Observer) error {
	rc := http.NewResponseController(w)
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	buf := *bp
	for {
		n, err := body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return fmt.Errorf("write to client: %w", werr)
			}
			if ferr := rc.Flush(); ferr != nil {
				return fmt.Errorf("flush to client: %w", ferr)
			}
			obs.StreamChunk(buf[:n])
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%w: %w", errUpstream, err)
		}
	}
}

// apiError is an OpenAI error response.
type apiError struct {
	status           int
	typ, code, param string
	msg              string
	retryAfter       time.Duration
}

func (e *apiError) Error() string { return e.msg }

// toAPIError is the one mapping from gateway errors to OpenAI errors.
func toAPIError(err error, model string) *apiError {
	var qf *gateway.QueueFullError
	var un *gateway.UnavailableError
	var ae *gateway.ActivationError
	switch {
	case errors.Is(err, gateway.ErrUnknownEndpoint):
		return &apiError{status: http.StatusNotFound, typ: "invalid_request_error", code: "model_not_found", param: "model",
			msg: fmt.Sprintf("The model `%s` does not exist or you do not have access to it.", model)}
	case errors.As(err, &qf):
		return &apiError{status: http.StatusTooManyRequests, typ: "requests", code: "rate_limit_exceeded", retryAfter: qf.RetryAfter,
			msg: fmt.Sprintf("Too many requests queued for model `%s`; retry later.", model)}
	case errors.As(err, &un) && un.Reason == gateway.UnavailableExpired:
		return &apiError{status: http.StatusServiceUnavailable, typ: "server_error", code: "model_unavailable",
			msg: fmt.Sprintf("The capacity reservation of model `%s` has expired; update its endpoint to a new configuration.", model)}
	case errors.As(err, &un):
		return &apiError{status: http.StatusServiceUnavailable, typ: "server_error", code: "model_unavailable",
			msg: fmt.Sprintf("Model `%s` is unavailable: %s.", model, un.Reason)}
	case errors.As(err, &ae) && ae.Overflow:
		return &apiError{status: http.StatusServiceUnavailable, typ: "server_error", code: "model_activating", retryAfter: time.Second,
			msg: fmt.Sprintf("Model `%s` is scaling up from zero and %d requests are already waiting for it; retry later.", model, ae.MaxHeld)}
	case errors.As(err, &ae):
		return &apiError{status: http.StatusServiceUnavailable, typ: "server_error", code: "model_activating", retryAfter: time.Second,
			msg: fmt.Sprintf("Model `%s` is scaling up from zero and no replica became ready within %s; retry later.", model, ae.Timeout)}
	case errors.Is(err, gateway.ErrNoBackend):
		return &apiError{status: http.StatusServiceUnavailable, typ: "server_error", code: "no_backend_available",
			msg: fmt.Sprintf("No replica of model `%s` can take the request now.", model)}
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return &apiError{status: 499, typ: "server_error", code: "request_cancelled", msg: "The request was cancelled."}
	default:
		return &apiError{status: http.StatusBadGateway, typ: "server_error", code: "upstream_error", msg: "The model server failed to answer."}
	}
}

func writeError(w http.ResponseWriter, e *apiError) {
	body := struct {
		Error struct {
			Message string  `json:"message"`
			Type    string  `json:"type"`
			Param   *string `json:"param"`
			Code    *string `json:"code"`
		} `json:"error"`
	}{}
	body.Error.Message, body.Error.Type = e.msg, e.typ
	if e.param != "" {
		body.Error.Param = &e.param
	}
	if e.code != "" {
		body.Error.Code = &e.code
	}
	w.Header().Set("Content-Type", "application/json")
	if e.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int((e.retryAfter+time.Second-1)/time.Second)))
	}
	w.WriteHeader(e.status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false) // messages quote ranges such as ">= 1"
	_ = enc.Encode(body)
}
