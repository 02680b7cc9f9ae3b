package runtimeapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"unicode/utf8"

	"github.com/capstan-dev/capstan/internal/gateway"
)

// CodeValidation is the runtime's code for a request it refuses as
// invalid, an oversized body included.
const CodeValidation = codeValidation

// Wire error codes of the SageMaker Runtime (reference §3.3).
const (
	codeValidation         = "ValidationError"
	codeModel              = "ModelError"
	codeInternalFailure    = "InternalFailure"
	codeServiceUnavailable = "ServiceUnavailable"
	codeUnknownOperation   = "UnknownOperationException"
	// codeThrottling: requests past a serverless endpoint's MaxConcurrency
	// (not modelled for the runtime; the generic AWS throttling code, which
	// every SDK retries).
	codeThrottling = "ThrottlingException"
)

// maxMessage is the modelled limit on an error Message.
const maxMessage = 2048

// requestError is an error the handler detected itself, already classified.
type requestError struct {
	code    string
	status  int
	message string
}

func (e *requestError) Error() string { return e.code + ": " + e.message }

func validationErrorf(format string, args ...any) error {
	return &requestError{codeValidation, http.StatusBadRequest, fmt.Sprintf(format, args...)}
}

// modelError is an engine error response (4xx/5xx from the replica).
type modelError struct {
	variant string
	status  int
	body    string
}

func (e *modelError) Error() string {
	return fmt.Sprintf("model %s answered %d: %s", e.variant, e.status, e.body)
}

// wireError is one runtime error as it goes on the wire.
type wireError struct {
	status int
	code   string
	body   wireBody
}

type wireBody struct {
	Message            string `json:"Message"`
	OriginalStatusCode *int   `json:"OriginalStatusCode,omitempty"`
	OriginalMessage    string `json:"OriginalMessage,omitempty"`
	LogStreamArn       string `json:"LogStreamArn,omitempty"`
}

// errContext is what toWire needs to word messages.
type errContext struct {
	endpoint  string
	variant   string // the requested target variant, if any
	accountID string
	region    string
}

func (c errContext) logGroup() string { return "/aws/sagemaker/Endpoints/" + c.endpoint }

func (c errContext) logStreamArn() string {
	return fmt.Sprintf("arn:aws:logs:%s:%s:log-group:%s", c.region, c.accountID, c.logGroup())
}

// expiredMessage is what every invocation of an endpoint whose capacity
// reservation ended returns (as a ModelError), worded as SageMaker words it.
const expiredMessage = "Endpoint capacity reservation has expired. Please update endpoint configuration."

// toWire maps any error from this package or the gateway to the runtime's
// wire error. It is the only place that decides codes and statuses.
func toWire(err error, c errContext) wireError {
	var re *requestError
	var me *modelError
	var ue *gateway.UnavailableError
	var ae *gateway.ActivationError
	switch {
	case errors.As(err, &re):
		return wireError{re.status, re.code, wireBody{Message: re.message}}
	case errors.Is(err, gateway.ErrUnknownEndpoint):
		return wireError{http.StatusBadRequest, codeValidation,
			wireBody{Message: fmt.Sprintf("Endpoint %s of account %s not found.", c.endpoint, c.accountID)}}
	case errors.Is(err, gateway.ErrUnknownVariant):
		return wireError{http.StatusBadRequest, codeValidation,
			wireBody{Message: fmt.Sprintf("Target variant %s is not a production variant of endpoint %s.", c.variant, c.endpoint)}}
	case errors.As(err, &ue):
		msg := "Endpoint " + c.endpoint + " is unavailable: " + ue.Reason + "."
		if ue.Reason == gateway.UnavailableExpired {
			msg = expiredMessage
		}
		return wireError{http.StatusFailedDependency, codeModel,
			wireBody{Message: msg, LogStreamArn: c.logStreamArn()}}
	case errors.As(err, &me):
		kind := "client"
		if me.status >= 500 {
			kind = "server"
		}
		status := me.status
		suffix := fmt.Sprintf(". See https://%s.console.aws.amazon.com/cloudwatch/home?region=%s#logEventViewer:group=%s in account %s for more information.",
			c.region, c.region, c.logGroup(), c.accountID)
		prefix := fmt.Sprintf("Received %s error (%d) from %s with message \"", kind, me.status, me.variant)
		orig := truncate(me.body, maxMessage-len(prefix)-len(suffix)-1)
		return wireError{http.StatusFailedDependency, codeModel, wireBody{
			Message:            prefix + orig + "\"" + suffix,
			OriginalStatusCode: &status,
			OriginalMessage:    truncate(me.body, maxMessage),
			LogStreamArn:       c.logStreamArn(),
		}}
	case gateway.IsQueueFull(err):
		return wireError{http.StatusBadRequest, codeThrottling,
			wireBody{Message: fmt.Sprintf("Endpoint %s is serving its maximum number of concurrent requests (MaxConcurrency). Rate exceeded; retry the request later.", c.endpoint)}}
	case errors.As(err, &ae) && ae.Overflow:
		return wireError{http.StatusServiceUnavailable, codeServiceUnavailable,
			wireBody{Message: fmt.Sprintf("Endpoint %s is scaling up from zero instances and %d requests are already waiting for it. Try again later.", c.endpoint, ae.MaxHeld)}}
	case errors.As(err, &ae):
		return wireError{http.StatusServiceUnavailable, codeServiceUnavailable,
			wireBody{Message: fmt.Sprintf("Endpoint %s is scaling up from zero instances and no instance became ready within %s. Try again later.", c.endpoint, ae.Timeout)}}
	case errors.Is(err, gateway.ErrNoBackend):
		return wireError{http.StatusServiceUnavailable, codeServiceUnavailable,
			wireBody{Message: fmt.Sprintf("Endpoint %s has no instance available to serve the request. Try again later.", c.endpoint)}}
	case errors.Is(err, context.DeadlineExceeded):
		return wireError{http.StatusServiceUnavailable, codeServiceUnavailable,
			wireBody{Message: "The request timed out before the model answered."}}
	default:
		return wireError{http.StatusInternalServerError, codeInternalFailure,
			wireBody{Message: "An internal error occurred while processing the request."}}
	}
}

// truncate cuts s to at most n bytes on a rune boundary.
func truncate(s string, n int) string {
	if n < 0 {
		n = 0
	}
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}

// WriteError answers with a runtime error of code, in the shape of the
// Handler's own (X-Amzn-ErrorType and a JSON {"Message"}): for a refusal
// made before a request reaches the Handler (authentication, rate and body
// limits).
func WriteError(w http.ResponseWriter, status int, code, message string) {
	writeWire(w, wireError{status, code, wireBody{Message: truncate(message, maxMessage)}})
}

// writeWire is the one place a runtime error goes on the wire.
func writeWire(w http.ResponseWriter, we wireError) {
	body, _ := json.Marshal(we.body)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Amzn-ErrorType", we.code)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(we.status)
	_, _ = w.Write(body)
}
