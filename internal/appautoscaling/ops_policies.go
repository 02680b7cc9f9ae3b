package appautoscaling

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"sort"

	"github.com/capstan-dev/capstan/internal/awsjson"
	"github.com/capstan-dev/capstan/internal/store"
)

type putPolicyInput struct {
	targetRef
	PolicyName                               *string               `json:"PolicyName"`
	PolicyType                               *string               `json:"PolicyType"`
	TargetTrackingScalingPolicyConfiguration *TargetTrackingConfig `json:"TargetTrackingScalingPolicyConfiguration"`
	StepScalingPolicyConfiguration           map[string]any        `json:"StepScalingPolicyConfiguration"`
	PredictiveScalingPolicyConfiguration     map[string]any        `json:"PredictiveScalingPolicyConfiguration"`
}

type putPolicyOutput struct {
	PolicyARN string  `json:"PolicyARN"`
	Alarms    []Alarm `json:"Alarms"`
}

const maxCooldown = 86400

// The range Application Auto Scaling documents for a target-tracking
// TargetValue (values outside it are refused even though the member is a
// double); capstan also needs it positive.
const (
	minTargetValue = 8.515920e-109
	maxTargetValue = 1.174271e+108
)

func (a *API) putScalingPolicy(_ context.Context, body []byte) (any, error) {
	var in putPolicyInput
	if err := awsjson.Decode(body, &in); err != nil {
		return nil, err
	}
	var ve validationErrors
	if ve.Required(in.PolicyName != nil, "policyName") {
		ve.Length(*in.PolicyName, 1, 256, "policyName")
		if *in.PolicyName != "" && !patPrintable.MatchString(*in.PolicyName) {
			ve.Add(*in.PolicyName, "policyName", `Member must satisfy regular expression pattern: \p{Print}+`)
		}
	}
	in.check(&ve, true)
	ve.enum(in.PolicyType, "policyType", policyTypes)
	if c := in.TargetTrackingScalingPolicyConfiguration; c != nil {
		ve.Required(c.TargetValue != nil, "targetTrackingScalingPolicyConfiguration.targetValue")
		ve.IntRange(c.ScaleOutCooldown, 0, math.MaxInt32, "targetTrackingScalingPolicyConfiguration.scaleOutCooldown")
		ve.IntRange(c.ScaleInCooldown, 0, math.MaxInt32, "targetTrackingScalingPolicyConfiguration.scaleInCooldown")
		if p := c.PredefinedMetricSpecification; p != nil {
			ve.Required(p.PredefinedMetricType != "", "targetTrackingScalingPolicyConfiguration.predefinedMetricSpecification.predefinedMetricType")
		}
		if m := c.CustomizedMetricSpecification; m != nil {
			ve.enum(m.Statistic, "targetTrackingScalingPolicyConfiguration.customizedMetricSpecification.statistic", statistics)
		}
	}
	if err := ve.Err(); err != nil {
		return nil, err
	}
	k, _, _, err := in.resolve()
	if err != nil {
		return nil, err
	}
	typ := PolicyStepScaling // the service's default when PolicyType is omitted
	if in.PolicyType != nil {
		typ = *in.PolicyType
	}
	if typ != PolicyTargetTracking {
		return nil, awsjson.Validationf("%s policies are not supported by capstan: use PolicyType %s with a TargetTrackingScalingPolicyConfiguration.", typ, PolicyTargetTracking)
	}
	cfg := in.TargetTrackingScalingPolicyConfiguration
	if err := a.checkTargetTracking(cfg); err != nil {
		return nil, err
	}

	now := a.clk.Now()
	var out putPolicyOutput
	err = a.st.Update(func(tx *store.Tx) error {
		if !tx.Exists(bucketTargets, k.String()) {
			return notRegistered(k)
		}
		p := policyRecord{Target: k, Name: *in.PolicyName}
		found, err := tx.Get(bucketPolicies, p.key(), &p)
		if err != nil {
			return err
		}
		if !found {
			pols, err := store.List[policyRecord](tx, bucketPolicies)
			if err != nil {
				return err
			}
			n := 0
			for _, q := range pols {
				if q.Target == k {
					n++
				}
			}
			if n >= a.opts.MaxPoliciesPerTarget {
				return awsjson.Errorf(http.StatusBadRequest, CodeLimitExceeded,
					"You have reached the maximum number of scaling policies (%d) for scalable target %s.", a.opts.MaxPoliciesPerTarget, k.ResourceID)
			}
			id := a.opts.NewID()
			p.ARN = fmt.Sprintf("arn:aws:autoscaling:%s:%s:scalingPolicy:%s:resource/%s/%s:policyName/%s",
				a.opts.Region, a.opts.AccountID, id, k.Namespace, k.ResourceID, p.Name)
			high, low := alarmNames(k.ResourceID, id)
			p.Alarms = []Alarm{
				{high, fmt.Sprintf("arn:aws:cloudwatch:%s:%s:alarm:%s", a.opts.Region, a.opts.AccountID, high)},
				{low, fmt.Sprintf("arn:aws:cloudwatch:%s:%s:alarm:%s", a.opts.Region, a.opts.AccountID, low)},
			}
			p.Created = now
		}
		p.Type = typ
		p.Config = *cfg
		out = putPolicyOutput{PolicyARN: p.ARN, Alarms: p.Alarms}
		return tx.Put(bucketPolicies, p.key(), &p)
	})
	if err != nil {
		return nil, err
	}
	a.log.Info("scaling policy put", "resource", k.ResourceID, "policy", *in.PolicyName, "target_value", *cfg.TargetValue)
	return out, nil
}

// checkTargetTracking is the service-side validation of a target-tracking
// configuration, past the model's constraints.
func (a *API) checkTargetTracking(c *TargetTrackingConfig) error {
	if c == nil {
		return awsjson.Validationf("TargetTrackingScalingPolicyConfiguration is required for a policy of type %s.", PolicyTargetTracking)
	}
	if v := *c.TargetValue; !(v >= minTargetValue && v <= maxTargetValue) {
		return awsjson.Validationf("TargetValue must be between %g and %g (got %v).", minTargetValue, maxTargetValue, v)
	}
	for _, cd := range []struct {
		name string
		v    *int
	}{{"ScaleOutCooldown", c.ScaleOutCooldown}, {"ScaleInCooldown", c.ScaleInCooldown}} {
		if cd.v != nil && *cd.v > maxCooldown {
			return awsjson.Validationf("%s must be at most %d seconds (got %d).", cd.name, maxCooldown, *cd.v)
		}
	}
	pre, cus := c.PredefinedMetricSpecification, c.CustomizedMetricSpecification
	switch {
	case pre == nil && cus == nil:
		return awsjson.Validationf("Either PredefinedMetricSpecification or CustomizedMetricSpecification must be specified.")
	case pre != nil && cus != nil:
		return awsjson.Validationf("Only one of PredefinedMetricSpecification or CustomizedMetricSpecification may be specified.")
	case pre != nil:
		if pre.PredefinedMetricType != PredefinedInvocationsPerInstance {
			return awsjson.Validationf("PredefinedMetricType %s is not supported for scalable dimension %s in capstan: use %s or a CustomizedMetricSpecification.",
				pre.PredefinedMetricType, DimensionVariant, PredefinedInvocationsPerInstance)
		}
	default:
		if len(cus.Metrics) > 0 {
			return awsjson.Validationf("CustomizedMetricSpecification.Metrics (metric math) is not supported by capstan: give MetricName, Namespace, Dimensions and Statistic.")
		}
		if cus.MetricName == nil || *cus.MetricName == "" || cus.Namespace == nil || *cus.Namespace == "" || cus.Statistic == nil {
			return awsjson.Validationf("CustomizedMetricSpecification requires MetricName, Namespace and Statistic.")
		}
		if !oneOf(*cus.Namespace, metricNamespaces) {
			return awsjson.Validationf("Metric namespace %s is not available in capstan: use one of %s.", *cus.Namespace, enumText(metricNamespaces))
		}
		for _, d := range cus.Dimensions {
			if d.Name != "EndpointName" && d.Name != "VariantName" {
				return awsjson.Validationf("Metric dimension %s is not available in capstan: use EndpointName and VariantName.", d.Name)
			}
		}
	}
	return nil
}

type describePoliciesInput struct {
	ServiceNamespace  *string  `json:"ServiceNamespace"`
	PolicyNames       []string `json:"PolicyNames"`
	ResourceId        *string  `json:"ResourceId"`
	ScalableDimension *string  `json:"ScalableDimension"`
	MaxResults        *int     `json:"MaxResults"`
	NextToken         *string  `json:"NextToken"`
}

// ScalingPolicy is the wire shape of a policy.
type ScalingPolicy struct {
	PolicyARN                                string                `json:"PolicyARN"`
	PolicyName                               string                `json:"PolicyName"`
	ServiceNamespace                         string                `json:"ServiceNamespace"`
	ResourceId                               string                `json:"ResourceId"`
	ScalableDimension                        string                `json:"ScalableDimension"`
	PolicyType                               string                `json:"PolicyType"`
	TargetTrackingScalingPolicyConfiguration *TargetTrackingConfig `json:"TargetTrackingScalingPolicyConfiguration,omitempty"`
	Alarms                                   []Alarm               `json:"Alarms"`
	CreationTime                             *Epoch                `json:"CreationTime"`
}

type describePoliciesOutput struct {
	ScalingPolicies []ScalingPolicy `json:"ScalingPolicies"`
	NextToken       string          `json:"NextToken,omitempty"`
}

func (a *API) describeScalingPolicies(_ context.Context, body []byte) (any, error) {
	var in describePoliciesInput
	if err := awsjson.Decode(body, &in); err != nil {
		return nil, err
	}
	var ve validationErrors
	ref := targetRef{in.ServiceNamespace, in.ResourceId, in.ScalableDimension}
	ref.check(&ve, false)
	if len(in.PolicyNames) > 50 {
		ve.Add(fmt.Sprintf("[%d items]", len(in.PolicyNames)), "policyNames", "Member must have length less than or equal to 50")
	}
	for i, n := range in.PolicyNames {
		ve.Length(n, 1, 1600, fmt.Sprintf("policyNames.%d.member", i+1))
	}
	if err := ve.Err(); err != nil {
		return nil, err
	}
	names := map[string]bool{}
	for _, n := range in.PolicyNames {
		names[n] = true
	}
	var all []policyRecord
	err := a.st.View(func(tx *store.Tx) error {
		ps, err := store.List[policyRecord](tx, bucketPolicies)
		all = ps
		return err
	})
	if err != nil {
		return nil, err
	}
	var kept []policyRecord
	for _, p := range all {
		if p.Target.Namespace != *in.ServiceNamespace ||
			(in.ResourceId != nil && p.Target.ResourceID != *in.ResourceId) ||
			(in.ScalableDimension != nil && p.Target.Dimension != *in.ScalableDimension) ||
			(len(names) > 0 && !names[p.Name]) {
			continue
		}
		kept = append(kept, p)
	}
	sort.SliceStable(kept, func(i, j int) bool {
		if !kept[i].Created.Equal(kept[j].Created) {
			return kept[i].Created.Before(kept[j].Created)
		}
		return kept[i].key() < kept[j].key()
	})
	start, end, next, err := page(len(kept), in.MaxResults, in.NextToken, 10)
	if err != nil {
		return nil, err
	}
	out := describePoliciesOutput{ScalingPolicies: []ScalingPolicy{}, NextToken: next}
	for _, p := range kept[start:end] {
		cfg := p.Config
		out.ScalingPolicies = append(out.ScalingPolicies, ScalingPolicy{
			PolicyARN: p.ARN, PolicyName: p.Name, ServiceNamespace: p.Target.Namespace, ResourceId: p.Target.ResourceID,
			ScalableDimension: p.Target.Dimension, PolicyType: p.Type, TargetTrackingScalingPolicyConfiguration: &cfg,
			Alarms: p.Alarms, CreationTime: awsjson.EpochOf(p.Created),
		})
	}
	return out, nil
}

type deletePolicyInput struct {
	targetRef
	PolicyName *string `json:"PolicyName"`
}

func (a *API) deleteScalingPolicy(_ context.Context, body []byte) (any, error) {
	var in deletePolicyInput
	if err := awsjson.Decode(body, &in); err != nil {
		return nil, err
	}
	var ve validationErrors
	if ve.Required(in.PolicyName != nil, "policyName") {
		ve.Length(*in.PolicyName, 1, 256, "policyName")
	}
	in.check(&ve, true)
	if err := ve.Err(); err != nil {
		return nil, err
	}
	k := targetKey{*in.ServiceNamespace, *in.ResourceId, *in.ScalableDimension}
	p := policyRecord{Target: k, Name: *in.PolicyName}
	err := a.st.Update(func(tx *store.Tx) error {
		if !tx.Exists(bucketPolicies, p.key()) {
			return awsjson.Errorf(http.StatusBadRequest, CodeObjectNotFound,
				"No scaling policy found for service namespace: %s, resource ID: %s, scalable dimension: %s, policy name: %s",
				k.Namespace, k.ResourceID, k.Dimension, p.Name)
		}
		return tx.Delete(bucketPolicies, p.key())
	})
	if err != nil {
		return nil, err
	}
	a.log.Info("scaling policy deleted", "resource", k.ResourceID, "policy", p.Name)
	return struct{}{}, nil
}
