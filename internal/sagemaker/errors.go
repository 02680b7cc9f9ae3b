package sagemaker

import (
	"errors"
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
	CodeValidation       = awsjson.CodeValidation
	CodeLimitExceeded    = "ResourceLimitExceeded"
	CodeUnknownOperation = awsjson.CodeUnknownOperation
	CodeSerialization    = awsjson.CodeSerialization
	CodeInternal         = "InternalFailure"
	CodeTooLarge         = "RequestEntityTooLarge"
	CodeNotFound         = "ResourceNotFound"
	CodeInUse            = "ResourceInUse"
)

// validationError collects violations in AWS's words; the helpers in validate.go
// add the constraints this API checks.
type validationError struct{ awsjson.Violations }

// toWire maps the domain errors the control API meets to their wire form,
// nil for any other (awsjson.Handler maps those). It is the only place that
// does so for the control API.
func (a *API) toWire(err error) *awsjson.Error {
	var le *fleet.LimitError
	if errors.As(err, &le) {
		return awsjson.Errorf(http.StatusBadRequest, CodeLimitExceeded,
			"The account-level service limit '%s for endpoint usage' is %d Instances, with current utilization of %d Instances and a request delta of %d Instances. Please use AWS Service Quotas to request an increase for this quota. If AWS Service Quotas is not available, contact AWS support to request an increase for this quota.",
			le.InstanceType, le.Total, le.Total-le.Available, le.Requested)
	}
	var pe *placement.LimitError
	if errors.As(err, &pe) {
		if pe.Total == 0 {
			return awsjson.Validationf("Training plan %s does not exist or has expired.", pe.Name)
		}
		return awsjson.Validationf(
			"Training plan %s has %d instances (%d available to this endpoint); %d were requested. Request at most %d, or reserve more capacity.",
			pe.Name, pe.Total, pe.Available, pe.Requested, pe.Available)
	}
	if e, ok := capacity.AsError(err); ok {
		switch e.Kind {
		case capacity.ErrPlanNotFound:
			return awsjson.Errorf(http.StatusBadRequest, CodeNotFound, "%s", e.Message)
		case capacity.ErrPlanExists:
			return awsjson.Errorf(http.StatusBadRequest, CodeInUse, "%s", e.Message)
		default:
			return awsjson.Validationf("%s", e.Message)
		}
	}
	var ste *endpoint.StrategyError
	if errors.As(err, &ste) {
		return awsjson.Validationf(
			"Value '%s' of tag %s is not a routing strategy; accepted values: [%s]. The tag sets the routing strategy of every production variant and overrides RoutingConfig.RoutingStrategy.",
			ste.Value, endpoint.StrategyTag, strings.Join(ste.Known, ", "))
	}
	if e, ok := endpoint.AsError(err); ok {
		arn := a.arn(e.Resource, e.Name)
		switch e.Kind {
		case endpoint.ErrNotFound:
			return awsjson.Validationf("Could not find %s %q.", e.Resource, arn)
		case endpoint.ErrAlreadyExists:
			return awsjson.Validationf("Cannot create already existing %s %q.", e.Resource, arn)
		case endpoint.ErrInProgress:
			return awsjson.Validationf("Cannot update in-progress endpoint %q.", arn)
		case endpoint.ErrFailedState:
			return awsjson.Validationf("Cannot update endpoint %q because it is in Failed status. Only DeleteEndpoint is allowed on a Failed endpoint.", arn)
		default:
			return awsjson.Validationf("%s", e.Message)
		}
	}
	return nil
}
