package sagemaker

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/capstan-dev/capstan/internal/alarm"
	"github.com/capstan-dev/capstan/internal/awsjson"
	"github.com/capstan-dev/capstan/internal/capacity"
	"github.com/capstan-dev/capstan/internal/endpoint"
	"github.com/capstan-dev/capstan/internal/fleet"
	"github.com/capstan-dev/capstan/internal/hyperpod"
	"github.com/capstan-dev/capstan/internal/placement"
	"github.com/capstan-dev/capstan/internal/serving"
	"github.com/capstan-dev/capstan/internal/tagging"
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
	CodeConflict         = "ConflictException"
)

// validationError collects violations in AWS's words; the helpers in validate.go
// add the constraints this API checks.
type validationError struct{ awsjson.Violations }

// toWire maps the domain errors the control API meets to their wire form,
// nil for any other (awsjson.Handler maps those). It is the only place that
// does so for the control API.
func (a *API) toWire(err error) *awsjson.Error {
	if we := clusterError(err); we != nil {
		return we
	}
	if we := tagError(err); we != nil {
		return we
	}
	var uce *endpoint.UpdateCapacityError
	if errors.As(err, &uce) {
		return a.updateCapacityError(uce)
	}
	if fes := fieldErrors(err); len(fes) > 0 {
		var pe *policyError
		var p *serving.Policy
		if errors.As(err, &pe) {
			p = pe.policy
		}
		parts := make([]string, len(fes))
		for i, fe := range fes {
			parts[i] = fmt.Sprintf("Value at '%s' failed to satisfy constraint: %s", wirePolicyField(fe.Field, p), fe.Message)
		}
		noun := "error"
		if len(parts) > 1 {
			noun = "errors"
		}
		return awsjson.Validationf("%d validation %s detected: %s", len(parts), noun, strings.Join(parts, "; "))
	}
	var ua *alarm.UnknownAlarmError
	if errors.As(err, &ua) {
		return awsjson.Validationf(
			"1 validation error detected: Value '%s' at 'deploymentConfig.autoRollbackConfiguration.alarms' failed to satisfy constraint: "+
				"Member must name alarms defined in the server's configuration (the alarms list of capstan.yaml); not defined: %s",
			strings.Join(ua.Names, ", "), strings.Join(ua.Names, ", "))
	}
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

// rollingHint is the DeploymentConfig that replaces instances in place,
// as the AWS CLI takes it.
const rollingHint = `--deployment-config '{"RollingUpdatePolicy":{"MaximumBatchSize":{"Type":"INSTANCE_COUNT","Value":1},"WaitIntervalInSeconds":0}}'`

// updateCapacityError words a blue/green update whose new side does not fit
// beside the serving one, with what is free and what to do instead.
func (a *API) updateCapacityError(e *endpoint.UpdateCapacityError) *awsjson.Error {
	arn := a.arn(endpoint.ResEndpoint, e.Endpoint)
	var where string
	var pe *placement.LimitError
	var le *fleet.LimitError
	switch {
	case errors.As(e.Err, &pe) && pe.Total == 0:
		return awsjson.Validationf("Training plan %s does not exist or has expired.", pe.Name)
	case errors.As(e.Err, &pe):
		// The error's Available counts this endpoint's own instances as free
		// for it; the plan's view says what nobody holds.
		free := max(pe.Available-e.Serving, 0)
		if a.opts.Capacity != nil {
			if pv, err := a.opts.Capacity.GetPlan(pe.Plan.Key); err == nil {
				free = pv.Available
			}
		}
		where = fmt.Sprintf("instance(s) of training plan %s beside the %d serving, and the plan has %d free (%d in total)",
			pe.Name, e.Serving, free, pe.Total)
	case errors.As(e.Err, &le):
		where = fmt.Sprintf("%s instance(s) beside the %d serving, and the account limit of %d %s instances leaves %d free",
			le.InstanceType, e.Serving, le.Total, le.InstanceType, max(le.Available-e.Serving, 0))
	default:
		where = fmt.Sprintf("instance(s) beside the %d serving, and there is no room for them (%v)", e.Serving, e.Err)
	}
	return awsjson.Validationf("Cannot update endpoint %s with a blue/green deployment: the new configuration needs %d %s. "+
		"Update with %s to replace instances in place, or use a configuration that fits.", arn, e.Needed, where, rollingHint)
}

// clusterError maps the hyperpod service's errors. It runs before the
// limit errors below: a CapacityError wraps a fleet or placement
// LimitError, which is worded for clusters here, not for endpoints.
func clusterError(err error) *awsjson.Error {
	var nf *hyperpod.NotFoundError
	var ex *hyperpod.ExistsError
	var ce *hyperpod.ConflictError
	var fe *hyperpod.FieldError
	var ca *hyperpod.CapacityError
	var le *hyperpod.LimitError
	switch {
	case errors.As(err, &le):
		return awsjson.Errorf(http.StatusBadRequest, CodeLimitExceeded, "%s", le.Error())
	case errors.As(err, &nf):
		// The real wording is unconfirmed (sagemaker-api.md §3.2); this is
		// the "<Kind> with name X not found" form tools match on.
		what := "name"
		if nf.Kind == "node" {
			what = "id"
		}
		return awsjson.Errorf(http.StatusBadRequest, CodeNotFound, "%s with %s %s not found.", capitalize(nf.Kind), what, nf.Name)
	case errors.As(err, &ex):
		return awsjson.Errorf(http.StatusBadRequest, CodeInUse,
			"Resource Already Exists: Cluster with name %s already exists. Choose a different name.", ex.Name)
	case errors.As(err, &ce):
		return awsjson.Errorf(http.StatusBadRequest, CodeConflict, "%s", ce.Message)
	case errors.As(err, &fe):
		return awsjson.Validationf("1 validation error detected: Value at '%s' failed to satisfy constraint: %s", fe.Field, fe.Message)
	case errors.As(err, &ca):
		return capacityError(ca)
	}
	return nil
}

// capacityError words a group that asked for more instances than its
// source has free.
func capacityError(e *hyperpod.CapacityError) *awsjson.Error {
	var pe *placement.LimitError
	var le *fleet.LimitError
	switch {
	case errors.As(e.Err, &pe) && pe.Total == 0:
		// Nothing to raise a limit on: the plan is not there.
		return awsjson.Validationf("Instance group %s: training plan %s does not exist or has expired.", e.Group, pe.Name)
	case errors.As(e.Err, &pe):
		return awsjson.Errorf(http.StatusBadRequest, CodeLimitExceeded,
			"Instance group %s: training plan %s has %d instances (%d available to this cluster); %d were requested. Request at most %d, or reserve more capacity.",
			e.Group, pe.Name, pe.Total, pe.Available, pe.Requested, pe.Available)
	case errors.As(e.Err, &le):
		return awsjson.Errorf(http.StatusBadRequest, CodeLimitExceeded,
			"The account-level service limit '%s for cluster usage' is %d Instances, of which %d are available to this cluster; instance group %s would hold %d. Please use AWS Service Quotas to request an increase for this quota. If AWS Service Quotas is not available, contact AWS support to request an increase for this quota.",
			le.InstanceType, le.Total, le.Available, e.Group, le.Requested)
	}
	return awsjson.Errorf(http.StatusBadRequest, CodeLimitExceeded, "%s", e.Error())
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// wireMessage is the message err goes to the wire with, for operations that
// report an error inside a result (BatchAddClusterNodes' Failed).
func (a *API) wireMessage(err error) string {
	var we *awsjson.Error
	if errors.As(err, &we) {
		return we.Message
	}
	if we := a.toWire(err); we != nil {
		return we.Message
	}
	a.opts.Logger.Error("cluster operation failed", "err", err)
	return "An internal error occurred."
}

// tagError maps the tag service's errors. AddTags, ListTags and DeleteTags
// declare no modelled errors, so both are ValidationExceptions, as a
// missing resource is for them in SageMaker.
func tagError(err error) *awsjson.Error {
	var nf *tagging.NotFoundError
	var le *tagging.LimitError
	switch {
	case errors.As(err, &nf) && nf.Type != "":
		return awsjson.Validationf("Resource %s does not exist: capstan has no resources of type %q "+
			"(it tags models, endpoint configurations, endpoints, training plans and clusters).", nf.ARN, nf.Type)
	case errors.As(err, &nf):
		return awsjson.Validationf("Resource %s does not exist.", nf.ARN)
	case errors.As(err, &le):
		return awsjson.Validationf("Value at 'tags' failed to satisfy constraint: resource %s has %d tags and this request adds %d new keys; "+
			"a resource has at most %d tags. Delete tags with DeleteTags first, or add fewer.", le.ARN, le.Have, le.New, le.Max)
	}
	return nil
}
