package server

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/capstan-dev/capstan/internal/manifestapi"
)

// door is one protocol surface of the server. Refusals made before a
// request reaches its API (no or a wrong key, over the rate limit, no room
// for its body) are written in the door's own error shape, here and only
// here.
type door int

const (
	doorAWS       door = iota // SageMaker control and runtime, Application Auto Scaling
	doorOpenAI                // /v1/*
	doorManifests             // /apis/*
	doorAdmin                 // /metrics, /_capstan/*, /healthz
)

// doorOf classifies a request path as the server's mux routes it.
func doorOf(path string) door {
	switch {
	case strings.HasPrefix(path, "/v1/"):
		return doorOpenAI
	case strings.HasPrefix(path, "/apis/"):
		return doorManifests
	case path == "/metrics" || path == "/healthz" || strings.HasPrefix(path, "/_capstan/"):
		return doorAdmin
	default:
		return doorAWS
	}
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
}

// write answers r in d's shape:
//   - AWS: the AWS JSON error (__type and X-Amzn-ErrorType); throttling is
//     ThrottlingException with HTTP 400, which the AWS SDKs retry.
//   - OpenAI: {"error":{message,type,param,code}}.
//   - manifests: a Kubernetes Status.
//   - admin: {"message": ...}.
func (d door) write(w http.ResponseWriter, r refusal) {
	type wire struct {
		status                 int
		awsType, oaiType, code string
		k8sReason              string
	}
	ws := map[refusalKind]wire{
		refuseUnauthorized: {http.StatusUnauthorized, "UnrecognizedClientException", "invalid_request_error", "invalid_api_key", "Unauthorized"},
		refuseThrottled:    {http.StatusTooManyRequests, "ThrottlingException", "rate_limit_error", "rate_limit_exceeded", "TooManyRequests"},
		refuseBusy:         {http.StatusServiceUnavailable, "ServiceUnavailable", "server_error", "server_busy", "ServiceUnavailable"},
		refuseTooLarge:     {http.StatusRequestEntityTooLarge, "ValidationException", "invalid_request_error", "request_too_large", "RequestEntityTooLarge"},
	}[r.kind]
	h := w.Header()
	if r.retryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(int((r.retryAfter+time.Second-1)/time.Second)))
	}
	var body any
	status := ws.status
	switch d {
	case doorAWS:
		if r.kind == refuseThrottled {
			status = http.StatusBadRequest // as AWS answers it
		}
		if r.kind == refuseUnauthorized {
			status = http.StatusForbidden
		}
		h.Set("Content-Type", "application/x-amz-json-1.1")
		h.Set("X-Amzn-ErrorType", ws.awsType)
		body = map[string]string{"__type": ws.awsType, "message": r.msg}
	case doorOpenAI:
		h.Set("Content-Type", "application/json")
		type oaiErr struct {
			Message string  `json:"message"`
			Type    string  `json:"type"`
			Param   *string `json:"param"`
			Code    string  `json:"code"`
		}
		body = map[string]oaiErr{"error": {Message: r.msg, Type: ws.oaiType, Code: ws.code}}
	case doorManifests:
		h.Set("Content-Type", "application/json")
		body = &manifestapi.Status{Kind: "Status", APIVersion: "v1", Status: manifestapi.StatusFailure,
			Message: r.msg, Reason: ws.k8sReason, Code: status}
	default:
		h.Set("Content-Type", "application/json")
		body = map[string]string{"message": r.msg}
	}
	if r.kind == refuseUnauthorized && d != doorAWS {
		h.Set("WWW-Authenticate", `Bearer realm="capstan"`)
	}
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

// bearerToken is the token of an `Authorization: Bearer <token>` header.
// The scheme is case-insensitive (RFC 7235), so "bearer" works too.
func bearerToken(r *http.Request) (string, bool) {
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != ""
}

// bearerAuth guards a surface that is not SigV4-signed: the OpenAI door
// with apiKeys, the manifests API, dev clock and /metrics with adminTokens.
// With no key configured for it (while other auth is) it refuses every
// request, naming the field to set, rather than opening silently.
func bearerAuth(next http.Handler, d door, field string, keys []string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(keys) == 0 {
			d.write(w, refusal{kind: refuseUnauthorized,
				msg: fmt.Sprintf("This API is closed: authentication is configured but %s is empty; set %s in capstan.yaml.", field, field)})
			return
		}
		tok, ok := bearerToken(r)
		match := 0
		if ok {
			for _, k := range keys {
				match |= subtle.ConstantTimeCompare([]byte(tok), []byte(k))
			}
		}
		if match == 1 {
			next.ServeHTTP(w, r)
			return
		}
		d.write(w, refusal{kind: refuseUnauthorized,
			msg: fmt.Sprintf("Incorrect or missing key: send one of the configured %s as 'Authorization: Bearer <key>'.", field)})
	})
}

// sigv4Closed refuses the AWS APIs when other authentication is configured
// but no SigV4 credentials are.
func sigv4Closed() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		doorAWS.write(w, refusal{kind: refuseUnauthorized,
			msg: "This API is closed: authentication is configured but credentials is empty; set credentials in capstan.yaml."})
	})
}

// keyDigest is what the rate limiter keys a bearer credential by: a
// digest, so the limiter's map holds no key and looking one up does not
// compare secret bytes.
func keyDigest(k string) [sha256.Size]byte { return sha256.Sum256([]byte(k)) }
