package appautoscaling

import (
	"context"
	"fmt"
	"net/http"
	"sort"

	"github.com/capstan-dev/capstan/internal/awsjson"
	"github.com/capstan-dev/capstan/internal/endpoint"
	"github.com/capstan-dev/capstan/internal/store"
)

type registerInput struct {
	targetRef
	MinCapacity    *int              `json:"MinCapacity"`
	MaxCapacity    *int              `json:"MaxCapacity"`
	RoleARN        *string           `json:"RoleARN"`
	SuspendedState *SuspendedState   `json:"SuspendedState"`
	Tags           map[string]string `json:"Tags"`
}

type registerOutput struct {
	ScalableTargetARN string `json:"ScalableTargetARN"`
}

const maxCapacityValue = 1 << 30

func (a *API) registerScalableTarget(ctx context.Context, body []byte) (any, error) {
	var in registerInput
	if err := awsjson.Decode(body, &in); err != nil {
		return nil, err
	}
	var ve validationErrors
	in.check(&ve, true)
	ve.IntRange(in.MinCapacity, 0, maxCapacityValue, "minCapacity")
	ve.IntRange(in.MaxCapacity, 0, maxCapacityValue, "maxCapacity")
	if in.RoleARN != nil {
		ve.Length(*in.RoleARN, 1, 1600, "roleARN")
	}
	if len(in.Tags) > 200 {
		ve.Add(fmt.Sprintf("[%d entries]", len(in.Tags)), "tags", "Member must have length less than or equal to 200")
	}
	if err := ve.Err(); err != nil {
		return nil, err
	}
	k, ep, variant, err := in.resolve()
	if err != nil {
		return nil, err
	}
	zs, zero := a.v.(ZeroScaler)
	if in.MinCapacity != nil && *in.MinCapacity < 1 && !(zero && zs.AllowsZero(ctx, ep)) {
		return nil, awsjson.Validationf("MinCapacity must be at least 1 for scalable dimension %s.", DimensionVariant)
	}
	// A variant holds at most endpoint.MaxInstancesPerVariant instances, so a
	// larger bound could only make every scale-out fail.
	for _, c := range []struct {
		name string
		v    *int
	}{{"MinCapacity", in.MinCapacity}, {"MaxCapacity", in.MaxCapacity}} {
		if c.v != nil && *c.v > endpoint.MaxInstancesPerVariant {
			return nil, awsjson.Validationf("%s must be at most %d for scalable dimension %s (capstan's limit on a variant's instances); got %d.",
				c.name, endpoint.MaxInstancesPerVariant, DimensionVariant, *c.v)
		}
	}
	// The variant must exist (and not be managed by a manifest); its
	// reservation bounds MaxCapacity.
	_, limit, err := a.v.Variant(ctx, ep, variant)
	if err != nil {
		return nil, &resourceError{ResourceID: k.ResourceID, Err: err}
	}

	now := a.clk.Now()
	var out registerOutput
	err = a.st.Update(func(tx *store.Tx) error {
		var t targetRecord
		found, err := tx.Get(bucketTargets, k.String(), &t)
		if err != nil {
			return err
		}
		if !found {
			if in.MinCapacity == nil || in.MaxCapacity == nil {
				return awsjson.Validationf("MinCapacity and MaxCapacity are required when registering a new scalable target.")
			}
			n := 0
			if err := tx.Each(bucketTargets, func(string, []byte) error { n++; return nil }); err != nil {
				return err
			}
			if n >= a.opts.MaxTargets {
				return awsjson.Errorf(http.StatusBadRequest, CodeLimitExceeded,
					"You have reached the maximum number of scalable targets (%d) for service namespace %s.", a.opts.MaxTargets, k.Namespace)
			}
			t = targetRecord{Key: k, Endpoint: ep, Variant: variant, Created: now,
				ARN: fmt.Sprintf("arn:aws:application-autoscaling:%s:%s:scalable-target/%s", a.opts.Region, a.opts.AccountID, targetARNSuffix(a.opts.NewID()))}
		}
		if in.MinCapacity != nil {
			t.Min = *in.MinCapacity
		}
		if in.MaxCapacity != nil {
			t.Max = *in.MaxCapacity
		}
		if t.Min > t.Max {
			return awsjson.Validationf("Minimum capacity cannot be greater than maximum capacity")
		}
		if limit > 0 && t.Max > limit {
			return &reservationError{Endpoint: ep, Variant: variant, Max: t.Max, Limit: limit}
		}
		if in.RoleARN != nil {
			t.RoleARN = *in.RoleARN
		}
		if t.RoleARN == "" {
			t.RoleARN = fmt.Sprintf("arn:aws:iam::%s:role/aws-service-role/sagemaker.application-autoscaling.amazonaws.com/AWSServiceRoleForApplicationAutoScaling_SageMakerEndpoint", a.opts.AccountID)
		}
		if s := in.SuspendedState; s != nil {
			if s.DynamicScalingInSuspended != nil {
				t.SuspendIn = *s.DynamicScalingInSuspended
			}
			if s.DynamicScalingOutSuspended != nil {
				t.SuspendOut = *s.DynamicScalingOutSuspended
			}
			if s.ScheduledScalingSuspended != nil {
				t.SuspendSch = *s.ScheduledScalingSuspended
			}
		}
		out.ScalableTargetARN = t.ARN
		return tx.Put(bucketTargets, k.String(), &t)
	})
	if err != nil {
		return nil, err
	}
	a.log.Info("scalable target registered", "resource", k.ResourceID, "min", derefInt(in.MinCapacity), "max", derefInt(in.MaxCapacity), "reservation_limit", limit)
	return out, nil
}

func derefInt(p *int) any {
	if p == nil {
		return nil
	}
	return *p
}

type describeTargetsInput struct {
	ServiceNamespace  *string  `json:"ServiceNamespace"`
	ResourceIds       []string `json:"ResourceIds"`
	ScalableDimension *string  `json:"ScalableDimension"`
	MaxResults        *int     `json:"MaxResults"`
	NextToken         *string  `json:"NextToken"`
}

// ScalableTarget is the wire shape of a registered target.
type ScalableTarget struct {
	ServiceNamespace  string          `json:"ServiceNamespace"`
	ResourceId        string          `json:"ResourceId"`
	ScalableDimension string          `json:"ScalableDimension"`
	MinCapacity       int             `json:"MinCapacity"`
	MaxCapacity       int             `json:"MaxCapacity"`
	RoleARN           string          `json:"RoleARN"`
	CreationTime      *Epoch          `json:"CreationTime"`
	SuspendedState    *SuspendedState `json:"SuspendedState"`
	ScalableTargetARN string          `json:"ScalableTargetARN"`
}

type describeTargetsOutput struct {
	ScalableTargets []ScalableTarget `json:"ScalableTargets"`
	NextToken       string           `json:"NextToken,omitempty"`
}

func (t *targetRecord) wire() ScalableTarget {
	in, out, sch := t.SuspendIn, t.SuspendOut, t.SuspendSch
	return ScalableTarget{
		ServiceNamespace: t.Key.Namespace, ResourceId: t.Key.ResourceID, ScalableDimension: t.Key.Dimension,
		MinCapacity: t.Min, MaxCapacity: t.Max, RoleARN: t.RoleARN, CreationTime: awsjson.EpochOf(t.Created),
		SuspendedState:    &SuspendedState{&in, &out, &sch},
		ScalableTargetARN: t.ARN,
	}
}

func (a *API) describeScalableTargets(_ context.Context, body []byte) (any, error) {
	var in describeTargetsInput
	if err := awsjson.Decode(body, &in); err != nil {
		return nil, err
	}
	var ve validationErrors
	ve.Required(in.ServiceNamespace != nil, "serviceNamespace")
	ve.enum(in.ServiceNamespace, "serviceNamespace", serviceNamespaces)
	ve.enum(in.ScalableDimension, "scalableDimension", scalableDimensions)
	if len(in.ResourceIds) > 50 {
		ve.Add(fmt.Sprintf("[%d items]", len(in.ResourceIds)), "resourceIds", "Member must have length less than or equal to 50")
	}
	for i, id := range in.ResourceIds {
		ve.Length(id, 1, 1600, fmt.Sprintf("resourceIds.%d.member", i+1))
	}
	if err := ve.Err(); err != nil {
		return nil, err
	}
	ids := map[string]bool{}
	for _, id := range in.ResourceIds {
		ids[id] = true
	}
	var all []targetRecord
	err := a.st.View(func(tx *store.Tx) error {
		ts, err := store.List[targetRecord](tx, bucketTargets)
		all = ts
		return err
	})
	if err != nil {
		return nil, err
	}
	var kept []targetRecord
	for _, t := range all {
		if t.Key.Namespace != *in.ServiceNamespace ||
			(len(ids) > 0 && !ids[t.Key.ResourceID]) ||
			(in.ScalableDimension != nil && t.Key.Dimension != *in.ScalableDimension) {
			continue
		}
		kept = append(kept, t)
	}
	sort.SliceStable(kept, func(i, j int) bool {
		if !kept[i].Created.Equal(kept[j].Created) {
			return kept[i].Created.Before(kept[j].Created)
		}
		return kept[i].Key.String() < kept[j].Key.String()
	})
	start, end, next, err := page(len(kept), in.MaxResults, in.NextToken, 50)
	if err != nil {
		return nil, err
	}
	out := describeTargetsOutput{ScalableTargets: []ScalableTarget{}, NextToken: next}
	for _, t := range kept[start:end] {
		out.ScalableTargets = append(out.ScalableTargets, t.wire())
	}
	return out, nil
}

func (a *API) deregisterScalableTarget(_ context.Context, body []byte) (any, error) {
	var in targetRef
	if err := awsjson.Decode(body, &in); err != nil {
		return nil, err
	}
	var ve validationErrors
	in.check(&ve, true)
	if err := ve.Err(); err != nil {
		return nil, err
	}
	k := targetKey{*in.ServiceNamespace, *in.ResourceId, *in.ScalableDimension}
	err := a.st.Update(func(tx *store.Tx) error {
		if !tx.Exists(bucketTargets, k.String()) {
			return notRegistered(k)
		}
		// Deregistering a target deletes its scaling policies, as in AWS.
		pols, err := store.List[policyRecord](tx, bucketPolicies)
		if err != nil {
			return err
		}
		for _, p := range pols {
			if p.Target == k {
				if err := tx.Delete(bucketPolicies, p.key()); err != nil {
					return err
				}
			}
		}
		return tx.Delete(bucketTargets, k.String())
	})
	if err != nil {
		return nil, err
	}
	a.log.Info("scalable target deregistered", "resource", k.ResourceID)
	return struct{}{}, nil
}
