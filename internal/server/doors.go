package server

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/capstan-dev/capstan/internal/awsjson"
	"github.com/capstan-dev/capstan/internal/cloudwatch"
	"github.com/capstan-dev/capstan/internal/manifestapi"
	"github.com/capstan-dev/capstan/internal/sagemaker/runtimeapi"
)

// door is one protocol surface of the server: the API a request is
// addressed to, as the server routes it (routes.classify). Refusals made
// before a request reaches its API (no or a wrong signature or key, over
// the rate limit, no room for its body) are written in that API's error
// shape by door.write, and only there.
type door int

const (
	// doorAdmin: /metrics, /healthz, /_capstan/*, /console/, /spaces/, and
	// a request that did not come through routes (a middleware's unit test).
	doorAdmin door = iota
	// doorControl: SageMaker control and Application Auto Scaling, AWS JSON
	// 1.1 at the root.
	doorControl
	// doorCloudWatch: CloudWatch at the root, in the protocol the request
	// speaks (smithy-rpc-v2-cbor, JSON 1.0 or query).
	doorCloudWatch
	// doorRuntime: SageMaker Runtime, /endpoints/* (restJson1).
	doorRuntime
	doorOpenAI    // /v1/*
	doorManifests // /apis/*
)

// routes is the server's mux together with the door of each of its
// patterns: one classification both routes a request and picks the shape
// of its refusals.
type routes struct {
	mux   *http.ServeMux
	doors map[string]door
}

func newRoutes() *routes { return &routes{mux: http.NewServeMux(), doors: map[string]door{}} }

// handle routes pattern to h, an API of door d. The root's API is
// doorControl; classify splits CloudWatch's requests off it.
func (rs *routes) handle(pattern string, d door, h http.Handler) {
	rs.mux.Handle(pattern, h)
	rs.doors[pattern] = d
}

// classify is the door of r: that of the pattern the mux routes r by (a
// redirect's names the pattern it redirects to) and, at the root,
// CloudWatch for a request in one of its protocols (cloudwatch.IsRequest),
// the test cloudwatchDispatch routes by.
func (rs *routes) classify(r *http.Request) door {
	_, pattern := rs.mux.Handler(r)
	d := rs.doors[pattern]
	if d == doorControl && cloudwatch.IsRequest(r) {
		return doorCloudWatch
	}
	return d
}

// serve classifies each request once and records its door in the
// request's context for next (the limits, then the mux, authentication and
// cloudwatchDispatch), which read it with doorOf.
func (rs *routes) serve(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), doorKey{}, rs.classify(r))))
	})
}

type doorKey struct{}

// doorOf is the door routes.serve classified r by; doorAdmin if none did.
func doorOf(r *http.Request) door {
	d, _ := r.Context().Value(doorKey{}).(door)
	return d
}

// refusalKind is why a request is refused before its API sees it.
type refusalKind int

const (
	refuseUnauthorized refusalKind = iota
	refuseThrottled
	refuseBusy
	refuseTooLarge
)

// refusal is one such answer; retryAfter > 0 sets Retry-After.
type refusal struct {
	kind       refusalKind
	msg        string
	retryAfter time.Duration
	// status and code, when code is set, are the AWS error a SigV4 check
	// chose; otherwise the AWS doors answer the kind's.
	status int
	code   string
}

// refuse answers r with rf in the shape of r's door.
func refuse(w http.ResponseWriter, r *http.Request, rf refusal) { doorOf(r).write(w, r, rf) }

// refuseSigV4 is the SigV4 verifier's refusal (awsauth.Verifier.Refuse).
func refuseSigV4(w http.ResponseWriter, r *http.Request, status int, code, msg string) {
	kind := refuseUnauthorized
	if status == http.StatusRequestEntityTooLarge {
		kind = refuseTooLarge
	}
	refuse(w, r, refusal{kind: kind, msg: msg, status: status, code: code})
}

// refusalWire is a refusal kind in each door's terms.
type refusalWire struct {
	status           int
	awsStatus        int
	awsCode          string
	oaiType, oaiCode string
	k8sReason        string
}

var refusalWires = map[refusalKind]refusalWire{
	// AWS answers a missing or unknown key with 403, and throttling with
	// 400 ThrottlingException, which the AWS SDKs retry.
	refuseUnauthorized: {http.StatusUnauthorized, http.StatusForbidden, "UnrecognizedClientException", "invalid_request_error", "invalid_api_key", "Unauthorized"},
	refuseThrottled:    {http.StatusTooManyRequests, http.StatusBadRequest, "ThrottlingException", "rate_limit_error", "rate_limit_exceeded", "TooManyRequests"},
	refuseBusy:         {http.StatusServiceUnavailable, http.StatusServiceUnavailable, "ServiceUnavailable", "server_error", "server_busy", "ServiceUnavailable"},
	refuseTooLarge:     {http.StatusRequestEntityTooLarge, http.StatusRequestEntityTooLarge, "ValidationException", "invalid_request_error", "request_too_large", "RequestEntityTooLarge"},
}

// write answers r with rf in d's shape:
//   - control: AWS JSON 1.1 (__type in the body, X-Amzn-ErrorType).
//   - runtime: the runtime's own errors' shape (runtimeapi.WriteError);
//     an oversized body is its ValidationError.
//   - CloudWatch: the request's protocol (cloudwatch.WriteError); an
//     oversized body is its RequestEntityTooLarge.
//   - OpenAI: {"error":{message,type,param,code}}.
//   - manifests: a Kubernetes Status.
//   - admin: {"message": ...}.
func (d door) write(w http.ResponseWriter, r *http.Request, rf refusal) {
	ws := refusalWires[rf.kind]
	h := w.Header()
	if rf.retryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(int((rf.retryAfter+time.Second-1)/time.Second)))
	}
	status, code := ws.awsStatus, ws.awsCode
	switch {
	case rf.code != "":
		status, code = rf.status, rf.code
	case rf.kind == refuseTooLarge && d == doorRuntime:
		code = runtimeapi.CodeValidation
	case rf.kind == refuseTooLarge && d == doorCloudWatch:
		code = cloudwatch.CodeTooLarge
	}
	var body any
	switch d {
	case doorControl:
		h.Set("Content-Type", awsjson.ContentType)
		h.Set("X-Amzn-ErrorType", code)
		body = map[string]string{"__type": code, "message": rf.msg, "Message": rf.msg}
	case doorRuntime:
		runtimeapi.WriteError(w, status, code, rf.msg)
		return
	case doorCloudWatch:
		cloudwatch.WriteError(w, r, status, code, rf.msg)
		return
	case doorOpenAI:
		status = ws.status
		type oaiErr struct {
			Message string  `json:"message"`
			Type    string  `json:"type"`
			Param   *string `json:"param"`
			Code    string  `json:"code"`
		}
		body = map[string]oaiErr{"error": {Message: rf.msg, Type: ws.oaiType, Code: ws.oaiCode}}
	case doorManifests:
		status = ws.status
		body = &manifestapi.Status{Kind: "Status", APIVersion: "v1", Status: manifestapi.StatusFailure,
			Message: rf.msg, Reason: ws.k8sReason, Code: status}
	default:
		status = ws.status
		body = map[string]string{"message": rf.msg}
	}
	if d != doorControl {
		h.Set("Content-Type", "application/json")
		if rf.kind == refuseUnauthorized {
			h.Set("WWW-Authenticate", `Bearer realm="capstan"`)
		}
	}
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}
