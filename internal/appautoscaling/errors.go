package appautoscaling

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/capstan-dev/capstan/internal/awsjson"
	"github.com/capstan-dev/capstan/internal/endpoint"
)

// Wire error codes (the service's modelled exceptions plus the protocol's).
const (
	CodeValidation        = awsjson.CodeValidation
	CodeObjectNotFound    = "ObjectNotFoundException"
	CodeConcurrentUpdate  = "ConcurrentUpdateException"
	CodeLimitExceeded     = "LimitExceededException"
	CodeInvalidNextToken  = "InvalidNextTokenException"
	CodeInternal          = "InternalServiceException"
	CodeUnknownOperation  = awsjson.CodeUnknownOperation
	CodeSerialization     = awsjson.CodeSerialization
	CodeRequestTooLarge   = "RequestEntityTooLargeException"
	CodeFailedResourceAcc = "FailedResourceAccessException"
)

// notRegistered is AWS's ObjectNotFoundException for a missing target.
func notRegistered(k targetKey) *awsjson.Error {
	return awsjson.Errorf(http.StatusBadRequest, CodeObjectNotFound,
		"No scalable target registered for service namespace: %s, resource ID: %s, scalable dimension: %s",
		k.Namespace, k.ResourceID, k.Dimension)
}

// validationErrors collects violations in AWS's words; the helpers in validate.go
// add the constraints this API checks.
type validationErrors struct{ awsjson.Violations }

// toWire maps this API's domain errors to their wire form, nil for any
// other (awsjson.Handler maps those). It is the only place that does so for
// this API.
func (a *API) toWire(err error) *awsjson.Error {
	var re *reservationError
	if errors.As(err, &re) {
		return awsjson.Validationf("MaxCapacity %d exceeds the reservation of variant %s of endpoint %s: its training plan reserves %d instances, so MaxCapacity must be at most %d.",
			re.Max, re.Variant, re.Endpoint, re.Limit, re.Limit)
	}
	var rn *resourceError
	if errors.As(err, &rn) {
		if e, ok := endpoint.AsError(rn.Err); ok && e.Kind == endpoint.ErrNotFound {
			// AWS validates the resource when registering; a missing
			// SageMaker endpoint or variant is a ValidationException.
			return awsjson.Validationf("Unable to register scalable target for resource ID %s: the %s %s does not exist.", rn.ResourceID, e.Resource, e.Name)
		}
	}
	if e, ok := endpoint.AsError(err); ok {
		switch e.Kind {
		case endpoint.ErrNotFound:
			return awsjson.Validationf("The %s %s does not exist.", e.Resource, e.Name)
		case endpoint.ErrInProgress:
			return awsjson.Errorf(http.StatusBadRequest, CodeConcurrentUpdate,
				"The endpoint %s is being updated; retry when it is InService.", e.Name)
		default:
			return awsjson.Validationf("%s", e.Error())
		}
	}
	return nil
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
