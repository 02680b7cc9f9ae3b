package sagemaker

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/capstan-dev/capstan/internal/awsjson"
	"github.com/capstan-dev/capstan/internal/capacity"
	"github.com/capstan-dev/capstan/internal/endpoint"
	"github.com/capstan-dev/capstan/internal/fleet"
	"github.com/capstan-dev/capstan/internal/placement"
)

// Wire error codes.
const (
	CodeValidation       = "ValidationException"
	CodeLimitExceeded    = "ResourceLimitExceeded"
	CodeUnknownOperation = "UnknownOperationException"
	CodeSerialization    = "SerializationException"
	CodeInternal         = "InternalFailure"
	CodeTooLarge         = "RequestEntityTooLarge"
	CodeNotFound         = "ResourceNotFound"
	CodeInUse            = "ResourceInUse"
)

// wireError is an error already in the protocol's terms.
type wireError struct {
	Status  int
	Code    string
	Message string
}

func (e *wireError) Error() string { return e.Code + ": " + e.Message }

func newWireError(status int, code, format string, a ...any) *wireError {
	return &wireError{Status: status, Code: code, Message: fmt.Sprintf(format, a...)}
}

// validationError collects violations in AWS's words; the helpers in validate.go
// add the constraints this API checks.
type validationError struct{ awsjson.Violations }

// toWire maps any error to its wire form. It is the only place that does so
// for the control API.
func (a *API) toWire(err error) *wireError {
	var we *wireError
	if errors.As(err, &we) {
		return we
	}
	var ve *awsjson.Violations
	if errors.As(err, &ve) {
		return &wireError{http.StatusBadRequest, CodeValidation, ve.Error()}
	}
	var le *fleet.LimitError
	if errors.As(err, &le) {
		return newWireError(http.StatusBadRequest, CodeLimitExceeded,
			"The account-level service limit '%s for endpoint usage' is %d Instances, with current utilization of %d Instances and a request delta of %d Instances. Please use AWS Service Quotas to request an increase for this quota. If AWS Service Quotas is not available, contact AWS support to request an increase for this quota.",
			le.InstanceType, le.Total, le.Total-le.Available, le.Requested)
	}
	var pe *placement.LimitError
	if errors.As(err, &pe) {
		if pe.Total == 0 {
			return newWireError(http.StatusBadRequest, CodeValidation, "Training plan %s does not exist or has expired.", pe.Name)
		}
		return newWireError(http.StatusBadRequest, CodeValidation,
			"Training plan %s has %d instances (%d available to this endpoint); %d were requested. Request at most %d, or reserve more capacity.",
			pe.Name, pe.Total, pe.Available, pe.Requested, pe.Available)
	}
	if e, ok := capacity.AsError(err); ok {
		switch e.Kind {
		case capacity.ErrPlanNotFound:
			return newWireError(http.StatusBadRequest, CodeNotFound, "%s", e.Message)
		case capacity.ErrPlanExists:
			return newWireError(http.StatusBadRequest, CodeInUse, "%s", e.Message)
		default:
			return newWireError(http.StatusBadRequest, CodeValidation, "%s", e.Message)
		}
	}
	var ste *endpoint.StrategyError
	if errors.As(err, &ste) {
		return newWireError(http.StatusBadRequest, CodeValidation,
			"Value '%s' of tag %s is not a routing strategy; accepted values: [%s]. The tag sets the routing strategy of every production variant and overrides RoutingConfig.RoutingStrategy.",
			ste.Value, endpoint.StrategyTag, strings.Join(ste.Known, ", "))
	}
	if e, ok := endpoint.AsError(err); ok {
		arn := a.arn(e.Resource, e.Name)
		switch e.Kind {
		case endpoint.ErrNotFound:
			return newWireError(http.StatusBadRequest, CodeValidation, "Could not find %s %q.", e.Resource, arn)
		case endpoint.ErrAlreadyExists:
			return newWireError(http.StatusBadRequest, CodeValidation, "Cannot create already existing %s %q.", e.Resource, arn)
		case endpoint.ErrInProgress:
			return newWireError(http.StatusBadRequest, CodeValidation, "Cannot update in-progress endpoint %q.", arn)
		case endpoint.ErrFailedState:
			return newWireError(http.StatusBadRequest, CodeValidation, "Cannot update endpoint %q because it is in Failed status. Only DeleteEndpoint is allowed on a Failed endpoint.", arn)
		default:
			return newWireError(http.StatusBadRequest, CodeValidation, "%s", e.Message)
		}
	}
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	if errors.As(err, &se) || errors.As(err, &te) {
		return newWireError(http.StatusBadRequest, CodeSerialization, "Could not parse the request body: %v", err)
	}
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return newWireError(http.StatusRequestEntityTooLarge, CodeTooLarge, "Request body is larger than the limit of %d bytes.", mbe.Limit)
	}
	return newWireError(http.StatusInternalServerError, CodeInternal, "An internal error occurred.")
}

// writeError sends err as an awsJson1_1 error: __type in the body and the
// X-Amzn-ErrorType header, since botocore reads one and the Go SDK the other.
func (a *API) writeError(w http.ResponseWriter, r *http.Request, op string, err error) {
	we := a.toWire(err)
	if we.Status >= 500 {
		a.log.Error("control API internal error", "op", op, "err", err)
	} else {
		a.log.Debug("control API error", "op", op, "code", we.Code, "message", we.Message)
	}
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Set("X-Amzn-ErrorType", we.Code)
	w.WriteHeader(we.Status)
	_ = json.NewEncoder(w).Encode(map[string]string{"__type": we.Code, "message": we.Message})
}
