package kube

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capstan-dev/capstan/internal/gateway"
	"github.com/capstan-dev/capstan/internal/manifest"
	apiv1 "github.com/capstan-dev/capstan/internal/operator/apis/v1"
)

// activateTimeout bounds one activation's API calls (a hung API server
// must not pin the goroutine; the held requests have their own timeout).
const activateTimeout = 30 * time.Second

// scaleTarget is the object behind a route and the replicas it is
// activated to: its autoscaling minimum, at least 1.
type scaleTarget struct {
	obj      apiv1.Object // an empty object of the kind, namespace and name
	replicas int32
}

// activator scales a deployment from zero through its custom resource's
// scale subresource (spec.replicas), as `kubectl scale` would; the operator
// then scales the Deployment, and KEDA (when installed) takes it back to
// zero once idle. Every gateway replica may activate at once: the update
// carries the resourceVersion it read, so it only ever raises 0 to N and
// never overwrites a count someone else set.
type activator struct {
	c       client.Client
	targets func(route string) (scaleTarget, bool)
	log     *slog.Logger

	mu       sync.Mutex
	inFlight map[string]bool // routes being activated now
}

var _ gateway.Activator = (*activator)(nil)

// Activate implements gateway.Activator; at most one activation per route
// runs at a time in this gateway.
func (a *activator) Activate(route string) {
	t, ok := a.targets(route)
	if !ok {
		a.log.Warn("gateway activation: no object holds the route", "route", route)
		return
	}
	a.mu.Lock()
	if a.inFlight[route] {
		a.mu.Unlock()
		return
	}
	a.inFlight[route] = true
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		delete(a.inFlight, route)
		a.mu.Unlock()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), activateTimeout)
	defer cancel()
	raised, err := a.scaleUp(ctx, t)
	log := a.log.With("route", route, "object", t.obj.GetNamespace()+"/"+t.obj.GetName())
	switch {
	case err != nil:
		log.Warn("gateway activation failed", "err", err)
	case raised:
		log.Info("gateway activation: scaled from zero", "replicas", t.replicas)
	default:
		log.Debug("gateway activation: replicas already above zero")
	}
}

// scaleUp sets the object's replicas to t.replicas if they are 0, and
// reports whether it did. A conflict (another gateway, KEDA or a user
// wrote meanwhile) reads again.
func (a *activator) scaleUp(ctx context.Context, t scaleTarget) (raised bool, err error) {
	for range 5 {
		var s autoscalingv1.Scale
		if err := a.c.SubResource("scale").Get(ctx, t.obj, &s); err != nil {
			return false, fmt.Errorf("get scale: %w", err)
		}
		if s.Spec.Replicas > 0 {
			return false, nil
		}
		s.Spec.Replicas = t.replicas
		// s keeps the resourceVersion read above: the update fails with
		// a conflict instead of overwriting a newer count.
		err := a.c.SubResource("scale").Update(ctx, t.obj, client.WithSubResourceBody(&s))
		if err == nil {
			return true, nil
		}
		if !apierrors.IsConflict(err) {
			return false, fmt.Errorf("update scale: %w", err)
		}
	}
	return false, fmt.Errorf("update scale: still conflicting after 5 tries")
}

// targetOf is the scale target of the object holding a route.
func targetOf(o apiv1.Object) scaleTarget {
	m := o.ToManifest()
	m.Default()
	var as *manifest.AutoScalingSpec
	var empty apiv1.Object
	switch x := m.(type) {
	case *manifest.InferenceEndpointConfig:
		as, empty = x.Spec.AutoScalingSpec, &apiv1.InferenceEndpointConfig{}
	case *manifest.JumpStartModel:
		as, empty = x.Spec.AutoScalingSpec, &apiv1.JumpStartModel{}
	}
	n := int32(1)
	if as != nil && as.MinReplicaCount != nil && *as.MinReplicaCount > n {
		n = *as.MinReplicaCount
	}
	empty.SetNamespace(o.GetNamespace())
	empty.SetName(o.GetName())
	return scaleTarget{obj: empty, replicas: n}
}
