package manifestapi

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"sync"

	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/manifest"
)

// MemoryStore is the hand-written fake Store: it keeps objects in memory
// with the apply semantics of the real one (generation bumps only when the
// spec, labels or annotations change; ValidateUpdate on updates) and runs
// no controller. Tests set status and events with SetStatus and AddEvent,
// and may inject failures with FailApply. Safe for concurrent use.
type MemoryStore struct {
	clk clock.Clock

	mu      sync.Mutex
	objs    map[string]manifest.Object
	events  map[string][]manifest.Event
	nextID  int
	applied []string // kind/namespace/name of every successful Apply, in order

	// FailApply, when set, is consulted before each Apply; a non-nil
	// error is returned as is and nothing is stored.
	FailApply func(obj manifest.Object) error
}

var _ Store = (*MemoryStore)(nil)

// NewMemoryStore returns an empty store that stamps creation times from clk.
func NewMemoryStore(clk clock.Clock) *MemoryStore {
	return &MemoryStore{clk: clk, objs: map[string]manifest.Object{}, events: map[string][]manifest.Event{}}
}

func key(kind, ns, name string) string { return kind + "/" + ns + "/" + name }

// clone deep-copies an object through its JSON form, so callers never share
// memory with the store.
func clone(o manifest.Object) manifest.Object {
	var c manifest.Object
	switch o.(type) {
	case *manifest.InferenceEndpointConfig:
		c = &manifest.InferenceEndpointConfig{}
	case *manifest.JumpStartModel:
		c = &manifest.JumpStartModel{}
	default:
		panic(fmt.Sprintf("manifestapi: unknown object type %T", o))
	}
	b, err := json.Marshal(o)
	if err == nil {
		err = json.Unmarshal(b, c)
	}
	if err != nil {
		panic(fmt.Sprintf("manifestapi: clone %T: %v", o, err)) // the types round-trip by construction
	}
	return c
}

// specOf returns the parts of an object whose change is a new generation.
func specOf(o manifest.Object) []any {
	m := o.GetMeta()
	var spec any
	switch x := o.(type) {
	case *manifest.InferenceEndpointConfig:
		spec = x.Spec
	case *manifest.JumpStartModel:
		spec = x.Spec
	}
	b, _ := json.Marshal(spec)
	return []any{string(b), m.Labels, m.Annotations}
}

// Apply implements Store.
func (s *MemoryStore) Apply(_ context.Context, obj manifest.Object) (manifest.ApplyResult, error) {
	if s.FailApply != nil {
		if err := s.FailApply(obj); err != nil {
			return manifest.ApplyResult{}, err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m := obj.GetMeta()
	k := key(obj.GetKind(), m.Namespace, m.Name)
	res := manifest.ApplyResult{Kind: obj.GetKind(), Namespace: m.Namespace, Name: m.Name}
	now := s.clk.Now().UTC()
	next := clone(obj)
	nm := next.GetMeta()
	prev, ok := s.objs[k]
	switch {
	case !ok:
		s.nextID++
		nm.UID = fmt.Sprintf("00000000-0000-4000-8000-%012d", s.nextID)
		nm.Generation = 1
		nm.CreationTimestamp = &now
		*next.GetStatus() = manifest.Status{State: manifest.StateDeploymentPending}
		res.Action = manifest.ActionCreated
		s.events[k] = append(s.events[k], manifest.Event{Time: now, Type: manifest.EventNormal, Reason: "Created", Message: "manifest stored"})
	default:
		if err := manifest.ValidateUpdate(prev, obj); err != nil {
			return manifest.ApplyResult{}, err
		}
		pm := prev.GetMeta()
		nm.UID, nm.CreationTimestamp, nm.Generation = pm.UID, pm.CreationTimestamp, pm.Generation
		*next.GetStatus() = *clone(prev).GetStatus()
		if reflect.DeepEqual(specOf(prev), specOf(next)) {
			res.Action, res.Generation = manifest.ActionUnchanged, pm.Generation
			return res, nil
		}
		nm.Generation++
		res.Action = manifest.ActionConfigured
		s.events[k] = append(s.events[k], manifest.Event{Time: now, Type: manifest.EventNormal, Reason: "Configured",
			Message: fmt.Sprintf("generation %d stored", nm.Generation)})
	}
	s.nextID++
	nm.ResourceVersion = strconv.Itoa(s.nextID)
	res.Generation = nm.Generation
	s.objs[k] = next
	s.applied = append(s.applied, k)
	return res, nil
}

// Get implements Store.
func (s *MemoryStore) Get(_ context.Context, kind, namespace, name string) (manifest.Object, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.objs[key(kind, namespace, name)]
	if !ok {
		return nil, fmt.Errorf("%s %s/%s: %w", kind, namespace, name, manifest.ErrNotFound)
	}
	return clone(o), nil
}

// List implements Store, sorted by namespace then name.
func (s *MemoryStore) List(_ context.Context, kind, namespace string) ([]manifest.Object, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []manifest.Object{}
	for _, k := range slices.Sorted(maps.Keys(s.objs)) {
		o := s.objs[k]
		if o.GetKind() == kind && (namespace == "" || o.GetMeta().Namespace == namespace) {
			out = append(out, clone(o))
		}
	}
	return out, nil
}

// Delete implements Store; the object and its events go at once.
func (s *MemoryStore) Delete(_ context.Context, kind, namespace, name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := key(kind, namespace, name)
	if _, ok := s.objs[k]; !ok {
		return fmt.Errorf("%s %s/%s: %w", kind, namespace, name, manifest.ErrNotFound)
	}
	delete(s.objs, k)
	delete(s.events, k)
	return nil
}

// Events implements Store.
func (s *MemoryStore) Events(_ context.Context, kind, namespace, name string) ([]manifest.Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := key(kind, namespace, name)
	if _, ok := s.objs[k]; !ok {
		return nil, fmt.Errorf("%s %s/%s: %w", kind, namespace, name, manifest.ErrNotFound)
	}
	return append([]manifest.Event{}, s.events[k]...), nil
}

// SetStatus lets a test play the controller: fn edits the stored status.
func (s *MemoryStore) SetStatus(kind, namespace, name string, fn func(*manifest.Status)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.objs[key(kind, namespace, name)]
	if !ok {
		return fmt.Errorf("%s %s/%s: %w", kind, namespace, name, manifest.ErrNotFound)
	}
	fn(o.GetStatus())
	return nil
}

// AddEvent records an event for an object.
func (s *MemoryStore) AddEvent(kind, namespace, name string, ev manifest.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := key(kind, namespace, name)
	s.events[k] = append(s.events[k], ev)
}

// Applied returns kind/namespace/name of every Apply that stored something
// (created or configured), in order.
func (s *MemoryStore) Applied() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.applied)
}
