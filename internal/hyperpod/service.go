package hyperpod

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/capstan-dev/capstan/internal/catalog"
	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/cluster"
	"github.com/capstan-dev/capstan/internal/fleet"
	"github.com/capstan-dev/capstan/internal/placement"
	"github.com/capstan-dev/capstan/internal/store"
)

// Store buckets: one record per cluster, one per node (keyed by instance
// id), and one bounded event list per cluster.
const (
	KindCluster = "hpclusters"
	KindNode    = "hpnodes"
	KindEvents  = "hpevents"
)

// MaxEvents is how many events a cluster keeps (the newest).
const MaxEvents = 256

// SpotNotice is how long before a spot interruption its warning comes.
const SpotNotice = 2 * time.Minute

// InsufficientCapacityMessage is the FailureMessage of a cluster whose
// creation ran out of capacity (SageMaker's wording).
const InsufficientCapacityMessage = "We currently do not have sufficient capacity for the requested instance type(s). Please try again."

// Workloads says what runs on a cluster.
type Workloads interface {
	InCluster(cluster string) []string
}

// SpotOptions tune simulated spot instances.
type SpotOptions struct {
	Seed int64
	// MeanTimeToInterruption: default 6h; below 0 no spot node is ever
	// interrupted.
	MeanTimeToInterruption time.Duration
	// PriceFactor is the spot price as a share of on-demand (default 0.35).
	PriceFactor float64
}

// Options configure a Service.
type Options struct {
	Store      *store.Store
	Clock      clock.Clock
	Logger     *slog.Logger
	Registerer prometheus.Registerer // nil: no metrics
	Catalog    *catalog.Catalog
	// Capacity holds the instances of owner "cluster/<name>":
	// OnDemand(type) for on-demand and spot nodes, OnPlan(ref) for reserved.
	Capacity  placement.Allocator
	Plans     placement.Plans
	PlanNodes placement.NodeSource
	Pool      *cluster.Cluster
	// Workloads is what runs on clusters; DeleteCluster refuses while any
	// does. Nil: nothing runs.
	Workloads Workloads
	// LaunchTime is how long an instance type takes to launch (default 30s).
	LaunchTime func(instanceType string) time.Duration
	Spot       SpotOptions
	// DrainTimeout is how long a leaving node waits, cordoned, for its
	// replicas to move before it leaves anyway (default 2m).
	DrainTimeout time.Duration
	Resync       time.Duration // default 1s
	// Region and AccountID make ARNs (defaults us-east-1, 000000000000).
	Region, AccountID string
	// Rand draws instance and cluster ids; nil seeds one from the time.
	// Tests pass a seeded one.
	Rand *rand.Rand
}

// Service owns the clusters and their nodes. It is safe for concurrent use:
// every write (an API call or a reconcile pass) holds mu, so the controller
// never races a client on a cluster.
type Service struct {
	o       Options
	log     *slog.Logger
	metrics *metrics

	mu        sync.Mutex
	rand      *rand.Rand
	accruedAt time.Time // node hours are accrued up to here
	wake      time.Time // Reconcile's earliest pass.wake
}

// New checks o and returns a Service.
func New(o Options) (*Service, error) {
	var missing []string
	for _, m := range []struct {
		name string
		nil  bool
	}{{"Store", o.Store == nil}, {"Clock", o.Clock == nil}, {"Catalog", o.Catalog == nil}, {"Capacity", o.Capacity == nil},
		{"Plans", o.Plans == nil}, {"PlanNodes", o.PlanNodes == nil}, {"Pool", o.Pool == nil}} {
		if m.nil {
			missing = append(missing, m.name)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("hyperpod: missing options: %s", strings.Join(missing, ", "))
	}
	if math.IsNaN(o.Spot.PriceFactor) || o.Spot.PriceFactor < 0 || o.Spot.PriceFactor > 1 {
		return nil, fmt.Errorf("hyperpod: Spot.PriceFactor %v must be in [0, 1] (0: the default)", o.Spot.PriceFactor)
	}
	if o.DrainTimeout < 0 || o.Resync < 0 {
		return nil, errors.New("hyperpod: DrainTimeout and Resync must not be negative")
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.LaunchTime == nil {
		o.LaunchTime = func(string) time.Duration { return 30 * time.Second }
	}
	if o.Spot.MeanTimeToInterruption == 0 {
		o.Spot.MeanTimeToInterruption = 6 * time.Hour
	}
	if o.Spot.PriceFactor == 0 {
		o.Spot.PriceFactor = 0.35
	}
	if o.DrainTimeout == 0 {
		o.DrainTimeout = 2 * time.Minute
	}
	if o.Resync == 0 {
		o.Resync = time.Second
	}
	if o.Region == "" {
		o.Region = "us-east-1"
	}
	if o.AccountID == "" {
		o.AccountID = "000000000000"
	}
	r := o.Rand
	if r == nil {
		// Ids only need to differ between runs: the package-level source is
		// randomly seeded. Tests pass a seeded Rand.
		r = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	m, err := newMetrics(o.Registerer)
	if err != nil {
		return nil, err
	}
	if o.Registerer != nil {
		if err := o.Registerer.Register(newMIGCollector(o.Pool)); err != nil {
			return nil, fmt.Errorf("hyperpod: register MIG metrics: %w", err)
		}
	}
	return &Service{o: o, log: o.Logger, metrics: m, rand: r, accruedAt: o.Clock.Now()}, nil
}

// ARN is the cluster's ARN.
func (s *Service) ARN(c Cluster) string {
	return fmt.Sprintf("arn:aws:sagemaker:%s:%s:cluster/%s", s.o.Region, s.o.AccountID, c.ID)
}

// owner is the capacity owner of a cluster's instances.
func owner(name string) string { return "cluster/" + name }

// record is a stored cluster with what it holds of the capacity (so a
// steady controller writes nothing).
type record struct {
	Cluster
	Held placement.Want `json:"held,omitempty"`
}

type eventLog struct {
	Events []Event `json:"events"`
}

// ---- reads ----

// resolve finds a cluster by name or ARN in tx.
func resolve(tx *store.Tx, nameOrArn string) (record, error) {
	var rec record
	if id, ok := strings.CutPrefix(arnID(nameOrArn), "id:"); ok {
		recs, err := store.List[record](tx, KindCluster)
		if err != nil {
			return rec, err
		}
		for _, r := range recs {
			if r.ID == id {
				return r, nil
			}
		}
		return rec, &NotFoundError{Kind: "cluster", Name: nameOrArn}
	}
	found, err := tx.Get(KindCluster, nameOrArn, &rec)
	if err != nil {
		return rec, err
	}
	if !found {
		return rec, &NotFoundError{Kind: "cluster", Name: nameOrArn}
	}
	return rec, nil
}

// arnID returns "id:<id>" for a cluster ARN and the input otherwise.
func arnID(s string) string {
	if !strings.HasPrefix(s, "arn:") {
		return s
	}
	_, id, ok := strings.Cut(s, ":cluster/")
	if !ok {
		return s
	}
	return "id:" + id
}

// clusterNodes returns the nodes of cluster name (every cluster for ""),
// sorted by cluster, group, launch time and id.
func clusterNodes(tx *store.Tx, name string) ([]Node, error) {
	all, err := store.List[Node](tx, KindNode)
	if err != nil {
		return nil, err
	}
	out := all[:0]
	for _, n := range all {
		if name == "" || n.Cluster == name {
			out = append(out, n)
		}
	}
	sortNodes(out)
	return out, nil
}

func sortNodes(ns []Node) {
	sort.Slice(ns, func(i, j int) bool {
		a, b := ns[i], ns[j]
		if a.Cluster != b.Cluster {
			return a.Cluster < b.Cluster
		}
		if a.Group != b.Group {
			return a.Group < b.Group
		}
		if !a.Launched.Equal(b.Launched) {
			return a.Launched.Before(b.Launched)
		}
		return a.ID < b.ID
	})
}

// Cluster returns a cluster and its groups with their running counts.
func (s *Service) Cluster(_ context.Context, nameOrArn string) (Cluster, []GroupView, error) {
	var rec record
	var views []GroupView
	err := s.o.Store.View(func(tx *store.Tx) error {
		var err error
		if rec, err = resolve(tx, nameOrArn); err != nil {
			return err
		}
		nodes, err := clusterNodes(tx, rec.Name)
		if err != nil {
			return err
		}
		for _, g := range rec.Groups {
			v := GroupView{Group: g}
			for _, n := range nodes {
				if n.Group == g.Name && n.Status == NodeRunning {
					v.Current++
				}
				if n.Group == g.Name && (n.Status != NodeRunning || !sameLayout(n.MIGLayout, g.MIGLayout)) {
					v.LayoutPending++
				}
			}
			views = append(views, v)
		}
		return nil
	})
	return rec.Cluster, views, err
}

// Clusters returns every cluster, sorted by name.
func (s *Service) Clusters(_ context.Context) ([]Cluster, error) {
	var out []Cluster
	err := s.o.Store.View(func(tx *store.Tx) error {
		recs, err := store.List[record](tx, KindCluster)
		for _, r := range recs {
			out = append(out, r.Cluster)
		}
		return err
	})
	return out, err
}

// Nodes returns the nodes of a cluster ("" for every cluster), sorted by
// cluster, group, launch time and id.
func (s *Service) Nodes(_ context.Context, clusterName string) ([]Node, error) {
	var out []Node
	err := s.o.Store.View(func(tx *store.Tx) error {
		if clusterName != "" {
			rec, err := resolve(tx, clusterName)
			if err != nil {
				return err
			}
			clusterName = rec.Name
		}
		var err error
		out, err = clusterNodes(tx, clusterName)
		return err
	})
	return out, err
}

// nodeID accepts an instance id or a node name (hyperpod-<id>).
func nodeID(s string) string { return strings.TrimPrefix(s, "hyperpod-") }

// Node returns one node; clusterName "" matches any cluster.
func (s *Service) Node(_ context.Context, clusterName, id string) (Node, error) {
	var n Node
	err := s.o.Store.View(func(tx *store.Tx) error {
		if clusterName != "" {
			rec, err := resolve(tx, clusterName)
			if err != nil {
				return err
			}
			clusterName = rec.Name
		}
		found, err := tx.Get(KindNode, nodeID(id), &n)
		if err != nil {
			return err
		}
		if !found || clusterName != "" && n.Cluster != clusterName {
			return &NotFoundError{Kind: "node", Name: id}
		}
		return nil
	})
	return n, err
}

// Events returns a cluster's events, newest last; node (an id or name)
// narrows them to one node's.
func (s *Service) Events(_ context.Context, clusterName, node string) ([]Event, error) {
	var out []Event
	err := s.o.Store.View(func(tx *store.Tx) error {
		rec, err := resolve(tx, clusterName)
		if err != nil {
			return err
		}
		var log eventLog
		if _, err := tx.Get(KindEvents, rec.Name, &log); err != nil {
			return err
		}
		for _, e := range log.Events {
			if node == "" || e.Node == nodeID(node) {
				out = append(out, e)
			}
		}
		return nil
	})
	return out, err
}

// NodeEvent records an event of a node's own, from outside the service:
// the deployment controller records where it binds replicas and which it
// moves off. A node that is gone is not an error; there is nothing to add
// the event to.
func (s *Service) NodeEvent(_ context.Context, nodeName, reason, message string) error {
	now := s.o.Clock.Now()
	return s.o.Store.Update(func(tx *store.Tx) error {
		var n Node
		found, err := tx.Get(KindNode, nodeID(nodeName), &n)
		if err != nil || !found || !tx.Exists(KindCluster, n.Cluster) {
			return err
		}
		var log eventLog
		if _, err := tx.Get(KindEvents, n.Cluster, &log); err != nil {
			return err
		}
		log.Events = append(log.Events, Event{Time: now, Cluster: n.Cluster, Node: n.ID, Type: "Normal", Reason: reason, Message: message})
		if k := len(log.Events); k > MaxEvents {
			log.Events = log.Events[k-MaxEvents:]
		}
		return tx.Put(KindEvents, n.Cluster, log)
	})
}

// Offerings lists, for each group of a cluster that is not being deleted,
// what a node costs and how many more it may launch now.
func (s *Service) Offerings(_ context.Context, clusterName string) ([]Offering, error) {
	var out []Offering
	err := s.o.Store.View(func(tx *store.Tx) error {
		rec, err := resolve(tx, clusterName)
		if err != nil {
			return err
		}
		if rec.Status == StatusDeleting {
			return nil
		}
		for _, g := range rec.Groups {
			if g.Status == GroupDeleting {
				continue
			}
			free, err := s.o.Capacity.Free(tx, owner(rec.Name), source(g.InstanceGroupSpec))
			if err != nil {
				return fmt.Errorf("hyperpod: free capacity of %s/%s: %w", rec.Name, g.Name, err)
			}
			avail := max(min(free, MaxNodesPerGroup-g.Target), 0)
			parts, err := s.partitions(g.InstanceType, g.MIGLayout)
			if err != nil {
				return fmt.Errorf("hyperpod: MIG layout of %s/%s: %w", rec.Name, g.Name, err)
			}
			out = append(out, Offering{Cluster: rec.Name, Group: g.Name, InstanceType: g.InstanceType,
				CapacityType: g.CapacityType(), PricePerHour: s.price(g.InstanceGroupSpec), Available: avail, Partitions: parts})
		}
		return nil
	})
	return out, err
}

// source is where a group's instances come from.
func source(g InstanceGroupSpec) placement.Source {
	if !g.Plan.IsZero() {
		return placement.OnPlan(g.Plan)
	}
	return placement.OnDemand(g.InstanceType)
}

// price is what one node of g costs an hour.
func (s *Service) price(g InstanceGroupSpec) float64 {
	it, err := s.o.Catalog.InstanceType(g.InstanceType)
	if err != nil {
		return 0
	}
	switch g.CapacityType() {
	case CapacityReserved:
		return 0
	case CapacitySpot:
		return it.PricePerHour * s.o.Spot.PriceFactor
	}
	return it.PricePerHour
}

// ---- ids ----

const hexDigits = "0123456789abcdef"
const alnum = "abcdefghijklmnopqrstuvwxyz0123456789"

// newNodeID draws an unused instance id; s.mu is held.
func (s *Service) newNodeID(tx *store.Tx) string {
	for {
		b := make([]byte, 17)
		for i := range b {
			b[i] = hexDigits[s.rand.IntN(len(hexDigits))]
		}
		id := "i-" + string(b)
		if !tx.Exists(KindNode, id) {
			return id
		}
	}
}

// newClusterID draws a cluster id; s.mu is held.
func (s *Service) newClusterID() string {
	b := make([]byte, 12)
	for i := range b {
		b[i] = alnum[s.rand.IntN(len(alnum))]
	}
	return string(b)
}

// interruptAt is when spot node id, launched at launched, is reclaimed:
// an exponential draw from a rand seeded by Spot.Seed and the id, so a
// seed replays the same interruptions.
func (s *Service) interruptAt(id string, launched time.Time) time.Time {
	mtti := s.o.Spot.MeanTimeToInterruption
	if mtti < 0 {
		return time.Time{}
	}
	h := fnv.New64a()
	h.Write([]byte(id))
	r := rand.New(rand.NewPCG(uint64(s.o.Spot.Seed), h.Sum64()))
	// Cap the draw at ten years so the duration cannot overflow.
	d := min(r.ExpFloat64()*float64(mtti), float64(10*365*24*time.Hour))
	return launched.Add(time.Duration(d))
}

// ---- writes ----

// CreateCluster validates spec, holds its capacity and stores the cluster
// (Creating) with a Pending node per instance, all in one transaction: a
// shortage (*CapacityError) stores nothing.
func (s *Service) CreateCluster(_ context.Context, spec ClusterSpec) (Cluster, error) {
	return s.create(spec, false)
}

// Seed creates the config's default cluster at first start: InService
// with its nodes Running at once. An existing cluster of that name is
// returned as it is.
//
// The config names no roles, so a group without an ExecutionRole gets
// DefaultExecutionRole of the account.
func (s *Service) Seed(_ context.Context, spec ClusterSpec) (Cluster, error) {
	var rec record
	err := s.o.Store.View(func(tx *store.Tx) error {
		found, err := tx.Get(KindCluster, spec.Name, &rec)
		if err == nil && !found {
			err = &NotFoundError{Kind: "cluster", Name: spec.Name}
		}
		return err
	})
	if err == nil {
		return rec.Cluster, nil
	}
	var nf *NotFoundError
	if !errors.As(err, &nf) {
		return Cluster{}, err
	}
	spec.Groups = slices.Clone(spec.Groups)
	for i := range spec.Groups {
		if spec.Groups[i].ExecutionRole == "" {
			spec.Groups[i].ExecutionRole = s.DefaultExecutionRole()
		}
	}
	return s.create(spec, true)
}

// DefaultExecutionRole is the role seeded groups run as.
func (s *Service) DefaultExecutionRole() string {
	return fmt.Sprintf("arn:aws:iam::%s:role/capstan-hyperpod-execution", s.o.AccountID)
}

func (s *Service) create(spec ClusterSpec, seed bool) (Cluster, error) {
	now := s.o.Clock.Now().UTC()
	groups, err := s.validateSpec(spec, now)
	if err != nil {
		return Cluster{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var rec record
	var p *pass
	err = s.o.Store.Update(func(tx *store.Tx) error {
		if tx.Exists(KindCluster, spec.Name) {
			return &ExistsError{Name: spec.Name}
		}
		n := 0
		if err := tx.Each(KindCluster, func(string, []byte) error { n++; return nil }); err != nil {
			return err
		}
		if n >= MaxClusters {
			return &LimitError{What: "clusters", Limit: MaxClusters}
		}
		rec = record{Cluster: Cluster{Name: spec.Name, ID: s.newClusterID(), Status: StatusCreating, Groups: groups,
			EksClusterArn: spec.EksClusterArn, NodeRecovery: spec.NodeRecovery, AutoScaling: spec.AutoScaling, TieredStorage: spec.TieredStorage,
			ClusterRole: spec.ClusterRole, Tags: slices.Clone(spec.Tags), Created: now, Updated: now}}
		if rec.NodeRecovery == "" {
			rec.NodeRecovery = RecoveryAutomatic
		}
		if seed {
			rec.Status = StatusInService
		}
		if err := s.hold(tx, &rec, nil); err != nil {
			return err
		}
		p = s.newPass(tx, now)
		p.event(rec.Name, "", "Normal", "ClusterCreating", fmt.Sprintf("cluster %s created with %d instance groups", rec.Name, len(groups)))
		var nodes []Node
		for i := range rec.Groups {
			g := &rec.Groups[i]
			for range g.Target {
				n := p.launch(&rec, g, "instance group count", nodes)
				if seed {
					s.makeReady(p, &rec, &n)
				}
				nodes = append(nodes, n)
			}
			if seed {
				g.Status = GroupInService
			}
		}
		if err := tx.Put(KindCluster, rec.Name, rec); err != nil {
			return err
		}
		return p.flush()
	})
	if err != nil {
		return Cluster{}, err
	}
	p.apply()
	s.log.Info("hyperpod: cluster created", "cluster", rec.Name, "status", rec.Status, "groups", len(rec.Groups))
	return rec.Cluster, nil
}

// hold sets the cluster's holding to what its groups and nodes need, failing
// with *CapacityError (naming a group whose source is short) when that
// cannot be held. nodes are the cluster's stored nodes.
func (s *Service) hold(tx *store.Tx, rec *record, nodes []Node) error {
	want := s.want(rec, nodes)
	if wantEqual(want, rec.Held) {
		return nil
	}
	if err := s.o.Capacity.Set(tx, owner(rec.Name), want); err != nil {
		return &CapacityError{Group: shortGroup(rec, err), Err: err}
	}
	rec.Held = want
	return nil
}

// want is what a cluster holds: per group the larger of its target and its
// node records (leaving nodes hold until they are gone); nothing of a plan
// that has ended (no allocator grants it).
func (s *Service) want(rec *record, nodes []Node) placement.Want {
	now := s.o.Clock.Now()
	w := placement.Want{}
	for _, g := range rec.Groups {
		if !g.Plan.IsZero() {
			if info, ok := s.o.Plans.Plan(g.Plan); !ok || !now.Before(info.End) {
				continue
			}
		}
		n := 0
		for _, x := range nodes {
			if x.Group == g.Name {
				n++
			}
		}
		target := g.Target
		if rec.retiring() || g.Status == GroupDeleting {
			target = 0
		}
		if m := max(target, n); m > 0 {
			w[source(g.InstanceGroupSpec)] += m
		}
	}
	return w
}

func wantEqual(a, b placement.Want) bool {
	for k, v := range a {
		if v > 0 && b[k] != v {
			return false
		}
	}
	for k, v := range b {
		if v > 0 && a[k] != v {
			return false
		}
	}
	return true
}

// shortGroup names the group whose source err (an allocator's limit error)
// is about.
func shortGroup(rec *record, err error) string {
	var pl *placement.LimitError
	var fl *fleet.LimitError
	isPlan, isFleet := errors.As(err, &pl), errors.As(err, &fl)
	for _, g := range rec.Groups {
		if isPlan && g.Plan.Key == pl.Plan.Key || isFleet && g.Plan.IsZero() && g.InstanceType == fl.InstanceType {
			return g.Name
		}
	}
	return ""
}

// mutate runs fn on the named cluster and its nodes in one transaction and,
// with conv, holds the capacity the result needs and converges the cluster
// (launching and retiring nodes) in the same transaction, so a target
// change and the node records it implies commit together.
func (s *Service) mutate(nameOrArn string, conv bool, fn func(p *pass, rec *record, nodes []Node) ([]Node, error)) (Cluster, error) {
	now := s.o.Clock.Now().UTC()
	s.mu.Lock()
	defer s.mu.Unlock()
	var rec record
	var p *pass
	err := s.o.Store.Update(func(tx *store.Tx) error {
		var err error
		if rec, err = resolve(tx, nameOrArn); err != nil {
			return err
		}
		nodes, err := clusterNodes(tx, rec.Name)
		if err != nil {
			return err
		}
		p = s.newPass(tx, now)
		if nodes, err = fn(p, &rec, nodes); err != nil {
			return err
		}
		rec.Updated = now
		if !conv {
			return errors.Join(s.save(tx, &rec), p.flush())
		}
		if err := s.hold(tx, &rec, nodes); err != nil {
			return err
		}
		if _, err := s.converge(p, &rec, nodes); err != nil {
			return err
		}
		return p.flush()
	})
	if err != nil {
		return Cluster{}, err
	}
	p.apply()
	return rec.Cluster, nil
}

// UpdateCluster changes an InService cluster: group counts and new groups
// (capacity held in the same transaction), groups to delete, node recovery,
// autoscaling and the cluster role. The cluster is Updating until the
// controller has converged it.
func (s *Service) UpdateCluster(_ context.Context, nameOrArn string, u ClusterUpdate) (Cluster, error) {
	now := s.o.Clock.Now().UTC()
	return s.mutate(nameOrArn, true, func(p *pass, rec *record, nodes []Node) ([]Node, error) {
		if rec.Status != StatusInService {
			return nil, &ConflictError{Name: rec.Name, Message: fmt.Sprintf(
				"cluster %s is %s; it can be updated only when InService", rec.Name, rec.Status)}
		}
		if err := s.applyUpdate(rec, u, now); err != nil {
			return nil, err
		}
		rec.Status = StatusUpdating
		p.event(rec.Name, "", "Normal", "ClusterUpdating", "cluster update started")
		return nodes, nil
	})
}

// SetMetrics turns the observability add-on on or off: whether capstan's
// metric store keeps the cluster's series. It changes no node, so it works
// in any status but Deleting, an InService cluster stays InService.
func (s *Service) SetMetrics(_ context.Context, nameOrArn string, on bool) (Cluster, error) {
	return s.mutate(nameOrArn, false, func(p *pass, rec *record, nodes []Node) ([]Node, error) {
		if rec.Status == StatusDeleting {
			return nil, &ConflictError{Name: rec.Name, Message: fmt.Sprintf("cluster %s is Deleting", rec.Name)}
		}
		if rec.MetricsOff == !on {
			return nodes, nil
		}
		rec.MetricsOff = !on
		reason, msg := "ObservabilityEnabled", "capstan's metric store keeps the cluster's series"
		if !on {
			reason, msg = "ObservabilityDisabled", "capstan's metric store drops the cluster's series"
		}
		p.event(rec.Name, "", "Normal", reason, msg)
		return nodes, nil
	})
}

// MetricsOff lists the clusters whose observability add-on is off.
func (s *Service) MetricsOff(ctx context.Context) map[string]bool {
	cs, err := s.Clusters(ctx)
	if err != nil {
		return nil
	}
	out := map[string]bool{}
	for _, c := range cs {
		if c.MetricsOff {
			out[c.Name] = true
		}
	}
	return out
}

// DeleteCluster refuses while workloads run on the cluster; otherwise the
// cluster is Deleting: its nodes leave, then it and its holding go.
func (s *Service) DeleteCluster(ctx context.Context, nameOrArn string) (Cluster, error) {
	// Workloads are asked outside the transaction: they may read the store,
	// and a read transaction inside a write one can deadlock bbolt.
	c, _, err := s.Cluster(ctx, nameOrArn)
	if err != nil {
		return Cluster{}, err
	}
	if s.o.Workloads != nil {
		if ws := s.o.Workloads.InCluster(c.Name); len(ws) > 0 {
			return Cluster{}, &ConflictError{Name: c.Name, Message: fmt.Sprintf(
				"cluster %s still runs deployments: %s; delete them first", c.Name, strings.Join(ws, ", "))}
		}
	}
	return s.mutate(c.Name, true, func(p *pass, rec *record, nodes []Node) ([]Node, error) {
		if rec.Status != StatusInService && rec.Status != StatusFailed {
			return nil, &ConflictError{Name: rec.Name, Message: fmt.Sprintf(
				"cluster %s is %s; it can be deleted only when InService or Failed", rec.Name, rec.Status)}
		}
		rec.Status = StatusDeleting
		p.event(rec.Name, "", "Normal", "ClusterDeleting", "cluster deletion started")
		return nodes, nil
	})
}

// AddNodes raises a group's target by n (1..MaxNodesPerCall) and launches n
// Pending nodes, holding their capacity in the same transaction.
func (s *Service) AddNodes(_ context.Context, clusterName, group string, n int, reason string) ([]Node, error) {
	if n < 1 || n > MaxNodesPerCall {
		return nil, &FieldError{Field: "IncrementTargetCountBy", Message: fmt.Sprintf("%d must be in [1, %d]", n, MaxNodesPerCall)}
	}
	if reason == "" {
		reason = "batch add"
	}
	var added []Node
	_, err := s.mutate(clusterName, true, func(p *pass, rec *record, nodes []Node) ([]Node, error) {
		if rec.Status != StatusInService && rec.Status != StatusUpdating {
			return nil, &ConflictError{Name: rec.Name, Message: fmt.Sprintf("cluster %s is %s; nodes can be added only when InService or Updating", rec.Name, rec.Status)}
		}
		g := rec.group(group)
		if g == nil || g.Status == GroupDeleting {
			return nil, &NotFoundError{Kind: "instance group", Name: group}
		}
		if g.Target+n > MaxNodesPerGroup {
			return nil, &FieldError{Field: "IncrementTargetCountBy", Message: fmt.Sprintf(
				"instance group %s would have %d nodes; the limit is %d", group, g.Target+n, MaxNodesPerGroup)}
		}
		if !g.Plan.IsZero() {
			if info, ok := s.o.Plans.Plan(g.Plan); ok && g.Target+n > info.Total {
				return nil, &CapacityError{Group: g.Name, Err: &placement.LimitError{Plan: g.Plan, Name: info.Name,
					Requested: g.Target + n, Total: info.Total}}
			}
		}
		g.Target += n
		if err := s.hold(p.tx, rec, nodes); err != nil {
			return nil, err
		}
		for range n {
			x := p.launch(rec, g, reason, nodes)
			nodes = append(nodes, x)
			added = append(added, x)
		}
		return nodes, nil
	})
	if err != nil {
		return nil, err
	}
	return added, nil
}

// DeleteNodes retires the named nodes (ids or names): each leaves and its
// group's target drops by one. Unknown and already leaving nodes are
// reported in failed.
func (s *Service) DeleteNodes(_ context.Context, clusterName string, ids []string, reason string) (deleted []string, failed []NodeError, err error) {
	if len(ids) < 1 || len(ids) > MaxNodesPerCall {
		return nil, nil, &FieldError{Field: "NodeIds", Message: fmt.Sprintf("%d node ids; give 1 to %d", len(ids), MaxNodesPerCall)}
	}
	if reason == "" {
		reason = "batch delete"
	}
	_, err = s.mutate(clusterName, true, func(p *pass, rec *record, nodes []Node) ([]Node, error) {
		if rec.Status == StatusDeleting || rec.Status == StatusRollingBack {
			return nil, &ConflictError{Name: rec.Name, Message: fmt.Sprintf("cluster %s is %s", rec.Name, rec.Status)}
		}
		for _, raw := range ids {
			id := nodeID(raw)
			i := slices.IndexFunc(nodes, func(n Node) bool { return n.ID == id })
			if i < 0 {
				failed = append(failed, NodeError{ID: raw, Reason: NodeNotFound, Message: fmt.Sprintf("node %s is not in cluster %s", raw, rec.Name)})
				continue
			}
			if nodes[i].Status == NodeShuttingDown {
				failed = append(failed, NodeError{ID: raw, Reason: NodeNotDeletable, Message: fmt.Sprintf("node %s is already %s", raw, NodeShuttingDown)})
				continue
			}
			if g := rec.group(nodes[i].Group); g != nil {
				g.Target = max(g.Target-1, 0)
			}
			p.leave(&nodes[i], reason)
			deleted = append(deleted, id)
		}
		return nodes, nil
	})
	if err != nil {
		return nil, nil, err
	}
	return deleted, failed, nil
}

// FailNode injects a fault: the node fails its health check now and leaves
// the pool (its replicas are evicted). Node recovery, if Automatic,
// replaces it on the next reconcile.
func (s *Service) FailNode(_ context.Context, nodeNameOrID string) (Node, error) {
	id := nodeID(nodeNameOrID)
	var n Node
	var clusterName string
	if err := s.o.Store.View(func(tx *store.Tx) error {
		found, err := tx.Get(KindNode, id, &n)
		if err == nil && !found {
			err = &NotFoundError{Kind: "node", Name: nodeNameOrID}
		}
		clusterName = n.Cluster
		return err
	}); err != nil {
		return Node{}, err
	}
	_, err := s.mutate(clusterName, false, func(p *pass, rec *record, nodes []Node) ([]Node, error) {
		i := slices.IndexFunc(nodes, func(x Node) bool { return x.ID == id })
		if i < 0 {
			return nil, &NotFoundError{Kind: "node", Name: nodeNameOrID}
		}
		x := &nodes[i]
		if x.Status != NodeRunning && x.Status != NodePending {
			return nil, &ConflictError{Name: rec.Name, Message: fmt.Sprintf("node %s is %s", x.ID, x.Status)}
		}
		x.Status, x.Message = NodeFailure, "failed its health check"
		p.put(*x)
		p.remove(x.Name())
		p.event(rec.Name, x.ID, "Warning", "NodeFailed", fmt.Sprintf("node %s failed its health check", x.ID))
		n = *x
		return nodes, nil
	})
	if err != nil {
		return Node{}, err
	}
	return n, nil
}

// group returns the named group of rec.
func (rec *record) group(name string) *Group {
	for i := range rec.Groups {
		if rec.Groups[i].Name == name {
			return &rec.Groups[i]
		}
	}
	return nil
}
