package endpoint

import (
	"fmt"
	"strings"
	"time"

	"github.com/capstan-dev/capstan/internal/store"
)

// PreferenceReservedOnly is the only CapacityReservationPreference SageMaker
// defines: run only on the reservation's instances and stop when it ends.
const PreferenceReservedOnly = "capacity-reservations-only"

// PlanKeyPrefix marks an Allocator want key that draws on a training plan
// rather than on on-demand instances: "trainingplan:<plan key>" → count. The
// calendar behind the Allocator seam checks such counts against the plan.
const PlanKeyPrefix = "trainingplan:"

// PlanInfo is what the endpoint service and controller need to know about a
// training plan; the calendar (internal/capacity) provides it.
type PlanInfo struct {
	Key             string // lower-case name, the store key
	Name            string
	InstanceType    string
	Start, End      time.Time
	Total           int
	TargetResources []string
}

// Reservations looks up training plans by key (lower-case name). InUse is how
// many of the plan's instances endpoints other than except hold, read in tx.
type Reservations interface {
	Plan(key string) (PlanInfo, bool)
	InUse(tx *store.Tx, key, except string) (int, error)
}

// PlanKeyFromArn returns the plan key named by a training-plan ARN
// (arn:aws:sagemaker:<region>:<acct>:training-plan/<name>).
func PlanKeyFromArn(arn string) (string, bool) {
	_, name, ok := strings.Cut(arn, ":training-plan/")
	if !ok || name == "" || strings.Contains(name, "/") {
		return "", false
	}
	return strings.ToLower(name), true
}

// PlanLimitError says a reserved-only variant asked for more instances than
// its plan has free.
type PlanLimitError struct {
	Plan      string
	Requested int // what the endpoint would hold on the plan
	Available int // free for this endpoint (total minus other endpoints' use)
	Total     int
}

func (e *PlanLimitError) Error() string {
	return fmt.Sprintf("Training plan %s has %d instances in total and %d available to this endpoint, but %d are requested.",
		e.Plan, e.Total, e.Available, e.Requested)
}

// checkReservation validates a reserved-only variant against its plan.
// For an endpoint (owner) the count is checked against what the plan still
// has free, not counting owner's own use; for a config (owner "") against the
// plan's size.
func checkReservation(tx *store.Tx, r Reservations, v Variant, owner string, now time.Time) error {
	crc := v.CapacityReservationConfig
	if crc == nil || (crc.CapacityReservationPreference == "" && crc.MlReservationArn == "") {
		return nil
	}
	if crc.CapacityReservationPreference != PreferenceReservedOnly {
		return invalidf("Variant %s: CapacityReservationPreference must be %q.", v.VariantName, PreferenceReservedOnly)
	}
	key, ok := PlanKeyFromArn(crc.MlReservationArn)
	if !ok {
		return invalidf("Variant %s: MlReservationArn %q is not a training plan ARN.", v.VariantName, crc.MlReservationArn)
	}
	if r == nil {
		return invalidf("Variant %s: capacity reservations are not enabled on this server.", v.VariantName)
	}
	p, ok := r.Plan(key)
	if !ok {
		return invalidf("Variant %s: training plan %q (MlReservationArn) does not exist.", v.VariantName, crc.MlReservationArn)
	}
	targets := false
	for _, t := range p.TargetResources {
		targets = targets || t == "endpoint"
	}
	if !targets {
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
			return &PlanLimitError{Plan: p.Name, Requested: v.InitialInstanceCount, Available: p.Total, Total: p.Total}
		}
		return nil
	}
	used, err := r.InUse(tx, key, owner)
	if err != nil {
		return err
	}
	if free := max(p.Total-used, 0); v.InitialInstanceCount > free {
		return &PlanLimitError{Plan: p.Name, Requested: v.InitialInstanceCount, Available: free, Total: p.Total}
	}
	return nil
}
