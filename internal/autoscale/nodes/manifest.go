package nodes

import (
	"fmt"
	"math"
	"math/big"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/capstan-dev/capstan/internal/hyperpod"
)

// Manifest identities.
const (
	NodePoolAPIVersion  = "karpenter.sh/v1"
	NodePoolKind        = "NodePool"
	NodeClassAPIVersion = "karpenter.sagemaker.amazonaws.com/v1"
	NodeClassGroup      = "karpenter.sagemaker.amazonaws.com"
	NodeClassKind       = "HyperpodNodeClass"
	// ClusterAnnotation names the HyperPod cluster a NodePool belongs to;
	// without it the caller assigns the default cluster.
	ClusterAnnotation = "capstan.dev/cluster"
	// MaxNodeClassGroups is HyperpodNodeClass's cap on spec.instanceGroups.
	MaxNodeClassGroups = 10
)

// NodeClass is a HyperpodNodeClass: the instance groups its pools may grow.
type NodeClass struct {
	Name           string
	InstanceGroups []string
}

// ParseNodePool reads a karpenter.sh/v1 NodePool from YAML or JSON. Errors
// name the field; fields accepted with no effect in capstan come back as
// warnings naming them; unknown fields are errors.
func ParseNodePool(doc []byte) (NodePool, []string, error) {
	var w walker
	top, err := w.document(doc, NodePoolAPIVersion, NodePoolKind)
	if err != nil {
		return NodePool{}, nil, err
	}
	p := NodePool{Disruption: DisruptionPolicy{ConsolidationPolicy: WhenEmptyOrUnderutilized, Budgets: []Budget{{Nodes: "10%"}}}}
	if p.Name, p.Cluster, err = w.metadata(top, true); err != nil {
		return NodePool{}, nil, err
	}
	spec, err := top.object("spec", true)
	if err != nil {
		return NodePool{}, nil, err
	}
	if v, ok := spec.get("weight"); ok {
		n, err := integer(spec.at("weight"), v, 0, 100)
		if err != nil {
			return NodePool{}, nil, err
		}
		p.Weight = int(n)
	}
	tmpl, err := spec.object("template", true)
	if err != nil {
		return NodePool{}, nil, err
	}
	if err := w.templateSpec(tmpl, &p); err != nil {
		return NodePool{}, nil, err
	}
	if err := tmpl.done("metadata"); err != nil {
		return NodePool{}, nil, err
	}
	if lim, err := spec.object("limits", false); err != nil {
		return NodePool{}, nil, err
	} else if lim.m != nil {
		if p.Limits, err = limits(lim); err != nil {
			return NodePool{}, nil, err
		}
	}
	if d, err := spec.object("disruption", false); err != nil {
		return NodePool{}, nil, err
	} else if d.m != nil {
		if err := disruption(d, &p.Disruption); err != nil {
			return NodePool{}, nil, err
		}
	}
	if err := spec.done("replicas"); err != nil {
		return NodePool{}, nil, err
	}
	if err := top.done("status"); err != nil {
		return NodePool{}, nil, err
	}
	return p, w.warnings, nil
}

// ParseNodeClass reads a karpenter.sagemaker.amazonaws.com/v1
// HyperpodNodeClass from YAML or JSON.
func ParseNodeClass(doc []byte) (NodeClass, []string, error) {
	var w walker
	top, err := w.document(doc, NodeClassAPIVersion, NodeClassKind)
	if err != nil {
		return NodeClass{}, nil, err
	}
	var c NodeClass
	if c.Name, _, err = w.metadata(top, false); err != nil {
		return NodeClass{}, nil, err
	}
	spec, err := top.object("spec", true)
	if err != nil {
		return NodeClass{}, nil, err
	}
	groups, err := spec.strings("instanceGroups", true)
	if err != nil {
		return NodeClass{}, nil, err
	}
	path := spec.at("instanceGroups")
	if len(groups) == 0 || len(groups) > MaxNodeClassGroups {
		return NodeClass{}, nil, fmt.Errorf("%s: %d groups; want 1 to %d", path, len(groups), MaxNodeClassGroups)
	}
	for i, g := range groups {
		if g == "" {
			return NodeClass{}, nil, fmt.Errorf("%s[%d]: empty group name", path, i)
		}
		if slices.Contains(groups[:i], g) {
			return NodeClass{}, nil, fmt.Errorf("%s[%d]: group %q listed twice", path, i, g)
		}
	}
	c.InstanceGroups = groups
	if err := spec.done(); err != nil {
		return NodeClass{}, nil, err
	}
	if err := top.done("status"); err != nil {
		return NodeClass{}, nil, err
	}
	return c, w.warnings, nil
}

// walker collects warnings while a document is read.
type walker struct{ warnings []string }

// obj is one JSON object of the document, at path, with the keys read.
type obj struct {
	w    *walker
	path string
	m    map[string]any
	used map[string]bool
}

func (w *walker) document(doc []byte, apiVersion, kind string) (obj, error) {
	var m map[string]any
	if err := yaml.Unmarshal(doc, &m); err != nil {
		return obj{}, fmt.Errorf("parse %s: %w", kind, err)
	}
	if m == nil {
		return obj{}, fmt.Errorf("parse %s: empty document", kind)
	}
	top := obj{w: w, m: m, used: map[string]bool{}}
	for _, kv := range [][2]string{{"apiVersion", apiVersion}, {"kind", kind}} {
		key, want := kv[0], kv[1]
		got, err := top.str(key, true)
		if err != nil {
			return obj{}, err
		}
		if got != want {
			return obj{}, fmt.Errorf("%s: %q; want %q", key, got, want)
		}
	}
	return top, nil
}

var nameRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$`)

// metadata reads metadata.name and, for a NodePool, the cluster annotation.
func (w *walker) metadata(top obj, pool bool) (name, clusterName string, err error) {
	md, err := top.object("metadata", true)
	if err != nil {
		return "", "", err
	}
	if name, err = md.str("name", true); err != nil {
		return "", "", err
	}
	if !nameRE.MatchString(name) {
		return "", "", fmt.Errorf("%s: %q is not a DNS subdomain name", md.at("name"), name)
	}
	if a, err := md.object("annotations", false); err != nil {
		return "", "", err
	} else if a.m != nil {
		// Other annotations are the user's (kubectl's among them), not fields.
		for k := range a.m {
			if pool && k == ClusterAnnotation {
				if clusterName, err = a.str(k, true); err != nil {
					return "", "", err
				}
			}
		}
	}
	return name, clusterName, md.done("labels", "namespace", "uid", "resourceVersion", "generation",
		"creationTimestamp", "deletionTimestamp", "managedFields", "finalizers", "ownerReferences")
}

func (w *walker) templateSpec(tmpl obj, p *NodePool) error {
	ts, err := tmpl.object("spec", true)
	if err != nil {
		return err
	}
	ref, err := ts.object("nodeClassRef", true)
	if err != nil {
		return err
	}
	for _, kv := range [][2]string{{"group", NodeClassGroup}, {"kind", NodeClassKind}} {
		key, want := kv[0], kv[1]
		got, err := ref.str(key, true)
		if err != nil {
			return err
		}
		if got != want {
			return fmt.Errorf("%s: %q; want %q", ref.at(key), got, want)
		}
	}
	if p.NodeClass, err = ref.str("name", true); err != nil {
		return err
	}
	if p.NodeClass == "" {
		return fmt.Errorf("%s: required", ref.at("name"))
	}
	if err := ref.done(); err != nil {
		return err
	}
	reqs, err := ts.list("requirements", false)
	if err != nil {
		return err
	}
	for i, v := range reqs {
		r, err := requirement(ts.w, fmt.Sprintf("%s[%d]", ts.at("requirements"), i), v)
		if err != nil {
			return err
		}
		p.Requirements = append(p.Requirements, r)
	}
	if v, ok := ts.get("expireAfter"); ok {
		if err := durationOrNever(ts.at("expireAfter"), v); err != nil {
			return err
		}
		ts.used["expireAfter"] = false // valid, so done reports it as a no-effect warning
	}
	return ts.done("expireAfter", "terminationGracePeriod", "taints", "startupTaints", "kubelet")
}

func requirement(w *walker, path string, v any) (Requirement, error) {
	o, err := asObj(w, path, v)
	if err != nil {
		return Requirement{}, err
	}
	var r Requirement
	if r.Key, err = o.str("key", true); err != nil {
		return Requirement{}, err
	}
	if r.Operator, err = o.str("operator", true); err != nil {
		return Requirement{}, err
	}
	if r.Values, err = o.strings("values", false); err != nil {
		return Requirement{}, err
	}
	switch r.Operator {
	case OpIn:
		if len(r.Values) == 0 {
			return Requirement{}, fmt.Errorf("%s: In needs at least one value", o.at("values"))
		}
	case OpNotIn:
	case OpExists, OpDoesNotExist:
		if len(r.Values) > 0 {
			return Requirement{}, fmt.Errorf("%s: %s takes no values", o.at("values"), r.Operator)
		}
	case "Gt", "Lt":
		return Requirement{}, fmt.Errorf("%s: %s is not supported (no numeric key is honoured)", o.at("operator"), r.Operator)
	default:
		return Requirement{}, fmt.Errorf("%s: unknown operator %q; want In, NotIn, Exists or DoesNotExist", o.at("operator"), r.Operator)
	}
	switch r.Key {
	case KeyInstanceType, KeyInstanceGroup:
	case KeyCapacityType:
		for i, v := range r.Values {
			switch hyperpod.CapacityType(v) {
			case hyperpod.CapacityOnDemand, hyperpod.CapacitySpot, hyperpod.CapacityReserved:
			default:
				return Requirement{}, fmt.Errorf("%s[%d]: unknown capacity type %q; want on-demand, spot or reserved", o.at("values"), i, v)
			}
		}
	case KeyZone:
		w.warnings = append(w.warnings, fmt.Sprintf("%s: key %s has no effect: offerings carry no zone", o.at("key"), r.Key))
	default:
		w.warnings = append(w.warnings, fmt.Sprintf("%s: key %s has no effect (honoured: %s, %s, %s)", o.at("key"), r.Key,
			KeyInstanceType, KeyCapacityType, KeyInstanceGroup))
	}
	return r, o.done("minValues")
}

func limits(o obj) (Limits, error) {
	var l Limits
	keys := make([]string, 0, len(o.m))
	for k := range o.m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, key := range keys {
		v, path := o.m[key], o.at(key)
		q, err := quantity(path, v)
		if err != nil {
			return Limits{}, err
		}
		o.used[key] = true
		switch key {
		case "cpu":
			m, err := toInt(path, new(big.Rat).Mul(q, big.NewRat(1000, 1)), math.MaxInt64)
			if err != nil {
				return Limits{}, err
			}
			l.MilliCPU = m
		case "memory":
			b, err := toInt(path, q, math.MaxInt64)
			if err != nil {
				return Limits{}, err
			}
			l.MemoryBytes = b
		case "nvidia.com/gpu", "nodes":
			if !q.IsInt() {
				return Limits{}, fmt.Errorf("%s: %s is not a whole number", path, q.FloatString(3))
			}
			n, err := toInt(path, q, math.MaxInt32)
			if err != nil {
				return Limits{}, err
			}
			if key == "nodes" {
				l.Nodes = int(n)
			} else {
				l.GPUs = int(n)
			}
		default:
			o.used[key] = false // a valid quantity of a resource capstan does not count: done warns
		}
	}
	return l, o.doneWith(func(key string) bool { return true })
}

func disruption(o obj, d *DisruptionPolicy) error {
	if v, ok := o.get("consolidationPolicy"); ok {
		s, isStr := v.(string)
		switch {
		case !isStr:
			return fmt.Errorf("%s: want a string", o.at("consolidationPolicy"))
		case s == WhenEmpty || s == WhenEmptyOrUnderutilized:
			d.ConsolidationPolicy = s
		default:
			return fmt.Errorf("%s: %q is not supported; want WhenEmpty or WhenEmptyOrUnderutilized", o.at("consolidationPolicy"), s)
		}
	}
	if v, ok := o.get("consolidateAfter"); ok {
		s, isStr := v.(string)
		path := o.at("consolidateAfter")
		switch {
		case !isStr:
			return fmt.Errorf("%s: want a duration such as \"30s\" or \"Never\"", path)
		case s == "Never":
			d.Never = true
		default:
			dur, err := time.ParseDuration(s)
			if err != nil || dur < 0 {
				return fmt.Errorf("%s: %q is not a non-negative duration or \"Never\"", path, s)
			}
			d.ConsolidateAfter = dur
		}
	}
	if _, ok := o.m["budgets"]; ok {
		list, err := o.list("budgets", false)
		if err != nil {
			return err
		}
		d.Budgets = nil
		for i, v := range list {
			b, err := budget(o.w, fmt.Sprintf("%s[%d]", o.at("budgets"), i), v)
			if err != nil {
				return err
			}
			d.Budgets = append(d.Budgets, b)
		}
	}
	return o.done()
}

func budget(w *walker, path string, v any) (Budget, error) {
	o, err := asObj(w, path, v)
	if err != nil {
		return Budget{}, err
	}
	var b Budget
	nv, ok := o.get("nodes")
	switch n := nv.(type) {
	case string:
		b.Nodes = n
	case float64:
		b.Nodes = strconv.FormatFloat(n, 'f', -1, 64)
	default:
		if !ok {
			return Budget{}, fmt.Errorf("%s: required", o.at("nodes"))
		}
		return Budget{}, fmt.Errorf("%s: want \"10%%\" or a node count", o.at("nodes"))
	}
	if _, ok := budgetNodes(b.Nodes, 0); !ok {
		return Budget{}, fmt.Errorf("%s: %q; want a percentage 0%%-100%% or a non-negative count", o.at("nodes"), b.Nodes)
	}
	if b.Reasons, err = o.strings("reasons", false); err != nil {
		return Budget{}, err
	}
	for i, r := range b.Reasons {
		switch r {
		case ReasonEmpty, ReasonUnderutilized:
		case "Drifted":
			w.warnings = append(w.warnings, fmt.Sprintf("%s[%d]: Drifted has no effect: capstan does not detect drift", o.at("reasons"), i))
		default:
			return Budget{}, fmt.Errorf("%s[%d]: unknown reason %q; want Empty, Underutilized or Drifted", o.at("reasons"), i, r)
		}
	}
	return b, o.done("schedule", "duration")
}

func durationOrNever(path string, v any) error {
	s, ok := v.(string)
	if !ok {
		return fmt.Errorf("%s: want a duration such as \"720h\" or \"Never\"", path)
	}
	if s == "Never" {
		return nil
	}
	if d, err := time.ParseDuration(s); err != nil || d < 0 {
		return fmt.Errorf("%s: %q is not a non-negative duration or \"Never\"", path, s)
	}
	return nil
}

// quantity parses a Kubernetes quantity in the forms limits use: a plain
// or decimal number ("8", "1.5"), milli ("500m"), decimal ("10G") and binary
// ("64Gi") suffixes.
func quantity(path string, v any) (*big.Rat, error) {
	var s string
	switch x := v.(type) {
	case string:
		s = strings.TrimSpace(x)
	case float64:
		s = strconv.FormatFloat(x, 'f', -1, 64)
	default:
		return nil, fmt.Errorf("%s: want a quantity such as \"8\", \"500m\" or \"64Gi\"", path)
	}
	num, mult := s, big.NewRat(1, 1)
	for _, suf := range []struct {
		s string
		r *big.Rat
	}{
		{"Ki", pow(2, 10)}, {"Mi", pow(2, 20)}, {"Gi", pow(2, 30)}, {"Ti", pow(2, 40)}, {"Pi", pow(2, 50)}, {"Ei", pow(2, 60)},
		{"m", big.NewRat(1, 1000)}, {"k", pow(10, 3)}, {"M", pow(10, 6)}, {"G", pow(10, 9)}, {"T", pow(10, 12)},
		{"P", pow(10, 15)}, {"E", pow(10, 18)},
	} {
		if n, ok := strings.CutSuffix(s, suf.s); ok {
			num, mult = n, suf.r
			break
		}
	}
	q, ok := new(big.Rat).SetString(num)
	if num == "" || !ok || strings.ContainsAny(num, "/+") {
		return nil, fmt.Errorf("%s: %q is not a quantity such as \"8\", \"500m\" or \"64Gi\"", path, s)
	}
	if q.Sign() < 0 {
		return nil, fmt.Errorf("%s: %q is negative", path, s)
	}
	return q.Mul(q, mult), nil
}

func pow(base, exp int64) *big.Rat {
	return new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(base), big.NewInt(exp), nil))
}

// toInt rounds q up to a whole number no larger than limit.
func toInt(path string, q *big.Rat, limit int64) (int64, error) {
	n := new(big.Int).Quo(q.Num(), q.Denom())
	if !q.IsInt() {
		n.Add(n, big.NewInt(1))
	}
	if n.Cmp(big.NewInt(limit)) > 0 {
		return 0, fmt.Errorf("%s: %s is too large", path, q.FloatString(0))
	}
	return n.Int64(), nil
}

func integer(path string, v any, lo, hi int64) (int64, error) {
	f, ok := v.(float64)
	if !ok || f != math.Trunc(f) || f < float64(lo) || f > float64(hi) {
		return 0, fmt.Errorf("%s: want a whole number from %d to %d", path, lo, hi)
	}
	return int64(f), nil
}

func asObj(w *walker, path string, v any) (obj, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return obj{}, fmt.Errorf("%s: want an object", path)
	}
	return obj{w: w, path: path, m: m, used: map[string]bool{}}, nil
}

func (o obj) at(key string) string {
	if o.path == "" {
		return key
	}
	return o.path + "." + key
}

func (o obj) get(key string) (any, bool) {
	v, ok := o.m[key]
	if ok {
		o.used[key] = true
	}
	return v, ok
}

func (o obj) object(key string, required bool) (obj, error) {
	v, ok := o.get(key)
	if !ok || v == nil {
		if required {
			return obj{}, fmt.Errorf("%s: required", o.at(key))
		}
		return obj{w: o.w, path: o.at(key)}, nil
	}
	return asObj(o.w, o.at(key), v)
}

func (o obj) str(key string, required bool) (string, error) {
	v, ok := o.get(key)
	if !ok {
		if required {
			return "", fmt.Errorf("%s: required", o.at(key))
		}
		return "", nil
	}
	s, isStr := v.(string)
	if !isStr {
		return "", fmt.Errorf("%s: want a string", o.at(key))
	}
	return s, nil
}

func (o obj) list(key string, required bool) ([]any, error) {
	v, ok := o.get(key)
	if !ok || v == nil {
		if required {
			return nil, fmt.Errorf("%s: required", o.at(key))
		}
		return nil, nil
	}
	l, isList := v.([]any)
	if !isList {
		return nil, fmt.Errorf("%s: want a list", o.at(key))
	}
	return l, nil
}

func (o obj) strings(key string, required bool) ([]string, error) {
	l, err := o.list(key, required)
	if err != nil {
		return nil, err
	}
	var out []string
	for i, v := range l {
		s, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("%s[%d]: want a string", o.at(key), i)
		}
		out = append(out, s)
	}
	return out, nil
}

// done checks the keys not read: those in noEffect are accepted with a
// warning, any other is an error.
func (o obj) done(noEffect ...string) error {
	return o.doneWith(func(key string) bool { return slices.Contains(noEffect, key) })
}

func (o obj) doneWith(noEffect func(string) bool) error {
	keys := make([]string, 0, len(o.m))
	for k := range o.m {
		if !o.used[k] {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		if !noEffect(k) {
			return fmt.Errorf("%s: unknown field", o.at(k))
		}
		o.w.warnings = append(o.w.warnings, fmt.Sprintf("%s: accepted, but has no effect in capstan", o.at(k)))
	}
	return nil
}
