package gateway

import (
	"fmt"
	"sort"
	"strings"
)

// Registry maps plugin type names to factories and strategy names to profiles.
type Registry struct {
	plugins    map[string]Factory
	strategies map[string]Profile
	names      map[string]string // strategy key → the name as registered
}

// NewRegistry returns a registry holding every in-tree plugin and strategy.
func NewRegistry() *Registry {
	r := &Registry{plugins: map[string]Factory{}, strategies: map[string]Profile{}, names: map[string]string{}}
	registerInTreePlugins(r)
	return r
}

// RegisterPlugin adds a plugin type; registering a name twice panics (a
// programming error caught by any test).
func (r *Registry) RegisterPlugin(name string, f Factory) {
	if _, dup := r.plugins[name]; dup {
		panic("gateway: routing plugin registered twice: " + name)
	}
	r.plugins[name] = f
}

// RegisterStrategy names a profile; VariantRoute.RoutingStrategy selects it.
// Names match case-insensitively, ignoring '_' and '-'.
func (r *Registry) RegisterStrategy(name string, p Profile) {
	r.strategies[strategyKey(name)] = p
	r.names[strategyKey(name)] = name
}

// Strategies lists the registered strategy keys, sorted.
func (r *Registry) Strategies() []string {
	out := make([]string, 0, len(r.strategies))
	for k := range r.strategies {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Strategies lists the in-tree strategies by the names they were registered
// under (e.g. LEAST_OUTSTANDING_REQUESTS, kvaware), sorted: what a setting
// that picks a strategy accepts, for its error message.
func Strategies() []string {
	r := NewRegistry()
	out := make([]string, 0, len(r.names))
	for _, n := range r.names {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// IsStrategy reports whether name selects an in-tree strategy, matched as
// VariantRoute.RoutingStrategy is (case-insensitively, ignoring '_' and '-').
func IsStrategy(name string) bool {
	_, ok := NewRegistry().strategies[strategyKey(name)]
	return ok
}

func (r *Registry) build(name string, deps Deps) (Plugin, error) {
	f, ok := r.plugins[name]
	if !ok {
		return nil, fmt.Errorf("unknown routing plugin %q", name)
	}
	return f(deps)
}

func (r *Registry) profile(strategy string) (Profile, bool) {
	if strategy == "" {
		strategy = DefaultStrategy
	}
	p, ok := r.strategies[strategyKey(strategy)]
	return p, ok
}

func strategyKey(s string) string {
	return strings.NewReplacer("_", "", "-", "").Replace(strings.ToLower(s))
}

// DefaultStrategy is used for an empty RoutingStrategy, as in SageMaker.
const DefaultStrategy = "LEAST_OUTSTANDING_REQUESTS"

// alwaysFilters run before every profile's own filters.
var alwaysFilters = []string{excludeTriedName, notDrainingName, healthyName}

// registerInTreePlugins is the one place plugins and strategies are
// registered: adding a scorer is a new file plus a line here.
func registerInTreePlugins(r *Registry) {
	r.RegisterPlugin(excludeTriedName, newExcludeTried)
	r.RegisterPlugin(notDrainingName, newNotDraining)
	r.RegisterPlugin(roundRobinName, newRoundRobin)
	r.RegisterPlugin(randomName, newRandom)
	r.RegisterPlugin(leastOutstandingName, newLeastOutstanding)
	r.RegisterPlugin(healthyName, newHealthy)
	r.RegisterPlugin(loadGuardName, newLoadGuard)
	r.RegisterPlugin(queueName, newQueue)
	r.RegisterPlugin(kvUtilName, newKVUtil)
	r.RegisterPlugin(prefixName, newPrefix)
	r.RegisterPlugin(kvPreciseName, newKVPrecise)
	r.RegisterPlugin(sessionName, newSession)

	r.RegisterStrategy("LEAST_OUTSTANDING_REQUESTS", Profile{Scorers: []WeightedScorer{{leastOutstandingName, 1}}})
	r.RegisterStrategy("RANDOM", Profile{Scorers: []WeightedScorer{{randomName, 1}}})
	r.RegisterStrategy("roundrobin", Profile{Scorers: []WeightedScorer{{roundRobinName, 1}}})
	// Cache-aware policies (HyperPod names): affinity weighted above load so
	// a warm backend wins while balanced; the load guard overrides affinity
	// when it would overload one backend.
	r.RegisterStrategy("prefixaware", Profile{Filters: []string{loadGuardName},
		Scorers: []WeightedScorer{{prefixName, 3}, {queueName, 1}, {kvUtilName, 1}}})
	// kvaware also weighs the session id, below affinity: a new session
	// (nothing cached anywhere) then lands where the session hash puts it
	// instead of on the backend with the fewest requests in flight, which
	// is typically one whose sessions are between turns and about to send
	// their follow-ups into its prefill (docs/gateway.md, multi-turn). Its
	// later turns follow the cache as before; without a session id the
	// scorer is 0 everywhere and changes nothing.
	//
	// The approximate prefix scorer keeps prefixaware's weight: where the
	// engines' state is known the two agree, and where an engine has
	// evicted a group's prefix the router's own history still says where
	// the group lives, so the group goes back there instead of to the
	// least-loaded backend (at weight 1 it scattered: hit rate 0.75–0.99 of
	// the oracle across runs on a quiet machine, 0.88–0.99 at weight 3;
	// docs/performance.md).
	r.RegisterStrategy("kvaware", Profile{Filters: []string{loadGuardName},
		Scorers: []WeightedScorer{{kvPreciseName, 3}, {prefixName, 3}, {sessionName, 2}, {queueName, 1}, {kvUtilName, 1}}})
	r.RegisterStrategy("session", Profile{Filters: []string{loadGuardName},
		Scorers: []WeightedScorer{{sessionName, 3}, {queueName, 1}}})
}
