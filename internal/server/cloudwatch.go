package server

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/capstan-dev/capstan/internal/cloudwatch"
	"github.com/capstan-dev/capstan/internal/sagemaker/sigv4"
)

// cloudwatchScope: the AWS SDKs and CLI sign CloudWatch as "monitoring".
var cloudwatchScope = sigv4.Scope{Service: "monitoring", MaxBodyBytes: cloudwatch.DefaultMaxBodyBytes, TooLargeCode: cloudwatch.CodeTooLarge}

// cloudwatchDispatch sends CloudWatch's requests (smithy-rpc-v2-cbor's
// path, awsJson1_0's GraniteServiceVersion20100801 target, a query-protocol
// form) to cw and everything else to the AWS JSON 1.1 APIs.
func cloudwatchDispatch(cw, rest http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if cloudwatch.IsRequest(r) {
			cw.ServeHTTP(w, r)
			return
		}
		rest.ServeHTTP(w, r)
	})
}

// cloudwatchRefusals rewrites, for CloudWatch's requests, the AWS JSON 1.1
// refusals that come from in front of the CloudWatch handler (SigV4, the
// API closed when only other authentication is configured, rate limits,
// body budgets) into the request's own protocol (CBOR, JSON 1.0 or XML), so
// every CloudWatch client can read them. The CloudWatch handler itself never
// writes JSON 1.1.
func cloudwatchRefusals(api *cloudwatch.Handler, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !cloudwatch.IsRequest(r) {
			next.ServeHTTP(w, r)
			return
		}
		iw := &authErrorWriter{ResponseWriter: w}
		next.ServeHTTP(iw, r)
		if iw.status == 0 {
			return
		}
		var e struct {
			Type    string `json:"__type"`
			Message string `json:"message"`
		}
		_ = json.Unmarshal(iw.buf.Bytes(), &e)
		w.Header().Del("Content-Type")
		w.Header().Del("X-Amzn-ErrorType")
		api.WriteError(w, r, iw.status, e.Type, e.Message)
	})
}

// authErrorWriter holds back a JSON 1.1 error response (which only the guard
// writes: the CloudWatch handler never does) and passes anything else on.
type authErrorWriter struct {
	http.ResponseWriter
	status int // non-zero: a held-back error
	buf    bytes.Buffer
	passed bool
}

func (a *authErrorWriter) WriteHeader(code int) {
	if !a.passed && a.status == 0 && code >= 400 && a.Header().Get("Content-Type") == "application/x-amz-json-1.1" {
		a.status = code
		return
	}
	a.passed = true
	a.ResponseWriter.WriteHeader(code)
}

func (a *authErrorWriter) Write(p []byte) (int, error) {
	if a.status != 0 {
		if a.buf.Len() < 64<<10 {
			a.buf.Write(p)
		}
		return len(p), nil
	}
	a.passed = true
	return a.ResponseWriter.Write(p)
}
