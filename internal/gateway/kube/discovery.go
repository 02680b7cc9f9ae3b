package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capstan-dev/capstan/internal/gateway"
	apiv1 "github.com/capstan-dev/capstan/internal/operator/apis/v1"
)

// Router is what Discovery drives (*gateway.Gateway).
type Router interface {
	SetRoute(gateway.Route)
	DeleteRoute(endpoint string)
}

// Options configure a Discovery.
type Options struct {
	// Namespace limits the watch to one namespace ("" watches all).
	Namespace string
	Logger    *slog.Logger
	// HoldTimeout and MaxHeld bound the requests held for a route with no
	// ready replica while it is activated (defaults
	// gateway.DefaultHoldTimeout and gateway.DefaultMaxHeld).
	HoldTimeout time.Duration
	MaxHeld     int
}

// Discovery watches the operator's objects and their EndpointSlices and
// sets the router's routes from them.
type Discovery struct {
	cache  cache.Cache
	router Router
	log    *slog.Logger
	kick   chan struct{}
	act    *activator
	opts   Options

	mu      sync.Mutex
	applied map[string]string      // route name → JSON of the route last set
	warned  map[string]bool        // conflicts already logged
	targets map[string]scaleTarget // route name → what activating it scales
	synced  chan struct{}
}

// New builds a Discovery over the cluster cfg reaches; Run starts it.
func New(cfg *rest.Config, r Router, o Options) (*Discovery, error) {
	scheme, err := apiv1.NewScheme()
	if err != nil {
		return nil, fmt.Errorf("gateway discovery: scheme: %w", err)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	// Only the slices of the operator's Services: they carry its labels.
	req, err := labels.NewRequirement(apiv1.LabelName, selection.Exists, nil)
	if err != nil {
		return nil, err
	}
	co := cache.Options{Scheme: scheme, ByObject: map[client.Object]cache.ByObject{
		&discoveryv1.EndpointSlice{}: {Label: labels.NewSelector().Add(*req)},
	}}
	if o.Namespace != "" {
		co.DefaultNamespaces = map[string]cache.Config{o.Namespace: {}}
	}
	c, err := cache.New(cfg, co)
	if err != nil {
		return nil, fmt.Errorf("gateway discovery: cache: %w", err)
	}
	// Activation reads and writes the scale subresource directly: the
	// cache holds no subresources, and a stale read could lower a count.
	direct, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("gateway discovery: client: %w", err)
	}
	d := &Discovery{cache: c, router: r, log: o.Logger, kick: make(chan struct{}, 1), opts: o,
		applied: map[string]string{}, warned: map[string]bool{}, targets: map[string]scaleTarget{}, synced: make(chan struct{})}
	d.act = &activator{c: direct, targets: d.target, log: o.Logger, inFlight: map[string]bool{}}
	return d, nil
}

// target is the scale target of the object holding route.
func (d *Discovery) target(route string) (scaleTarget, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	t, ok := d.targets[route]
	return t, ok
}

// Synced is closed once the routes reflect the first complete listing.
func (d *Discovery) Synced() <-chan struct{} { return d.synced }

// Run watches until ctx ends. Every change recomputes all routes from the
// informers' caches and sets only those that changed.
func (d *Discovery) Run(ctx context.Context) error {
	for _, obj := range []client.Object{&apiv1.InferenceEndpointConfig{}, &apiv1.JumpStartModel{}, &discoveryv1.EndpointSlice{}} {
		inf, err := d.cache.GetInformer(ctx, obj)
		if err != nil {
			return fmt.Errorf("gateway discovery: informer %T: %w", obj, err)
		}
		poke := func(any) { d.poke() }
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc: poke, DeleteFunc: poke, UpdateFunc: func(_, n any) { d.poke() },
		}); err != nil {
			return fmt.Errorf("gateway discovery: watch %T: %w", obj, err)
		}
	}
	errc := make(chan error, 1)
	go func() { errc <- d.cache.Start(ctx) }()
	if !d.cache.WaitForCacheSync(ctx) {
		select {
		case err := <-errc:
			return fmt.Errorf("gateway discovery: %w", err)
		default:
			return ctx.Err()
		}
	}
	d.poke()
	first := true
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-errc:
			if err != nil {
				return fmt.Errorf("gateway discovery: %w", err)
			}
			return nil
		case <-d.kick:
			if err := d.sync(ctx); err != nil {
				d.log.Warn("gateway discovery: sync", "err", err)
				continue
			}
			if first {
				first = false
				close(d.synced)
			}
		}
	}
}

func (d *Discovery) poke() {
	select {
	case d.kick <- struct{}{}:
	default:
	}
}

// sync sets the routes the caches describe and deletes the ones gone.
func (d *Discovery) sync(ctx context.Context) error {
	var iecs apiv1.InferenceEndpointConfigList
	var jsms apiv1.JumpStartModelList
	var eps discoveryv1.EndpointSliceList
	for _, l := range []client.ObjectList{&iecs, &jsms, &eps} {
		if err := d.cache.List(ctx, l); err != nil {
			return err
		}
	}
	objs := make([]apiv1.Object, 0, len(iecs.Items)+len(jsms.Items))
	for i := range iecs.Items {
		objs = append(objs, &iecs.Items[i])
	}
	for i := range jsms.Items {
		objs = append(objs, &jsms.Items[i])
	}
	routes, conflicts := Routes(objs, eps.Items)
	owners, _ := Owners(objs)
	d.mu.Lock()
	defer d.mu.Unlock()
	d.targets = make(map[string]scaleTarget, len(owners))
	for name, o := range owners {
		d.targets[name] = targetOf(o)
	}
	now := map[string]bool{}
	for _, c := range conflicts {
		if now[c] = true; !d.warned[c] {
			d.log.Warn("gateway discovery: route name conflict; the first object keeps it", "conflict", c)
		}
	}
	d.warned = now
	for name, r := range routes {
		// A request to a route with no ready replica is held while the
		// deployment is activated (scaled from zero, or its pods start).
		r.Activator, r.HoldTimeout, r.MaxHeld = d.act, d.opts.HoldTimeout, d.opts.MaxHeld
		b, err := json.Marshal(r)
		if err != nil {
			return err
		}
		if d.applied[name] == string(b) {
			continue
		}
		d.router.SetRoute(r)
		d.applied[name] = string(b)
		d.log.Info("gateway discovery: route set", "route", name, "strategy", r.Variants[0].RoutingStrategy, "backends", len(r.Variants[0].Backends))
	}
	for name := range d.applied {
		if _, ok := routes[name]; !ok {
			d.router.DeleteRoute(name)
			delete(d.applied, name)
			d.log.Info("gateway discovery: route deleted", "route", name)
		}
	}
	return nil
}
