package endpoint

import (
	"context"
	"errors"
	"fmt"

	"github.com/capstan-dev/capstan/internal/store"
)

// ErrNameInUse is wrapped when a manifest asks to register an endpoint name
// that another manifest or a SageMaker CreateEndpoint already holds, or one
// that differs from a held name only in case.
var ErrNameInUse = errors.New("endpoint name in use")

// ManagedEndpoint is what a deployment controller registers so that a
// manifest's deployment is listed and described as a SageMaker endpoint with
// one variant. The controller that registers it runs its replicas and route.
type ManagedEndpoint struct {
	Name, Owner           string // Owner e.g. "InferenceEndpointConfig/default/demo"
	Status, FailureReason string // StatusCreating, StatusInService, StatusUpdating or StatusFailed
	Variant               string // default "AllTraffic"
	InstanceType, Model   string
	// Replicas are the ids of the replicas that serve now; DesiredCount is
	// what the deployment is scaling to.
	Replicas     []string
	DesiredCount int
}

// PutManaged creates or replaces the registration of m.Name for m.Owner. It
// does not touch the fleet: manifests run on the cluster's nodes.
func (s *Service) PutManaged(_ context.Context, m ManagedEndpoint) error {
	if m.Name == "" || m.Owner == "" {
		return fmt.Errorf("managed endpoint: name and owner are required")
	}
	if m.Variant == "" {
		m.Variant = "AllTraffic"
	}
	now := s.clock.Now().UTC().Truncate(1e6)
	return s.store.Update(func(tx *store.Tx) error {
		var ep Endpoint
		found, err := tx.Get(KindEndpoint, m.Name, &ep)
		if err != nil {
			return err
		}
		if !found {
			// A name differing only in case is taken too: it has the same ARN.
			key, err := holderOf(tx, KindEndpoint, m.Name)
			if err != nil {
				return err
			}
			if key != "" {
				var other Endpoint
				if _, err := tx.Get(KindEndpoint, key, &other); err != nil {
					return err
				}
				return fmt.Errorf("%w: endpoint %q already belongs to %s", ErrNameInUse, key, holderName(other))
			}
		}
		if found && ep.ManagedBy != m.Owner {
			return fmt.Errorf("%w: endpoint %q already belongs to %s", ErrNameInUse, m.Name, holderName(ep))
		}
		if !found {
			ep = Endpoint{Name: m.Name, CreationTime: now, ManagedBy: m.Owner, Generation: 1}
		}
		v := VariantState{Name: m.Variant, ModelName: m.Model, Model: m.Model, InstanceType: m.InstanceType,
			Weight: 1, DesiredWeight: 1, DesiredCount: m.DesiredCount, Replicas: append([]string(nil), m.Replicas...)}
		next := ep
		next.Status, next.FailureReason = m.Status, m.FailureReason
		next.Current = &Deployment{ConfigName: m.Owner, Generation: 1, StartTime: ep.CreationTime, Variants: []VariantState{v}}
		if found && sameManaged(ep, next) {
			return nil // unchanged: no write, no watch event
		}
		return s.put(tx, &next)
	})
}

// holderName says who holds ep's name: its manifest, or a SageMaker
// CreateEndpoint.
func holderName(ep Endpoint) string {
	if ep.ManagedBy != "" {
		return ep.ManagedBy
	}
	return "a SageMaker CreateEndpoint"
}

func sameManaged(a, b Endpoint) bool {
	if a.Status != b.Status || a.FailureReason != b.FailureReason || a.Current == nil || b.Current == nil ||
		len(a.Current.Variants) != 1 || len(b.Current.Variants) != 1 {
		return false
	}
	x, y := a.Current.Variants[0], b.Current.Variants[0]
	if x.Name != y.Name || x.Model != y.Model || x.InstanceType != y.InstanceType || x.DesiredCount != y.DesiredCount || len(x.Replicas) != len(y.Replicas) {
		return false
	}
	for i := range x.Replicas {
		if x.Replicas[i] != y.Replicas[i] {
			return false
		}
	}
	return true
}

// DeleteManaged removes owner's registration of name; it is a no-op when
// the name is not registered or belongs to someone else.
func (s *Service) DeleteManaged(_ context.Context, name, owner string) error {
	return s.store.Update(func(tx *store.Tx) error {
		var ep Endpoint
		found, err := tx.Get(KindEndpoint, name, &ep)
		if err != nil || !found || ep.ManagedBy != owner {
			return err
		}
		return tx.Delete(KindEndpoint, name)
	})
}
