package sim

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
)

// apiError is a request failure with its OpenAI error shape.
type apiError struct {
	status int
	typ    string
	code   string
	param  string
	msg    string
}

func (e *apiError) Error() string { return e.msg }

func invalid(param, format string, a ...any) error {
	return &apiError{status: http.StatusBadRequest, typ: "invalid_request_error", param: param, msg: fmt.Sprintf(format, a...)}
}

// errUnauthorized: the request lacks the engine's API key.
var errUnauthorized = &apiError{status: http.StatusUnauthorized, typ: "invalid_request_error", code: "invalid_api_key",
	msg: "this engine answers only capstan's gateway: send its API key as Authorization: Bearer"}

// errInjected is a failure from --fail-rate.
var errInjected = errors.New("injected failure (--fail-rate)")

// errStarting is returned while --startup-delay has not elapsed.
var errStarting = errors.New("model is still loading (--startup-delay)")

type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

// toOpenAIError maps any error to its HTTP status and OpenAI error body: the
// one place the engine's errors meet the wire.
func toOpenAIError(err error) (int, errorBody) {
	var ae *apiError
	d := errorDetail{Message: err.Error()}
	status := http.StatusInternalServerError
	code := ""
	switch {
	case errors.As(err, &ae):
		status, d.Type, code = ae.status, ae.typ, ae.code
		if ae.param != "" {
			d.Param = &ae.param
		}
	case errors.Is(err, ErrQueueFull):
		status, d.Type, code = http.StatusTooManyRequests, "rate_limit_error", "rate_limit_exceeded"
		d.Message = "the server's waiting queue is full; retry later"
	case errors.Is(err, ErrStopped), errors.Is(err, errStarting):
		status, d.Type, code = http.StatusServiceUnavailable, "service_unavailable", "service_unavailable"
	case errors.Is(err, errInjected):
		d.Type, code = "server_error", "internal_error"
	default:
		d.Type, code = "server_error", "internal_error"
	}
	if code != "" {
		d.Code = &code
	}
	return status, errorBody{Error: d}
}

func writeError(w http.ResponseWriter, err error) {
	status, body := toOpenAIError(err)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}
