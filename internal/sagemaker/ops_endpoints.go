package sagemaker

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/capstan-dev/capstan/internal/awsjson"
	"github.com/capstan-dev/capstan/internal/endpoint"
)

type createEndpointInput struct {
	EndpointName       *string        `json:"EndpointName"`
	EndpointConfigName *string        `json:"EndpointConfigName"`
	Tags               []endpoint.Tag `json:"Tags"`
}

func (a *API) createEndpoint(ctx context.Context, body []byte) (any, error) {
	var in createEndpointInput
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	var ve validationError
	ve.name(in.EndpointName, "endpointName", patResourceName, patResourceNameText)
	ve.name(in.EndpointConfigName, "endpointConfigName", patResourceName, patResourceNameText)
	ve.tags(in.Tags)
	if err := ve.Err(); err != nil {
		return nil, err
	}
	ep, err := a.svc.CreateEndpoint(ctx, *in.EndpointName, *in.EndpointConfigName, in.Tags)
	if err != nil {
		return nil, err
	}
	return map[string]string{"EndpointArn": a.arn(endpoint.ResEndpoint, ep.Name)}, nil
}

type variantStatus struct {
	Status        string `json:"Status"`
	StatusMessage string `json:"StatusMessage,omitempty"`
	StartTime     *Epoch `json:"StartTime,omitempty"`
}

type variantSummary struct {
	VariantName          string                  `json:"VariantName"`
	CurrentWeight        *float64                `json:"CurrentWeight,omitempty"`
	DesiredWeight        *float64                `json:"DesiredWeight,omitempty"`
	CurrentInstanceCount *int                    `json:"CurrentInstanceCount,omitempty"`
	DesiredInstanceCount *int                    `json:"DesiredInstanceCount,omitempty"`
	InstanceType         string                  `json:"InstanceType,omitempty"`
	VariantStatus        []variantStatus         `json:"VariantStatus,omitempty"`
	RoutingConfig        *endpoint.RoutingConfig `json:"RoutingConfig,omitempty"`
	CapacityReservation  *reservationSummary     `json:"CapacityReservationConfig,omitempty"`
	// Serverless variants (their instance counts are capstan's replicas
	// at the moment, an addition to what SageMaker shows).
	CurrentServerlessConfig *endpoint.ServerlessConfig `json:"CurrentServerlessConfig,omitempty"`
	DesiredServerlessConfig *endpoint.ServerlessConfig `json:"DesiredServerlessConfig,omitempty"`
}

// reservationSummary is ProductionVariantSummary.CapacityReservationConfig.
type reservationSummary struct {
	CapacityReservationPreference string `json:"CapacityReservationPreference"`
	MlReservationArn              string `json:"MlReservationArn"`
	TotalInstanceCount            int    `json:"TotalInstanceCount"`
	AvailableInstanceCount        int    `json:"AvailableInstanceCount"`
	UsedByCurrentEndpoint         int    `json:"UsedByCurrentEndpoint"`
}

// reservation fills s's reservation counts for reserved-only variant v.
func (a *API) reservation(s *variantSummary, v endpoint.VariantState, used int) {
	if v.Reservation.IsZero() {
		return
	}
	r := &reservationSummary{CapacityReservationPreference: endpoint.PreferenceReservedOnly, MlReservationArn: v.ReservationArn,
		UsedByCurrentEndpoint: used}
	if a.opts.Capacity != nil {
		if pv, err := a.opts.Capacity.GetPlan(v.Reservation.Key); err == nil {
			r.TotalInstanceCount, r.AvailableInstanceCount = pv.Total(), pv.Available
		}
	}
	s.CapacityReservation = r
}

type pendingSummary struct {
	EndpointConfigName string           `json:"EndpointConfigName"`
	ProductionVariants []variantSummary `json:"ProductionVariants,omitempty"`
	StartTime          *Epoch           `json:"StartTime,omitempty"`
}

type describeEndpointOutput struct {
	EndpointName             string            `json:"EndpointName"`
	EndpointArn              string            `json:"EndpointArn"`
	EndpointConfigName       string            `json:"EndpointConfigName,omitempty"`
	ProductionVariants       []variantSummary  `json:"ProductionVariants,omitempty"`
	EndpointStatus           string            `json:"EndpointStatus"`
	FailureReason            string            `json:"FailureReason,omitempty"`
	CreationTime             Epoch             `json:"CreationTime"`
	LastModifiedTime         Epoch             `json:"LastModifiedTime"`
	PendingDeploymentSummary *pendingSummary   `json:"PendingDeploymentSummary,omitempty"`
	LastDeploymentConfig     *deploymentConfig `json:"LastDeploymentConfig,omitempty"`
	AsyncInferenceConfig     json.RawMessage   `json:"AsyncInferenceConfig,omitempty"`
}

func ptr[T any](v T) *T { return &v }

// summarize turns one variant's state into its wire summary. serving says the
// deployment takes traffic (its counts are current); otherwise only desired
// values are known.
func summarize(v endpoint.VariantState, serving bool, status string, since *Epoch) variantSummary {
	s := variantSummary{VariantName: v.Name, DesiredWeight: ptr(v.DesiredWeight), DesiredInstanceCount: ptr(v.DesiredCount)}
	if v.RoutingStrategy != "" {
		s.RoutingConfig = &endpoint.RoutingConfig{RoutingStrategy: v.RoutingStrategy}
	}
	if v.Serverless != nil {
		s.DesiredServerlessConfig = v.Serverless
		if v.DesiredServerless != nil {
			s.DesiredServerlessConfig = v.DesiredServerless
		}
	}
	if serving {
		s.CurrentWeight = ptr(v.Weight)
		s.CurrentInstanceCount = ptr(len(v.Replicas))
		s.CurrentServerlessConfig = v.Serverless
		// A serverless variant's count follows its load: not an update.
		scaling := len(v.Replicas) != v.DesiredCount && v.Serverless == nil
		if v.Weight != v.DesiredWeight || scaling || !s.CurrentServerlessConfig.Equal(s.DesiredServerlessConfig) {
			status = "Updating"
		}
	} else {
		s.CurrentWeight = ptr(0.0)
		s.CurrentInstanceCount = ptr(0)
		s.InstanceType = ""
	}
	if status != "" {
		s.VariantStatus = []variantStatus{{Status: status, StartTime: since}}
	}
	return s
}

func (a *API) describe(ep endpoint.Endpoint) describeEndpointOutput {
	out := describeEndpointOutput{EndpointName: ep.Name, EndpointArn: a.arn(endpoint.ResEndpoint, ep.Name),
		EndpointStatus: ep.Status, FailureReason: ep.FailureReason,
		CreationTime: Epoch{Time: ep.CreationTime}, LastModifiedTime: Epoch{Time: ep.LastModifiedTime},
		LastDeploymentConfig: wireDeploymentConfig(ep.LastPolicy)}
	switch {
	case ep.Current != nil:
		out.EndpointConfigName = ep.Current.ConfigName
		for _, v := range ep.Current.Variants {
			status := ""
			if ep.Status == endpoint.StatusDeleting {
				status = "Deleting"
			}
			s := summarize(v, true, status, awsjson.EpochOf(v.ChangeStart))
			a.reservation(&s, v, len(v.Replicas))
			out.ProductionVariants = append(out.ProductionVariants, s)
		}
		if ep.Pending != nil && ep.Status == endpoint.StatusUpdating {
			out.PendingDeploymentSummary = a.pending(ep)
		}
	case ep.Pending != nil:
		out.EndpointConfigName = ep.Pending.ConfigName
		status := "Creating"
		if ep.Status == endpoint.StatusDeleting {
			status = "Deleting"
		}
		for _, v := range ep.Pending.Variants {
			s := summarize(v, false, status, awsjson.EpochOf(ep.Pending.StartTime))
			a.reservation(&s, v, 0)
			if v.Waiting != "" {
				s.VariantStatus[0].StatusMessage = v.Waiting
			}
			out.ProductionVariants = append(out.ProductionVariants, s)
		}
	}
	return out
}

// pending is the update in progress as PendingDeploymentSummary. Each new
// variant counts the instances recorded for it so far; its status is the
// rollout's phase: Creating while a blue/green side comes up without
// traffic, Baking once it has traffic (a canary or linear step, or the
// termination wait), Updating while a rolling update replaces instances,
// Deleting while a failed update is rolled back.
func (a *API) pending(ep endpoint.Endpoint) *pendingSummary {
	p := ep.Pending
	ps := &pendingSummary{EndpointConfigName: p.ConfigName, StartTime: awsjson.EpochOf(p.StartTime)}
	rolling := ep.Rollout != nil && ep.Rollout.Policy.Rolling != nil
	for _, v := range p.Variants {
		s := summarize(v, false, "", nil)
		s.CurrentWeight, s.CurrentInstanceCount, s.InstanceType = nil, ptr(len(v.Replicas)), v.InstanceType
		st := variantStatus{Status: "Creating", StatusMessage: v.Waiting, StartTime: awsjson.EpochOf(p.StartTime)}
		switch {
		case ep.Rollout != nil && ep.Rollout.RollingBack:
			// The record has no time for the rollback's start: none is shown.
			st = variantStatus{Status: "Deleting", StatusMessage: "Rolling back: " + ep.Rollout.Reason}
		case rolling:
			st.Status = "Updating"
		case v.Share > 0:
			st.Status, st.StartTime = "Baking", awsjson.EpochOf(v.StepAt)
			fallthrough
		default:
			// Blue/green routes the new side DesiredWeight × its share.
			s.CurrentWeight = ptr(v.DesiredWeight * v.Share)
		}
		s.VariantStatus = []variantStatus{st}
		a.reservation(&s, v, len(v.Replicas))
		ps.ProductionVariants = append(ps.ProductionVariants, s)
	}
	return ps
}

func (a *API) describeEndpoint(ctx context.Context, body []byte) (any, error) {
	var in nameInput
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	var ve validationError
	ve.name(in.EndpointName, "endpointName", patResourceName, patResourceNameText)
	if err := ve.Err(); err != nil {
		return nil, err
	}
	ep, err := a.svc.GetEndpoint(ctx, *in.EndpointName)
	if err != nil {
		return nil, err
	}
	out := a.describe(ep)
	if out.EndpointConfigName != "" {
		if c, err := a.svc.GetEndpointConfig(ctx, out.EndpointConfigName); err == nil {
			out.AsyncInferenceConfig = c.AsyncInferenceConfig
		}
	}
	return out, nil
}

type updateEndpointInput struct {
	EndpointName                     *string `json:"EndpointName"`
	EndpointConfigName               *string `json:"EndpointConfigName"`
	RetainAllVariantProperties       bool    `json:"RetainAllVariantProperties"`
	ExcludeRetainedVariantProperties []any   `json:"ExcludeRetainedVariantProperties"`
	RetainDeploymentConfig           bool    `json:"RetainDeploymentConfig"`
	// DeploymentConfig is decoded on its own (decodeDeploymentConfig), which
	// refuses unknown members with their path.
	DeploymentConfig json.RawMessage `json:"DeploymentConfig"`
}

func (a *API) updateEndpoint(ctx context.Context, body []byte) (any, error) {
	var in updateEndpointInput
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	var ve validationError
	ve.name(in.EndpointName, "endpointName", patResourceName, patResourceNameText)
	ve.name(in.EndpointConfigName, "endpointConfigName", patResourceName, patResourceNameText)
	ve.listLen(len(in.ExcludeRetainedVariantProperties), 0, 3, "excludeRetainedVariantProperties")
	dc, err := decodeDeploymentConfig(in.DeploymentConfig, &ve)
	if err != nil {
		return nil, err
	}
	if err := ve.Err(); err != nil {
		return nil, err
	}
	o := endpoint.UpdateOptions{RetainPolicy: in.RetainDeploymentConfig}
	if dc != nil {
		o.Policy = ptr(dc.policy())
	}
	ep, err := a.svc.UpdateEndpoint(ctx, *in.EndpointName, *in.EndpointConfigName, o)
	if err != nil {
		return nil, &policyError{policy: o.Policy, err: err}
	}
	return map[string]string{"EndpointArn": a.arn(endpoint.ResEndpoint, ep.Name)}, nil
}

type desiredInput struct {
	VariantName            *string  `json:"VariantName"`
	DesiredWeight          *float64 `json:"DesiredWeight"`
	DesiredInstanceCount   *int     `json:"DesiredInstanceCount"`
	ServerlessUpdateConfig *struct {
		MaxConcurrency         *int `json:"MaxConcurrency"`
		ProvisionedConcurrency *int `json:"ProvisionedConcurrency"`
	} `json:"ServerlessUpdateConfig"`
}

func (a *API) updateWeights(ctx context.Context, body []byte) (any, error) {
	var in struct {
		EndpointName                *string        `json:"EndpointName"`
		DesiredWeightsAndCapacities []desiredInput `json:"DesiredWeightsAndCapacities"`
	}
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	var ve validationError
	ve.name(in.EndpointName, "endpointName", patResourceName, patResourceNameText)
	if ve.Required(in.DesiredWeightsAndCapacities != nil, "desiredWeightsAndCapacities") {
		ve.listLen(len(in.DesiredWeightsAndCapacities), 1, endpoint.MaxVariants, "desiredWeightsAndCapacities")
	}
	if len(in.DesiredWeightsAndCapacities) > endpoint.MaxVariants {
		return nil, ve.Err()
	}
	var desired []endpoint.Desired
	for i, d := range in.DesiredWeightsAndCapacities {
		p := fmt.Sprintf("desiredWeightsAndCapacities.%d.member", i+1)
		ve.name(d.VariantName, p+".variantName", patResourceName, patResourceNameText)
		ve.minFloat(d.DesiredWeight, 0, p+".desiredWeight")
		ve.IntRange(d.DesiredInstanceCount, 0, endpoint.MaxInstancesPerVariant, p+".desiredInstanceCount")
		var su *endpoint.ServerlessUpdate
		if u := d.ServerlessUpdateConfig; u != nil {
			sp := p + ".serverlessUpdateConfig"
			ve.IntRange(u.MaxConcurrency, 1, endpoint.MaxServerlessConcurrency, sp+".maxConcurrency")
			ve.IntRange(u.ProvisionedConcurrency, 1, endpoint.MaxServerlessConcurrency, sp+".provisionedConcurrency")
			su = &endpoint.ServerlessUpdate{MaxConcurrency: u.MaxConcurrency, ProvisionedConcurrency: u.ProvisionedConcurrency}
		}
		if d.VariantName != nil {
			desired = append(desired, endpoint.Desired{VariantName: *d.VariantName, Weight: d.DesiredWeight, InstanceCount: d.DesiredInstanceCount,
				Serverless: su})
		}
	}
	if err := ve.Err(); err != nil {
		return nil, err
	}
	ep, err := a.svc.UpdateWeightsAndCapacities(ctx, *in.EndpointName, desired)
	if err != nil {
		return nil, err
	}
	return map[string]string{"EndpointArn": a.arn(endpoint.ResEndpoint, ep.Name)}, nil
}

func (a *API) listEndpoints(ctx context.Context, body []byte) (any, error) {
	return list(ctx, body, "Endpoints", a.svc.ListEndpoints, func(ep endpoint.Endpoint) summary {
		return summary{Kind: "Endpoint", Name: ep.Name, Arn: a.arn(endpoint.ResEndpoint, ep.Name), CreationTime: Epoch{Time: ep.CreationTime},
			Modified: Epoch{Time: ep.LastModifiedTime}, Status: ep.Status}
	}, "Name", "CreationTime", "Status")
}
