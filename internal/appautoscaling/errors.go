package appautoscaling

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/capstan-dev/capstan/internal/awsjson"
	"github.com/capstan-dev/capstan/internal/endpoint"
)

// Wire error codes (the service's modelled exceptions plus the protocol's).
const (
	CodeValidation        = "ValidationException"
	CodeObjectNotFound    = "ObjectNotFoundException"
	CodeConcurrentUpdate  = "ConcurrentUpdateException"
	CodeLimitExceeded     = "LimitExceededException"
	CodeInvalidNextToken  = "InvalidNextTokenException"
	CodeInternal          = "InternalServiceException"
	CodeUnknownOperation  = "UnknownOperationException"
	CodeSerialization     = "SerializationException"
	CodeRequestTooLarge   = "RequestEntityTooLargeException"
	CodeFailedResourceAcc = "FailedResourceAccessException"
)

// apiError is an error already in the protocol's terms.
type apiError struct {
	Status  int
	Code    string
	Message string
}

func (e *apiError) Error() string { return e.Code + ": " + e.Message }

func newAPIError(status int, code, format string, a ...any) *apiError {
	return &apiError{Status: status, Code: code, Message: fmt.Sprintf(format, a...)}
}

func validationf(format string, a ...any) *apiError {
	return newAPIError(http.StatusBadRequest, CodeValidation, format, a...)
}

// notRegistered is AWS's ObjectNotFoundException for a missing target.
func notRegistered(k targetKey) *apiError {
	return newAPIError(http.StatusBadRequest, CodeObjectNotFound,
		"No scalable target registered for service namespace: %s, resource ID: %s, scalable dimension: %s",
		k.Namespace, k.ResourceID, k.Dimension)
}

// validationErrors collects violations in AWS's words; the helpers in validate.go
// add the constraints this API checks.
type validationErrors struct{ awsjson.Violations }

// toWire maps any error to its wire form. It is the only place that does so
// for this API.
func (a *API) toWire(err error) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	var ve *awsjson.Violations
	if errors.As(err, &ve) {
		return &apiError{http.StatusBadRequest, CodeValidation, ve.Error()}
	}
	var re *reservationError
	if errors.As(err, &re) {
		return validationf("MaxCapacity %d exceeds the reservation of variant %s of endpoint %s: its training plan reserves %d instances, so MaxCapacity must be at most %d.",
			re.Max, re.Variant, re.Endpoint, re.Limit, re.Limit)
	}
	var rn *resourceError
	if errors.As(err, &rn) {
		if e, ok := endpoint.AsError(rn.Err); ok && e.Kind == endpoint.ErrNotFound {
			// AWS validates the resource when registering; a missing
			// SageMaker endpoint or variant is a ValidationException.
			return validationf("Unable to register scalable target for resource ID %s: the %s %s does not exist.", rn.ResourceID, e.Resource, e.Name)
		}
	}
	if e, ok := endpoint.AsError(err); ok {
		switch e.Kind {
		case endpoint.ErrNotFound:
			return validationf("The %s %s does not exist.", e.Resource, e.Name)
		case endpoint.ErrInProgress:
			return newAPIError(http.StatusBadRequest, CodeConcurrentUpdate,
				"The endpoint %s is being updated; retry when it is InService.", e.Name)
		default:
			return validationf("%s", e.Error())
		}
	}
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return newAPIError(http.StatusRequestEntityTooLarge, CodeRequestTooLarge, "Request body is larger than the limit of %d bytes.", mbe.Limit)
	}
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	if errors.As(err, &se) || errors.As(err, &te) {
		return newAPIError(http.StatusBadRequest, CodeSerialization, "Could not parse the request body: %v", err)
	}
	return newAPIError(http.StatusInternalServerError, CodeInternal, "An internal error occurred.")
}

// writeError sends err as an awsJson1_1 error: __type and Message in the body
// and the X-Amzn-ErrorType header (botocore reads one, the Go SDK the other).
func (a *API) writeError(w http.ResponseWriter, op string, err error) {
	we := a.toWire(err)
	if we.Status >= 500 {
		a.log.Error("application autoscaling API internal error", "op", op, "err", err)
	} else {
		a.log.Debug("application autoscaling API error", "op", op, "code", we.Code, "message", we.Message)
	}
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Set("X-Amzn-ErrorType", we.Code)
	w.WriteHeader(we.Status)
	writeJSON(w, map[string]string{"__type": we.Code, "Message": we.Message})
}

// reservationError: a MaxCapacity above the variant's reservation.
type reservationError struct {
	Endpoint, Variant string
	Max, Limit        int
}

func (e *reservationError) Error() string {
	return fmt.Sprintf("MaxCapacity %d exceeds the reservation (%d) of %s/%s", e.Max, e.Limit, e.Endpoint, e.Variant)
}

// resourceError: the variant a request names could not be read.
type resourceError struct {
	ResourceID string
	Err        error
}

func (e *resourceError) Error() string { return e.ResourceID + ": " + e.Err.Error() }
func (e *resourceError) Unwrap() error { return e.Err }
