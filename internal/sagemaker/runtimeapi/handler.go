package runtimeapi

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"

	"github.com/capstan-dev/capstan/internal/awsauth"
	"github.com/capstan-dev/capstan/internal/gateway"
)

// Header names of the runtime protocol (reference §1.2).
const (
	hdrAccept           = "Accept"
	hdrStreamAccept     = "X-Amzn-SageMaker-Accept"
	hdrCustomAttributes = "X-Amzn-SageMaker-Custom-Attributes"
	hdrTargetVariant    = "X-Amzn-SageMaker-Target-Variant"
	hdrInferenceID      = "X-Amzn-SageMaker-Inference-Id"
	hdrInvokedVariant   = "X-Amzn-Invoked-Production-Variant"
	hdrStreamCType      = "X-Amzn-SageMaker-Content-Type"
	hdrRequestID        = "X-Amzn-RequestId"

	eventStreamType = "application/vnd.amazon.eventstream"
)

// DefaultMaxBodyBytes is the modelled limit on the request Body.
const DefaultMaxBodyBytes = 6_291_456

// maxErrorBody bounds how much of an engine error response is read.
const maxErrorBody = 64 << 10

// Options configure the handler.
type Options struct {
	AccountID, Region string
	MaxBodyBytes      int64 // default DefaultMaxBodyBytes
	Logger            *slog.Logger
}

type handler struct {
	gw   *gateway.Gateway
	opts Options
	log  *slog.Logger
}

// NewHandler serves POST /endpoints/{name}/invocations and
// POST /endpoints/{name}/invocations-response-stream through gw.
func NewHandler(gw *gateway.Gateway, opts Options) http.Handler {
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.AccountID == "" {
		opts.AccountID = "000000000000"
	}
	if opts.Region == "" {
		opts.Region = "us-east-1"
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	h := &handler{gw: gw, opts: opts, log: opts.Logger}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /endpoints/{name}/invocations", func(w http.ResponseWriter, r *http.Request) { h.serve(w, r, false) })
	mux.HandleFunc("POST /endpoints/{name}/invocations-response-stream", func(w http.ResponseWriter, r *http.Request) { h.serve(w, r, true) })
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(hdrRequestID, newRequestID())
		writeWire(w, wireError{http.StatusNotFound, codeUnknownOperation,
			wireBody{Message: fmt.Sprintf("No SageMaker Runtime operation for %s %s.", r.Method, r.URL.Path)}})
	})
	return mux
}

func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

func (h *handler) serve(w http.ResponseWriter, r *http.Request, stream bool) {
	reqID := newRequestID()
	w.Header().Set(hdrRequestID, reqID)
	name := r.PathValue("name")
	ec := errContext{endpoint: name, variant: r.Header.Get(hdrTargetVariant), accountID: h.opts.AccountID, region: h.opts.Region}
	log := h.log.With("request_id", reqID, "endpoint", name, "stream", stream)
	fail := func(err error) {
		if r.Context().Err() != nil {
			log.Debug("client went away before the answer", "err", err)
			return
		}
		we := toWire(err, ec)
		if we.status >= 500 {
			log.Warn("invocation failed", "code", we.code, "err", err)
		} else {
			log.Debug("invocation rejected", "code", we.code, "err", err)
		}
		writeWire(w, we)
	}

	inv, err := h.parse(w, r, name, stream)
	if err != nil {
		fail(err)
		return
	}
	res, err := h.gw.Invoke(r.Context(), inv)
	if err != nil {
		fail(err)
		return
	}
	resp := res.Response
	defer resp.Body.Close()
	// The same recorder as the OpenAI door's: time to first byte now (an
	// engine's error answer too), then tokens as the body is relayed.
	obs := h.gw.Measure(inv, res)
	log = log.With("variant", res.Variant, "backend", res.BackendID)
	if resp.StatusCode >= 400 {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		fail(&modelError{variant: res.Variant, status: resp.StatusCode, body: string(bytes.TrimSpace(body))})
		return
	}
	out := w.Header()
	out.Set(hdrInvokedVariant, res.Variant)
	if ca := resp.Header.Get(hdrCustomAttributes); ca != "" {
		out.Set(hdrCustomAttributes, ca)
	}
	if !stream {
		if ct := resp.Header.Get("Content-Type"); ct != "" {
			out.Set("Content-Type", ct)
		}
		if resp.ContentLength >= 0 {
			out.Set("Content-Length", fmt.Sprint(resp.ContentLength))
		}
		w.WriteHeader(http.StatusOK)
		if err := obs.Copy(w, resp.Body); err != nil {
			// Headers are sent; all we can do is cut the response short.
			log.Warn("copying model response", "err", err)
		}
		return
	}
	h.stream(w, r.Context(), resp, obs, log)
}

// parse validates the request and builds the gateway invocation.
func (h *handler) parse(w http.ResponseWriter, r *http.Request, name string, stream bool) (gateway.Invocation, error) {
	if err := validateEndpointName(name); err != nil {
		return gateway.Invocation{}, err
	}
	acceptHeader := hdrAccept
	if stream {
		acceptHeader = hdrStreamAccept
	}
	if err := validateHeaders(r.Header, acceptHeader); err != nil {
		return gateway.Invocation{}, err
	}
	max := h.opts.MaxBodyBytes
	tooLarge := &requestError{codeValidation, http.StatusRequestEntityTooLarge,
		fmt.Sprintf("Request body exceeds the maximum allowed size of %d bytes.", max)}
	if r.ContentLength > max {
		return gateway.Invocation{}, tooLarge
	}
	body, err := awsauth.ReadBody(w, r, max)
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return gateway.Invocation{}, tooLarge
	}
	if err != nil {
		return gateway.Invocation{}, validationErrorf("Could not read the request body: %v", err)
	}
	fwd := http.Header{}
	if ct := r.Header.Get("Content-Type"); ct != "" {
		fwd.Set("Content-Type", ct)
	}
	if a := r.Header.Get(acceptHeader); a != "" {
		fwd.Set("Accept", a)
	}
	for _, k := range []string{hdrCustomAttributes, hdrInferenceID, hdrTargetVariant} {
		if v := r.Header.Get(k); v != "" {
			fwd.Set(k, v)
		}
	}
	if stream {
		body = withStreamTrue(body)
	}
	return gateway.Invocation{
		Endpoint:      name,
		TargetVariant: r.Header.Get(hdrTargetVariant),
		Path:          "/invocations",
		Header:        fwd,
		Body:          body,
	}, nil
}

// withStreamTrue inserts "stream":true into a JSON object body that has no
// "stream" member, so the engine streams; anything else is returned as is.
func withStreamTrue(body []byte) []byte {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return body
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(trimmed, &obj); err != nil {
		return body
	}
	if _, ok := obj["stream"]; ok {
		return body
	}
	// Insert textually after the opening brace to keep the client's member order.
	out := make([]byte, 0, len(trimmed)+16)
	out = append(out, '{')
	out = append(out, `"stream":true`...)
	if len(obj) > 0 {
		out = append(out, ',')
	}
	return append(out, trimmed[1:]...)
}

// stream relays the upstream body as PayloadPart events, one per read,
// flushing each; a read failure mid-stream ends with a ModelStreamError.
// obs times the engine's server-sent events inside the parts.
func (h *handler) stream(w http.ResponseWriter, ctx context.Context, resp *http.Response, obs *gateway.Observer, log *slog.Logger) {
	out := w.Header()
	out.Set("Content-Type", eventStreamType)
	if ct := resp.Header.Get("Content-Type"); ct != "" {
		out.Set(hdrStreamCType, ct)
	}
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	fw := newFrameWriter(w)
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			if werr := fw.payloadPart(buf[:n]); werr != nil {
				log.Debug("client went away mid-stream", "err", werr)
				return
			}
			if ferr := rc.Flush(); ferr != nil {
				log.Debug("client went away mid-stream", "err", ferr)
				return
			}
			obs.StreamChunk(buf[:n])
		}
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			if ctx.Err() != nil {
				return // the client hung up; nobody to tell
			}
			log.Warn("model stream broke", "err", err)
			code := "StreamBroken"
			if errors.Is(err, context.DeadlineExceeded) {
				code = "ModelInvocationTimeExceeded"
			}
			_ = fw.exception("ModelStreamError", "The model stream ended unexpectedly: "+err.Error(), code)
			_ = rc.Flush()
			return
		}
	}
}
