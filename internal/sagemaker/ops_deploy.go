package sagemaker

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/capstan-dev/capstan/internal/serving"
)

// The DeploymentConfig shapes of UpdateEndpoint (in) and of DescribeEndpoint's
// LastDeploymentConfig (out). Pointers tell a missing member from a zero one.
type (
	deploymentConfig struct {
		BlueGreenUpdatePolicy     *blueGreenPolicy `json:"BlueGreenUpdatePolicy,omitempty"`
		RollingUpdatePolicy       *rollingPolicy   `json:"RollingUpdatePolicy,omitempty"`
		AutoRollbackConfiguration *autoRollback    `json:"AutoRollbackConfiguration,omitempty"`
	}
	blueGreenPolicy struct {
		TrafficRoutingConfiguration      *trafficRouting `json:"TrafficRoutingConfiguration,omitempty"`
		TerminationWaitInSeconds         *int            `json:"TerminationWaitInSeconds,omitempty"`
		MaximumExecutionTimeoutInSeconds *int            `json:"MaximumExecutionTimeoutInSeconds,omitempty"`
	}
	trafficRouting struct {
		Type                  *string       `json:"Type,omitempty"`
		WaitIntervalInSeconds *int          `json:"WaitIntervalInSeconds,omitempty"`
		CanarySize            *capacitySize `json:"CanarySize,omitempty"`
		LinearStepSize        *capacitySize `json:"LinearStepSize,omitempty"`
	}
	rollingPolicy struct {
		MaximumBatchSize                 *capacitySize `json:"MaximumBatchSize,omitempty"`
		WaitIntervalInSeconds            *int          `json:"WaitIntervalInSeconds,omitempty"`
		MaximumExecutionTimeoutInSeconds *int          `json:"MaximumExecutionTimeoutInSeconds,omitempty"`
		RollbackMaximumBatchSize         *capacitySize `json:"RollbackMaximumBatchSize,omitempty"`
	}
	capacitySize struct {
		Type  *string `json:"Type,omitempty"`
		Value *int    `json:"Value,omitempty"`
	}
	autoRollback struct {
		Alarms []alarmRef `json:"Alarms,omitempty"`
	}
	alarmRef struct {
		AlarmName *string `json:"AlarmName,omitempty"`
	}
)

// SageMaker's bounds on DeploymentConfig numbers.
const (
	maxWaitSeconds          = 3600
	minExecutionSeconds     = 600
	maxBlueGreenExecSeconds = 14400
	maxRollingExecSeconds   = 28800
	maxAlarms               = 10
	maxAlarmNameLen         = 255
)

const (
	deploymentConfigPath = "deploymentConfig"
	// alarmNamePatternText is AlarmName's pattern as SageMaker reports it
	// (Go's regexp has no lookahead; the check spells it out).
	alarmNamePatternText = `^(?!\s*$).+`
	// The enums, as the domain spells them too.
	trafficTypeAllAtOnce = string(serving.AllAtOnce)
	trafficTypeCanary    = string(serving.Canary)
	trafficTypeLinear    = string(serving.Linear)
	sizeTypeInstances    = string(serving.Instances)
	sizeTypePercent      = string(serving.Percent)
)

// decodeDeploymentConfig reads UpdateEndpoint's DeploymentConfig (nil when
// absent) and adds to e what SageMaker would refuse in it: members the
// shape does not have, by path, or else the values and combinations. The
// error is a body that does not parse.
func decodeDeploymentConfig(raw json.RawMessage, e *validationError) (*deploymentConfig, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var c deploymentConfig
	if err := decode(raw, &c); err != nil {
		return nil, err
	}
	if e.unknownMembers(raw, reflect.TypeFor[deploymentConfig](), deploymentConfigPath) == 0 {
		e.deploymentConfig(&c)
	}
	return &c, nil
}

// unknownMembers adds a violation for every object member in raw that t (a
// struct, or a pointer to or slice of one) does not declare, recursing into
// the members it does, and returns how many it added. Go's decoder drops
// unknown members silently and its DisallowUnknownFields does not say where
// one was.
func (e *validationError) unknownMembers(raw json.RawMessage, t reflect.Type, path string) int {
	n := 0
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Slice:
		var items []json.RawMessage
		if json.Unmarshal(raw, &items) != nil {
			return 0 // not a list: the typed decode already refused it
		}
		for i, it := range items {
			n += e.unknownMembers(it, t.Elem(), fmt.Sprintf("%s.%d.member", path, i+1))
		}
	case reflect.Struct:
		var obj map[string]json.RawMessage
		if json.Unmarshal(raw, &obj) != nil {
			return 0
		}
		known := map[string]reflect.StructField{}
		var names []string
		for _, f := range reflect.VisibleFields(t) {
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			known[name] = f
			names = append(names, name)
		}
		keys := make([]string, 0, len(obj))
		for k := range obj {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			f, ok := known[k]
			if !ok {
				e.Add(truncate(string(obj[k]), 64), path+"."+k,
					"Member is not recognized; the members here are "+strings.Join(names, ", "))
				n++
				continue
			}
			n += e.unknownMembers(obj[k], f.Type, path+"."+lowerFirst(k))
		}
	}
	return n
}

func lowerFirst(s string) string {
	if s == "" {
		return s
	}
	r := []rune(s)
	r[0] = unicode.ToLower(r[0])
	return string(r)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…" // a cut rune is dropped
}

// deploymentConfig checks c's members and the rules between them.
func (e *validationError) deploymentConfig(c *deploymentConfig) {
	p := deploymentConfigPath
	if c.BlueGreenUpdatePolicy != nil && c.RollingUpdatePolicy != nil {
		e.Add("BlueGreenUpdatePolicy, RollingUpdatePolicy", p,
			"Only one update policy may be set: BlueGreenUpdatePolicy or RollingUpdatePolicy")
	}
	if bg := c.BlueGreenUpdatePolicy; bg != nil {
		bp := p + ".blueGreenUpdatePolicy"
		if tr := bg.TrafficRoutingConfiguration; e.Required(tr != nil, bp+".trafficRoutingConfiguration") {
			e.trafficRouting(tr, bp+".trafficRoutingConfiguration")
		}
		e.between(bg.TerminationWaitInSeconds, 0, maxWaitSeconds, bp+".terminationWaitInSeconds")
		e.between(bg.MaximumExecutionTimeoutInSeconds, minExecutionSeconds, maxBlueGreenExecSeconds, bp+".maximumExecutionTimeoutInSeconds")
	}
	if r := c.RollingUpdatePolicy; r != nil {
		rp := p + ".rollingUpdatePolicy"
		if e.Required(r.MaximumBatchSize != nil, rp+".maximumBatchSize") {
			e.capacitySize(r.MaximumBatchSize, rp+".maximumBatchSize")
		}
		if e.Required(r.WaitIntervalInSeconds != nil, rp+".waitIntervalInSeconds") {
			e.between(r.WaitIntervalInSeconds, 0, maxWaitSeconds, rp+".waitIntervalInSeconds")
		}
		e.between(r.MaximumExecutionTimeoutInSeconds, minExecutionSeconds, maxRollingExecSeconds, rp+".maximumExecutionTimeoutInSeconds")
		if r.RollbackMaximumBatchSize != nil {
			e.capacitySize(r.RollbackMaximumBatchSize, rp+".rollbackMaximumBatchSize")
		}
	}
	if ar := c.AutoRollbackConfiguration; ar != nil && ar.Alarms != nil {
		ap := p + ".autoRollbackConfiguration.alarms"
		e.listLen(len(ar.Alarms), 1, maxAlarms, ap)
		for i, a := range ar.Alarms {
			np := fmt.Sprintf("%s.%d.member.alarmName", ap, i+1)
			switch {
			case !e.Required(a.AlarmName != nil, np):
			case len(*a.AlarmName) < 1:
				e.Add(*a.AlarmName, np, "Member must have length greater than or equal to 1")
			case len(*a.AlarmName) > maxAlarmNameLen:
				e.Add(*a.AlarmName, np, fmt.Sprintf("Member must have length less than or equal to %d", maxAlarmNameLen))
			case strings.TrimSpace(*a.AlarmName) == "" || strings.ContainsAny(*a.AlarmName, "\n\r"):
				e.Add(*a.AlarmName, np, "Member must satisfy regular expression pattern: "+alarmNamePatternText)
			}
		}
	}
}

func (e *validationError) trafficRouting(tr *trafficRouting, path string) {
	e.requiredEnum(tr.Type, path+".type", trafficTypeAllAtOnce, trafficTypeCanary, trafficTypeLinear)
	if e.Required(tr.WaitIntervalInSeconds != nil, path+".waitIntervalInSeconds") {
		e.between(tr.WaitIntervalInSeconds, 0, maxWaitSeconds, path+".waitIntervalInSeconds")
	}
	typ := ""
	if tr.Type != nil {
		typ = *tr.Type
	}
	for _, s := range []struct {
		size    *capacitySize
		member  string
		traffic string
	}{{tr.CanarySize, "canarySize", trafficTypeCanary}, {tr.LinearStepSize, "linearStepSize", trafficTypeLinear}} {
		switch {
		case s.size != nil && typ != s.traffic:
			e.Add(typ, path+"."+s.member, fmt.Sprintf("Member may be set only when Type is %s", s.traffic))
		case s.size == nil && typ == s.traffic:
			e.Add("null", path+"."+s.member, fmt.Sprintf("Member must be set when Type is %s", s.traffic))
		case s.size != nil:
			e.capacitySize(s.size, path+"."+s.member)
		}
	}
}

func (e *validationError) capacitySize(s *capacitySize, path string) {
	e.requiredEnum(s.Type, path+".type", sizeTypeInstances, sizeTypePercent)
	if !e.Required(s.Value != nil, path+".value") {
		return
	}
	hi := math.MaxInt32
	if s.Type != nil && *s.Type == sizeTypePercent {
		hi = 100
	}
	e.IntRange(s.Value, 1, hi, path+".value")
}

// requiredEnum checks a required string member against its enum.
func (e *validationError) requiredEnum(v *string, path string, allowed ...string) {
	if !e.Required(v != nil, path) {
		return
	}
	e.Enum(*v, path, allowed...)
}

// between checks an optional number against [lo, hi].
func (e *validationError) between(v *int, lo, hi int, path string) {
	e.IntRange(v, lo, hi, path)
}

func seconds(v *int) time.Duration {
	if v == nil {
		return 0
	}
	return time.Duration(*v) * time.Second
}

func sizeOf(s *capacitySize) serving.Size {
	return serving.Size{Unit: serving.SizeUnit(*s.Type), Value: *s.Value}
}

// policy converts a checked DeploymentConfig to the domain's rollout policy.
func (c *deploymentConfig) policy() serving.Policy {
	var p serving.Policy
	if bg := c.BlueGreenUpdatePolicy; bg != nil {
		tr := bg.TrafficRoutingConfiguration
		b := &serving.BlueGreen{Traffic: serving.Traffic(*tr.Type), Wait: seconds(tr.WaitIntervalInSeconds),
			TerminationWait: seconds(bg.TerminationWaitInSeconds)}
		switch {
		case tr.CanarySize != nil:
			b.Step = sizeOf(tr.CanarySize)
		case tr.LinearStepSize != nil:
			b.Step = sizeOf(tr.LinearStepSize)
		}
		p.BlueGreen, p.MaxDuration = b, seconds(bg.MaximumExecutionTimeoutInSeconds)
	}
	if r := c.RollingUpdatePolicy; r != nil {
		ro := &serving.Rolling{Batch: sizeOf(r.MaximumBatchSize), Wait: seconds(r.WaitIntervalInSeconds)}
		if r.RollbackMaximumBatchSize != nil {
			rb := sizeOf(r.RollbackMaximumBatchSize)
			ro.RollbackBatch = &rb
		}
		p.Rolling, p.MaxDuration = ro, seconds(r.MaximumExecutionTimeoutInSeconds)
	}
	if ar := c.AutoRollbackConfiguration; ar != nil {
		for _, a := range ar.Alarms {
			p.Alarms = append(p.Alarms, *a.AlarmName)
		}
	}
	return p
}

func wireSeconds(d time.Duration) *int { return ptr(int(d / time.Second)) }

func wireSize(s serving.Size) *capacitySize {
	return &capacitySize{Type: ptr(string(s.Unit)), Value: ptr(s.Value)}
}

// wireDeploymentConfig is p as SageMaker's DeploymentConfig, or nil for the
// zero policy (an update without one: SageMaker then shows no
// LastDeploymentConfig).
func wireDeploymentConfig(p *serving.Policy) *deploymentConfig {
	if p == nil || (p.BlueGreen == nil && p.Rolling == nil && len(p.Alarms) == 0) {
		return nil
	}
	var c deploymentConfig
	var maxExec *int
	if p.MaxDuration > 0 {
		maxExec = wireSeconds(p.MaxDuration)
	}
	if b := p.BlueGreen; b != nil {
		tr := &trafficRouting{Type: ptr(string(b.Traffic)), WaitIntervalInSeconds: wireSeconds(b.Wait)}
		switch b.Traffic {
		case serving.Canary:
			tr.CanarySize = wireSize(b.Step)
		case serving.Linear:
			tr.LinearStepSize = wireSize(b.Step)
		}
		c.BlueGreenUpdatePolicy = &blueGreenPolicy{TrafficRoutingConfiguration: tr,
			TerminationWaitInSeconds: wireSeconds(b.TerminationWait), MaximumExecutionTimeoutInSeconds: maxExec}
	}
	if r := p.Rolling; r != nil {
		rp := &rollingPolicy{MaximumBatchSize: wireSize(r.Batch), WaitIntervalInSeconds: wireSeconds(r.Wait),
			MaximumExecutionTimeoutInSeconds: maxExec}
		if r.RollbackBatch != nil {
			rp.RollbackMaximumBatchSize = wireSize(*r.RollbackBatch)
		}
		c.RollingUpdatePolicy = rp
	}
	if len(p.Alarms) > 0 {
		ar := &autoRollback{}
		for _, n := range p.Alarms {
			ar.Alarms = append(ar.Alarms, alarmRef{AlarmName: ptr(n)})
		}
		c.AutoRollbackConfiguration = ar
	}
	return &c
}

// policyError carries the policy an UpdateEndpoint asked for along with
// the Service's error, so that toWire can name the SageMaker member behind
// a *serving.FieldError (a step size is CanarySize or LinearStepSize by the
// traffic type).
type policyError struct {
	policy *serving.Policy
	err    error
}

func (e *policyError) Error() string { return e.err.Error() }
func (e *policyError) Unwrap() error { return e.err }

// policyFieldPaths maps serving.Policy field paths to DeploymentConfig
// member paths (the step of blue/green is resolved by traffic type).
var policyFieldPaths = map[string]string{
	"blueGreen":                 deploymentConfigPath,
	"blueGreen.traffic":         deploymentConfigPath + ".blueGreenUpdatePolicy.trafficRoutingConfiguration.type",
	"blueGreen.wait":            deploymentConfigPath + ".blueGreenUpdatePolicy.trafficRoutingConfiguration.waitIntervalInSeconds",
	"blueGreen.terminationWait": deploymentConfigPath + ".blueGreenUpdatePolicy.terminationWaitInSeconds",
	"rolling.batch":             deploymentConfigPath + ".rollingUpdatePolicy.maximumBatchSize",
	"rolling.wait":              deploymentConfigPath + ".rollingUpdatePolicy.waitIntervalInSeconds",
	"rolling.rollbackBatch":     deploymentConfigPath + ".rollingUpdatePolicy.rollbackMaximumBatchSize",
	"alarms":                    deploymentConfigPath + ".autoRollbackConfiguration.alarms",
}

// wirePolicyField is the DeploymentConfig path of serving.Policy field f
// of policy p.
func wirePolicyField(f string, p *serving.Policy) string {
	switch {
	case f == "maxDuration" && p != nil && p.Rolling != nil:
		return deploymentConfigPath + ".rollingUpdatePolicy.maximumExecutionTimeoutInSeconds"
	case f == "maxDuration":
		return deploymentConfigPath + ".blueGreenUpdatePolicy.maximumExecutionTimeoutInSeconds"
	}
	base, leaf := f, ""
	if b, ok := strings.CutSuffix(f, ".unit"); ok {
		base, leaf = b, ".type"
	} else if b, ok := strings.CutSuffix(f, ".value"); ok {
		base, leaf = b, ".value"
	}
	if base == "blueGreen.step" {
		member := "canarySize"
		if p != nil && p.BlueGreen != nil && p.BlueGreen.Traffic == serving.Linear {
			member = "linearStepSize"
		}
		return deploymentConfigPath + ".blueGreenUpdatePolicy.trafficRoutingConfiguration." + member + leaf
	}
	if w, ok := policyFieldPaths[base]; ok {
		return w + leaf
	}
	return deploymentConfigPath + " (" + f + ")"
}

// fieldErrors lists the *serving.FieldErrors in err's tree (Policy.Validate
// joins one per field).
func fieldErrors(err error) []*serving.FieldError {
	if fe, ok := err.(*serving.FieldError); ok {
		return []*serving.FieldError{fe}
	}
	var out []*serving.FieldError
	switch x := err.(type) {
	case interface{ Unwrap() []error }:
		for _, e := range x.Unwrap() {
			out = append(out, fieldErrors(e)...)
		}
	case interface{ Unwrap() error }:
		out = fieldErrors(x.Unwrap())
	}
	return out
}
