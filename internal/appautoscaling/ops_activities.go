package appautoscaling

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/capstan-dev/capstan/internal/awsjson"
	"github.com/capstan-dev/capstan/internal/store"
)

type describeActivitiesOutput struct {
	ScalingActivities []ScalingActivity `json:"ScalingActivities"`
	NextToken         string            `json:"NextToken,omitempty"`
}

type describeActivitiesInput struct {
	ServiceNamespace           *string `json:"ServiceNamespace"`
	ResourceId                 *string `json:"ResourceId"`
	ScalableDimension          *string `json:"ScalableDimension"`
	MaxResults                 *int    `json:"MaxResults"`
	NextToken                  *string `json:"NextToken"`
	IncludeNotScaledActivities *bool   `json:"IncludeNotScaledActivities"`
}

func (a *API) describeScalingActivities(_ context.Context, body []byte) (any, error) {
	var in describeActivitiesInput
	if err := awsjson.Decode(body, &in); err != nil {
		return nil, err
	}
	var ve validationErrors
	ref := targetRef{in.ServiceNamespace, in.ResourceId, in.ScalableDimension}
	ref.check(&ve, false)
	if err := ve.Err(); err != nil {
		return nil, err
	}
	notScaled := in.IncludeNotScaledActivities != nil && *in.IncludeNotScaledActivities
	var kept []ScalingActivity
	err := a.st.View(func(tx *store.Tx) error {
		return tx.Each(bucketActivities, func(name string, raw []byte) error {
			var r activityRecord
			if err := json.Unmarshal(raw, &r); err != nil {
				return fmt.Errorf("decode activity %s: %w", name, err)
			}
			if r.Target.Namespace != *in.ServiceNamespace ||
				(in.ResourceId != nil && r.Target.ResourceID != *in.ResourceId) ||
				(in.ScalableDimension != nil && r.Target.Dimension != *in.ScalableDimension) ||
				(!notScaled && len(r.NotScaledReasons) > 0) {
				return nil
			}
			kept = append(kept, r.ScalingActivity)
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	// Keys sort oldest first within a target; the API lists newest first.
	sortActivitiesNewestFirst(kept)
	start, end, next, err := page(len(kept), in.MaxResults, in.NextToken, 50)
	if err != nil {
		return nil, err
	}
	out := describeActivitiesOutput{ScalingActivities: []ScalingActivity{}, NextToken: next}
	out.ScalingActivities = append(out.ScalingActivities, kept[start:end]...)
	return out, nil
}
