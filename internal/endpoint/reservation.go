package endpoint

import (
	"strings"
	"time"

	"github.com/capstan-dev/capstan/internal/placement"
	"github.com/capstan-dev/capstan/internal/store"
)

// PreferenceReservedOnly is the only CapacityReservationPreference SageMaker
// defines: run only on the reservation's instances and stop when it ends.
const PreferenceReservedOnly = "capacity-reservations-only"

// PlanRefFromArn returns the plan named by a training-plan ARN
// (arn:aws:sagemaker:<region>:<acct>:training-plan/<name>).
func PlanRefFromArn(arn string) (placement.PlanRef, bool) {
	_, name, ok := strings.Cut(arn, ":training-plan/")
	if !ok || name == "" || strings.Contains(name, "/") {
		return placement.PlanRef{}, false
	}
	return placement.PlanNamed(name), true
}

// checkReservation validates a reserved-only variant against its plan.
// For an endpoint (owner) the count is checked against what the plan still
// has free, not counting owner's own use; for a config (owner "") against the
// plan's size.
func checkReservation(tx *store.Tx, r placement.Plans, v Variant, owner string, now time.Time) error {
	crc := v.CapacityReservationConfig
	if crc == nil || (crc.CapacityReservationPreference == "" && crc.MlReservationArn == "") {
		return nil
	}
	if crc.CapacityReservationPreference != PreferenceReservedOnly {
		return invalidf("Variant %s: CapacityReservationPreference must be %q.", v.VariantName, PreferenceReservedOnly)
	}
	ref, ok := PlanRefFromArn(crc.MlReservationArn)
	if !ok {
		return invalidf("Variant %s: MlReservationArn %q is not a training plan ARN.", v.VariantName, crc.MlReservationArn)
	}
	if r == nil {
		return invalidf("Variant %s: capacity reservations are not enabled on this server.", v.VariantName)
	}
	p, ok := r.Plan(ref)
	if !ok {
		return invalidf("Variant %s: training plan %q (MlReservationArn) does not exist.", v.VariantName, crc.MlReservationArn)
	}
	if !p.Targets(placement.TargetEndpoint) {
		return invalidf("Variant %s: training plan %s does not target endpoints (TargetResources %v).", v.VariantName, p.Name, p.TargetResources)
	}
	if p.InstanceType != v.InstanceType {
		return invalidf("Variant %s: instance type %s does not match training plan %s, which reserves %s.", v.VariantName, v.InstanceType, p.Name, p.InstanceType)
	}
	if !now.Before(p.End) {
		return invalidf("Variant %s: training plan %s expired at %s.", v.VariantName, p.Name, p.End.UTC().Format(time.RFC3339))
	}
	if owner == "" {
		// A config holds nothing: it may ask for up to the whole plan, so a
		// "scaled" config can be created while the endpoint it will replace
		// still uses part of the plan. Endpoint operations check what is free.
		if v.InitialInstanceCount > p.Total {
			return &placement.LimitError{Plan: p.Ref, Name: p.Name, Requested: v.InitialInstanceCount, Available: p.Total, Total: p.Total}
		}
		return nil
	}
	used, err := r.InUse(tx, ref, owner)
	if err != nil {
		return err
	}
	if free := max(p.Total-used, 0); v.InitialInstanceCount > free {
		return &placement.LimitError{Plan: p.Ref, Name: p.Name, Requested: v.InitialInstanceCount, Available: free, Total: p.Total}
	}
	return nil
}
