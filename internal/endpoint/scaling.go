package endpoint

import "context"

// VariantCapacity returns a serving variant's desired instance count and the
// most it may have: its training plan's instance count for a reserved-only
// variant, 0 (unbounded) otherwise. Scalers (Application Auto Scaling) read
// it so that they never ask beyond a reservation.
func (s *Service) VariantCapacity(ctx context.Context, name, variant string) (desired, limit int, err error) {
	ep, err := s.GetEndpoint(ctx, name)
	if err != nil {
		return 0, 0, err
	}
	if ep.ManagedBy != "" {
		return 0, 0, invalidf("Endpoint %q is managed by %s, which scales it with its autoScalingSpec.", name, ep.ManagedBy)
	}
	if ep.Current == nil {
		return 0, 0, invalidf("Endpoint %q has no deployed variants.", name)
	}
	for _, v := range ep.Current.Variants {
		if v.Name != variant {
			continue
		}
		if !v.Reservation.IsZero() && s.res != nil {
			if p, ok := s.res.Plan(v.Reservation); ok {
				limit = p.Total
			}
		}
		return v.DesiredCount, limit, nil
	}
	return 0, 0, &Error{Kind: ErrNotFound, Resource: "variant", Name: variant}
}

// SetVariantCount is UpdateEndpointWeightsAndCapacities for one variant's
// instance count.
func (s *Service) SetVariantCount(ctx context.Context, name, variant string, n int) error {
	_, err := s.UpdateWeightsAndCapacities(ctx, name, []Desired{{VariantName: variant, InstanceCount: &n}})
	return err
}
