package kube

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/capstan-dev/capstan/internal/gateway"
	"github.com/capstan-dev/capstan/internal/manifest"
	apiv1 "github.com/capstan-dev/capstan/internal/operator/apis/v1"
)

// VariantName is the one variant of every route (the deployment
// controller's name for it).
const VariantName = "AllTraffic"

// Routes maps the operator's objects and the EndpointSlices of their
// Services to gateway routes, by route name. Objects being deleted or
// failing validation get no route (the operator builds nothing for them);
// when two objects claim one route name the first in namespace/name order
// keeps it and the other is reported in conflicts.
func Routes(objs []apiv1.Object, eps []discoveryv1.EndpointSlice) (routes map[string]gateway.Route, conflicts []string) {
	owners, conflicts := Owners(objs)
	routes = map[string]gateway.Route{}
	for name, o := range owners {
		m := o.ToManifest()
		m.Default()
		routes[name] = route(m, name, slicesOf(eps, o.GetNamespace(), apiv1.SelectorLabels(kindOf(o), o.GetName())))
	}
	return routes, conflicts
}

// Owners maps each route name to the object that holds it, under Routes'
// rules (objects being deleted or failing validation hold none; of two
// claiming one name the first in namespace/name order keeps it, and the
// other is reported in conflicts).
func Owners(objs []apiv1.Object) (owners map[string]apiv1.Object, conflicts []string) {
	objs = slices.Clone(objs)
	slices.SortFunc(objs, func(a, b apiv1.Object) int {
		return strings.Compare(a.GetNamespace()+"/"+a.GetName()+"/"+kindOf(a), b.GetNamespace()+"/"+b.GetName()+"/"+kindOf(b))
	})
	owners = map[string]apiv1.Object{}
	for _, o := range objs {
		if !o.GetDeletionTimestamp().IsZero() {
			continue
		}
		m := o.ToManifest()
		m.Default()
		if err := m.Validate(); err != nil {
			continue
		}
		name := RouteName(m)
		if _, taken := owners[name]; taken {
			conflicts = append(conflicts, fmt.Sprintf("%s %s/%s: route %q is taken", m.GetKind(), o.GetNamespace(), o.GetName(), name))
			continue
		}
		owners[name] = o
	}
	return owners, conflicts
}

func kindOf(o apiv1.Object) string { return o.ToManifest().GetKind() }

// RouteName is the name clients send (the OpenAI model, the SageMaker
// endpoint): the SageMaker endpoint name when set, else the object's name,
// as the single-machine deployment controller names routes.
func RouteName(m manifest.Object) string {
	switch o := m.(type) {
	case *manifest.InferenceEndpointConfig:
		if o.Spec.EndpointName != "" {
			return o.Spec.EndpointName
		}
	case *manifest.JumpStartModel:
		if o.Spec.SageMakerEndpoint != nil && o.Spec.SageMakerEndpoint.Name != "" {
			return o.Spec.SageMakerEndpoint.Name
		}
	}
	return m.GetMeta().Name
}

// Strategy is the manifest's routing strategy, mapped as the deployment
// controller maps it (internal/deployment/spec.go): intelligentRoutingSpec
// when enabled (prefixaware by default), else the load balancer's round
// robin, else least outstanding requests.
func Strategy(m manifest.Object) string {
	var ir *manifest.IntelligentRoutingSpec
	var lb *manifest.LoadBalancer
	switch o := m.(type) {
	case *manifest.InferenceEndpointConfig:
		ir, lb = o.Spec.IntelligentRoutingSpec, o.Spec.LoadBalancer
	case *manifest.JumpStartModel:
		ir, lb = o.Spec.IntelligentRoutingSpec, o.Spec.LoadBalancer
	}
	switch {
	case ir != nil && ir.Enabled != nil && *ir.Enabled:
		if ir.RoutingStrategy == "" {
			return manifest.RoutingPrefixAware
		}
		return ir.RoutingStrategy
	case lb != nil && lb.RoutingAlgorithm == manifest.LBRoundRobin:
		return manifest.RoutingRoundRobin
	default:
		return "LEAST_OUTSTANDING_REQUESTS"
	}
}

// portName is the name of the model server's port in the pod and Service
// (build.go: the worker's modelInvocationPort name, "http" by default).
func portName(m manifest.Object) string {
	if o, ok := m.(*manifest.InferenceEndpointConfig); ok && o.Spec.Worker != nil && o.Spec.Worker.ModelInvocationPort.Name != "" {
		return o.Spec.Worker.ModelInvocationPort.Name
	}
	return manifest.DefaultPortName
}

// slicesOf are the EndpointSlices of one object's Service: the
// endpointslice controller copies the Service's labels (the operator's
// selector labels) onto them.
func slicesOf(eps []discoveryv1.EndpointSlice, ns string, sel map[string]string) []discoveryv1.EndpointSlice {
	var out []discoveryv1.EndpointSlice
	for _, s := range eps {
		if s.Namespace != ns || !s.DeletionTimestamp.IsZero() {
			continue
		}
		ok := true
		for k, v := range sel {
			ok = ok && s.Labels[k] == v
		}
		if ok {
			out = append(out, s)
		}
	}
	return out
}

func route(m manifest.Object, name string, eps []discoveryv1.EndpointSlice) gateway.Route {
	v := gateway.VariantRoute{Name: VariantName, Weight: 1, RoutingStrategy: Strategy(m)}
	kvaware := v.RoutingStrategy == manifest.RoutingKVAware
	seen := map[string]bool{}
	for _, s := range eps {
		port, ok := slicePort(s, portName(m))
		if !ok {
			continue
		}
		kvPort, hasKV := slicePort(s, apiv1.KVEventsPortName)
		for _, e := range s.Endpoints {
			if len(e.Addresses) == 0 || (e.Conditions.Ready != nil && !*e.Conditions.Ready) {
				continue // nil Ready means ready (the API's rule)
			}
			addr := e.Addresses[0]
			b := gateway.Backend{ID: backendID(s.Namespace, e, addr, port), Addr: net.JoinHostPort(addr, strconv.Itoa(int(port)))}
			if seen[b.ID] {
				continue // an endpoint may sit in two slices while they are rebalanced
			}
			seen[b.ID] = true
			if e.NodeName != nil {
				b.Node = *e.NodeName
			}
			if kvaware && hasKV {
				b.KVEventsEndpoint = "tcp://" + net.JoinHostPort(addr, strconv.Itoa(int(kvPort)))
			}
			v.Backends = append(v.Backends, b)
		}
	}
	// One order for every gateway replica, so round robin and ties break alike.
	slices.SortFunc(v.Backends, func(a, b gateway.Backend) int { return strings.Compare(a.ID, b.ID) })
	r := gateway.Route{Endpoint: name, Variants: []gateway.VariantRoute{v}}
	if o, ok := m.(*manifest.InferenceEndpointConfig); ok && o.Spec.Worker != nil && o.Spec.Worker.RequestLimits != nil {
		// Per-replica limits summed over the ready replicas, as the
		// deployment controller does.
		rl, n := o.Spec.Worker.RequestLimits, len(v.Backends)
		if rl.MaxConcurrentRequests != nil && *rl.MaxConcurrentRequests > 0 && n > 0 {
			r.MaxConcurrency = int(*rl.MaxConcurrentRequests) * n
			if rl.MaxQueueSize != nil {
				r.MaxQueue = int(*rl.MaxQueueSize) * n
			}
		}
	}
	return r
}

func slicePort(s discoveryv1.EndpointSlice, name string) (int32, bool) {
	for _, p := range s.Ports {
		if p.Port != nil && p.Name != nil && *p.Name == name {
			return *p.Port, true
		}
	}
	return 0, false
}

// backendID names a replica: its pod (namespace/name) when the endpoint
// refers to one, else its address.
func backendID(ns string, e discoveryv1.Endpoint, addr string, port int32) string {
	if r := e.TargetRef; r != nil && r.Kind == "Pod" && r.Name != "" {
		if r.Namespace != "" {
			ns = r.Namespace
		}
		return ns + "/" + r.Name
	}
	return ns + "/" + net.JoinHostPort(addr, strconv.Itoa(int(port)))
}
