package autoscale

import (
	"errors"
	"fmt"
	"time"
)

// Defaults from the reference (HPA controller flags, KEDA ScaledObject, the
// HyperPod autoScalingSpec CRD).
const (
	DefaultTolerance              = 0.1
	DefaultScaleDownStabilization = 300 * time.Second
	DefaultPolicyPeriod           = 15 * time.Second
	DefaultPollingInterval        = 30 * time.Second
	DefaultCooldownPeriod         = 300 * time.Second

	// MaxTriggers bounds triggers per scaler (HyperPod's trigger lists are ≤ 100).
	MaxTriggers = 100
	// MaxPolicies bounds policies per direction, to keep a bad spec cheap.
	MaxPolicies = 16
)

// PolicyType is the unit of an HPA rate-limit policy.
type PolicyType string

const (
	// Pods limits the change to Value replicas per period.
	Pods PolicyType = "Pods"
	// Percent limits the change to Value % of the replicas at period start.
	Percent PolicyType = "Percent"
)

// SelectPolicy chooses among several policies of one direction.
type SelectPolicy string

const (
	// SelectMax allows the largest change (the default).
	SelectMax SelectPolicy = "Max"
	// SelectMin allows the smallest change.
	SelectMin SelectPolicy = "Min"
	// SelectDisabled freezes scaling in that direction.
	SelectDisabled SelectPolicy = "Disabled"
)

// Policy is one HPA scaling policy.
type Policy struct {
	Type   PolicyType
	Value  int
	Period time.Duration
}

// Rules is the behavior for one direction (HPAScalingRules).
type Rules struct {
	// StabilizationWindow: nil means the default (0 up, 300 s down).
	StabilizationWindow *time.Duration
	// Policies: empty means the defaults (up: Pods 4 and Percent 100 per 15 s;
	// down: Percent 100 per 15 s).
	Policies []Policy
	// SelectPolicy: empty means Max.
	SelectPolicy SelectPolicy
	// Tolerance overrides Config.Tolerance for this direction (KEP-4951).
	Tolerance *float64
}

// Behavior is HPA spec.behavior. A nil *Behavior in Config selects the legacy
// path (down-stabilisation only, scale-up capped at max(2×current, 4)).
type Behavior struct {
	ScaleUp   *Rules
	ScaleDown *Rules
}

// FallbackBehavior selects the fallback replica count (KEDA fallback.behavior).
type FallbackBehavior string

const (
	FallbackStatic                  FallbackBehavior = "static"
	FallbackCurrentReplicas         FallbackBehavior = "currentReplicas"
	FallbackCurrentReplicasIfHigher FallbackBehavior = "currentReplicasIfHigher"
	FallbackCurrentReplicasIfLower  FallbackBehavior = "currentReplicasIfLower"
)

// Fallback is KEDA's fallback block: after more than FailureThreshold
// consecutive failures a trigger reports the synthetic value that makes the
// HPA land on Replicas.
type Fallback struct {
	FailureThreshold int
	Replicas         int
	Behavior         FallbackBehavior // empty means static
}

// Config is one deployment's autoscaling spec, KEDA-shaped.
type Config struct {
	// MinReplicas may be 0 (scale to zero via activation); MaxReplicas ≥ max(Min, 1).
	MinReplicas int
	MaxReplicas int
	// PollingInterval is how often the controller should call Reconcile
	// (0 means DefaultPollingInterval); the scaler only reports it.
	PollingInterval time.Duration
	// CooldownPeriod: wait after the last active poll before N → 0.
	CooldownPeriod time.Duration
	// InitialCooldownPeriod: while no poll has ever been active, scaling to
	// zero waits until creation + this.
	InitialCooldownPeriod time.Duration
	// Tolerance: nil means DefaultTolerance.
	Tolerance *float64
	Behavior  *Behavior
	Fallback  *Fallback
}

// KEDADefaults returns KEDA's ScaledObject defaults (min 0, max 100, polling
// 30 s, cooldown 300 s, initial cooldown 0, no behavior).
func KEDADefaults() Config {
	return Config{
		MinReplicas:     0,
		MaxReplicas:     100,
		PollingInterval: DefaultPollingInterval,
		CooldownPeriod:  DefaultCooldownPeriod,
	}
}

// HyperPodDefaults returns the HyperPod autoScalingSpec defaults: min 1,
// max 5, polling 30 s, cooldown 300 s, initial cooldown 300 s, scale-down
// stabilisation 300 s and scale-up stabilisation 0 (so behavior is set and
// the default policies apply).
func HyperPodDefaults() Config {
	down, up := DefaultScaleDownStabilization, time.Duration(0)
	return Config{
		MinReplicas:           1,
		MaxReplicas:           5,
		PollingInterval:       DefaultPollingInterval,
		CooldownPeriod:        DefaultCooldownPeriod,
		InitialCooldownPeriod: 300 * time.Second,
		Behavior: &Behavior{
			ScaleUp:   &Rules{StabilizationWindow: &up},
			ScaleDown: &Rules{StabilizationWindow: &down},
		},
	}
}

// ErrInvalidConfig is wrapped by every validation error.
var ErrInvalidConfig = errors.New("invalid autoscaling config")

func invalid(field, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalidConfig, field, fmt.Sprintf(format, args...))
}

// resolved is Config with every default filled in.
type resolved struct {
	Config
	upTol, downTol float64
	up, down       resolvedRules
	longestPeriod  time.Duration
}

type resolvedRules struct {
	window   time.Duration
	policies []Policy
	sel      SelectPolicy
}

func (c Config) resolve() (resolved, error) {
	r := resolved{Config: c}
	if c.MinReplicas < 0 {
		return r, invalid("minReplicas", "%d is negative", c.MinReplicas)
	}
	if c.MaxReplicas < 1 || c.MaxReplicas < c.MinReplicas {
		return r, invalid("maxReplicas", "%d must be ≥ 1 and ≥ minReplicas %d", c.MaxReplicas, c.MinReplicas)
	}
	if c.PollingInterval < 0 || c.CooldownPeriod < 0 || c.InitialCooldownPeriod < 0 {
		return r, invalid("pollingInterval/cooldownPeriod/initialCooldownPeriod", "must not be negative")
	}
	if r.PollingInterval == 0 {
		r.PollingInterval = DefaultPollingInterval
	}
	tol := DefaultTolerance
	if c.Tolerance != nil {
		tol = *c.Tolerance
	}
	if tol < 0 {
		return r, invalid("tolerance", "%g is negative", tol)
	}
	r.upTol, r.downTol = tol, tol
	if f := c.Fallback; f != nil {
		if f.FailureThreshold < 0 || f.Replicas < 0 {
			return r, invalid("fallback", "failureThreshold and replicas must be ≥ 0")
		}
		switch f.Behavior {
		case "", FallbackStatic, FallbackCurrentReplicas, FallbackCurrentReplicasIfHigher, FallbackCurrentReplicasIfLower:
		default:
			return r, invalid("fallback.behavior", "unknown %q", f.Behavior)
		}
	}
	// Legacy path: only the down window matters; it is the controller flag.
	r.down.window = DefaultScaleDownStabilization
	if c.Behavior == nil {
		return r, nil
	}
	var err error
	if r.up, err = resolveRules("behavior.scaleUp", c.Behavior.ScaleUp, 0,
		[]Policy{{Pods, 4, DefaultPolicyPeriod}, {Percent, 100, DefaultPolicyPeriod}}, &r.upTol); err != nil {
		return r, err
	}
	if r.down, err = resolveRules("behavior.scaleDown", c.Behavior.ScaleDown, DefaultScaleDownStabilization,
		[]Policy{{Percent, 100, DefaultPolicyPeriod}}, &r.downTol); err != nil {
		return r, err
	}
	for _, p := range append(append([]Policy(nil), r.up.policies...), r.down.policies...) {
		r.longestPeriod = max(r.longestPeriod, p.Period)
	}
	return r, nil
}

func resolveRules(field string, in *Rules, window time.Duration, policies []Policy, tol *float64) (resolvedRules, error) {
	out := resolvedRules{window: window, policies: policies, sel: SelectMax}
	if in == nil {
		return out, nil
	}
	if in.StabilizationWindow != nil {
		if *in.StabilizationWindow < 0 || *in.StabilizationWindow > time.Hour {
			return out, invalid(field+".stabilizationWindow", "%v outside [0, 1h]", *in.StabilizationWindow)
		}
		out.window = *in.StabilizationWindow
	}
	if len(in.Policies) > MaxPolicies {
		return out, invalid(field+".policies", "%d policies, at most %d", len(in.Policies), MaxPolicies)
	}
	if len(in.Policies) > 0 {
		out.policies = in.Policies
	}
	for i, p := range out.policies {
		if p.Type != Pods && p.Type != Percent {
			return out, invalid(fmt.Sprintf("%s.policies[%d].type", field, i), "unknown %q", p.Type)
		}
		if p.Value <= 0 {
			return out, invalid(fmt.Sprintf("%s.policies[%d].value", field, i), "%d must be > 0", p.Value)
		}
		if p.Period <= 0 || p.Period > 30*time.Minute {
			return out, invalid(fmt.Sprintf("%s.policies[%d].period", field, i), "%v outside (0, 30m]", p.Period)
		}
	}
	switch in.SelectPolicy {
	case "":
	case SelectMax, SelectMin, SelectDisabled:
		out.sel = in.SelectPolicy
	default:
		return out, invalid(field+".selectPolicy", "unknown %q", in.SelectPolicy)
	}
	if in.Tolerance != nil {
		if *in.Tolerance < 0 {
			return out, invalid(field+".tolerance", "%g is negative", *in.Tolerance)
		}
		*tol = *in.Tolerance
	}
	return out, nil
}
