package spaces

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/capstan-dev/capstan/internal/catalog"
	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/cluster"
	"github.com/capstan-dev/capstan/internal/manifest"
	"github.com/capstan-dev/capstan/internal/reconcile"
	"github.com/capstan-dev/capstan/internal/sandbox"
	"github.com/capstan-dev/capstan/internal/store"
	"github.com/capstan-dev/capstan/internal/workspace"
)

// Store buckets.
const (
	bucketSpaces    = "workspaces"
	bucketTemplates = "workspacetemplates"
)

// Limits on stored objects: each space is a process on this host.
const (
	MaxSpaces    = 100
	MaxTemplates = 100
	// MaxEvents is how many events a space keeps, newest last.
	MaxEvents = 50
)

// Errors the API maps to Kubernetes' reasons.
var (
	// ErrTooMany: past MaxSpaces or MaxTemplates (403 Forbidden, as an
	// exceeded quota).
	ErrTooMany = errors.New("too many objects")
	// ErrInUse: a template that workspaces still name cannot be deleted
	// (409 Conflict).
	ErrInUse = errors.New("in use")
)

// Offer is what nodes of one instance type of a cluster hold.
type Offer struct {
	InstanceType string
	GPUs         int
	MIGProfiles  []string // the profiles of its MIG layout; nil for whole GPUs
}

// Clusters tells what a cluster's instance groups offer; an unknown
// cluster is an error wrapping manifest.ErrNotFound.
type Clusters interface {
	Offers(ctx context.Context, cluster string) ([]Offer, error)
}

// Options configure a Service. Zero values get the defaults noted.
type Options struct {
	Store    *store.Store
	Pool     *cluster.Cluster
	Catalog  *catalog.Catalog
	Clusters Clusters
	Clock    clock.Clock  // default clock.Real
	Logger   *slog.Logger // default: discard
	// Dir holds each space's home directory and log (<Dir>/<ns>/<name>/).
	Dir string
	// URL is capstan's own address ("http://127.0.0.1:8080"), for
	// status.accessURL.
	URL string
	// Resync is how often every space is reconciled (default 10 s): a space
	// that failed to start is tried again then.
	Resync time.Duration
	// ActivityInterval is how often a running space's activity is read
	// (default 5 s).
	ActivityInterval time.Duration
	// StartTimeout bounds how long a space may take to answer (default 2 min).
	StartTimeout time.Duration
	// StopGrace is how long a stopped process gets before SIGKILL (default 5 s).
	StopGrace time.Duration
	// Sandbox confines each space to its home; nil runs spaces unconfined
	// (tests of other packages). A sandbox that is unavailable refuses to
	// start them unless the admin opted in.
	Sandbox    *sandbox.Sandbox
	Registerer prometheus.Registerer
}

// Service stores and runs spaces.
type Service struct {
	o     Options
	log   *slog.Logger
	queue *reconcile.Queue

	mu       sync.Mutex
	procs    map[string]*proc   // by key, while a process runs
	failedAt map[string]failure // by key: the last failure to start or run
	ctx      context.Context
	loops    sync.WaitGroup
	cost     *costMeter
	cgroups  *cgroupSet // one cgroup per running space, where available
}

// New returns a Service: it stores the default templates that are
// missing and kills what a previous run of capstan left running.
func New(o Options) (*Service, error) {
	if o.Store == nil || o.Pool == nil || o.Catalog == nil || o.Clusters == nil || o.Dir == "" {
		return nil, errors.New("spaces: Store, Pool, Catalog, Clusters and Dir are required")
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Resync <= 0 {
		o.Resync = 10 * time.Second
	}
	if o.ActivityInterval <= 0 {
		o.ActivityInterval = 5 * time.Second
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = 2 * time.Minute
	}
	if o.StopGrace <= 0 {
		o.StopGrace = 5 * time.Second
	}
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return nil, fmt.Errorf("spaces: %w", err)
	}
	o.Dir = dir
	s := &Service{o: o, log: o.Logger.With("component", "spaces"), procs: map[string]*proc{}, failedAt: map[string]failure{}}
	s.queue = reconcile.New(s.reconcile, func(k string, err error) { s.log.Error("reconcile space", "space", k, "err", err) })
	cg, err := openCgroups(o.Dir)
	if err != nil {
		s.log.Warn("spaces run without cgroups: a space process that starts a session of its own and clears its environment outlives the space", "err", err)
	}
	s.cgroups = cg
	if n := sweepOrphans(o.Dir) + cg.sweep(); n > 0 {
		s.log.Warn("killed processes a previous run left", "processes", n)
	}
	if err := s.seedTemplates(); err != nil {
		return nil, err
	}
	if err := s.resetStatuses(); err != nil {
		return nil, err
	}
	s.cost = newCostMeter(s)
	if o.Registerer != nil {
		if err := o.Registerer.Register(s.cost); err != nil {
			return nil, fmt.Errorf("spaces: %w", err)
		}
	}
	return s, nil
}

func (s *Service) seedTemplates() error {
	return s.o.Store.Update(func(tx *store.Tx) error {
		for _, t := range workspace.DefaultTemplates() {
			k := key(t.Metadata.Namespace, t.Metadata.Name)
			var stored workspace.WorkspaceTemplate
			found, err := tx.Get(bucketTemplates, k, &stored)
			if err != nil {
				return err
			}
			if found {
				// A default no one has changed (generation 1) follows
				// this version's: an older Code Editor template ran
				// code-server with --auth=none.
				was, _ := json.Marshal(stored.Spec)
				now, _ := json.Marshal(t.Spec)
				if stored.Metadata.Generation != 1 || bytes.Equal(was, now) {
					continue
				}
				stored.Spec = t.Spec
				s.log.Info("default template updated to this version's", "template", k)
				if err := tx.Put(bucketTemplates, k, &stored); err != nil {
					return err
				}
				continue
			}
			now := s.o.Clock.Now().UTC().Truncate(time.Second)
			t.Metadata.UID, t.Metadata.Generation, t.Metadata.CreationTimestamp, t.Metadata.ResourceVersion = uuid.NewString(), 1, &now, "1"
			if err := tx.Put(bucketTemplates, k, t); err != nil {
				return err
			}
		}
		return nil
	})
}

// resetStatuses marks the spaces that ran before this start as Pending:
// no process of theirs runs now (the sweep made sure), so a stored Running
// would be a lie until the controller starts them again.
func (s *Service) resetStatuses() error {
	now := s.o.Clock.Now().UTC()
	return s.o.Store.Update(func(tx *store.Tx) error {
		recs, err := store.List[record](tx, bucketSpaces)
		if err != nil {
			return err
		}
		for _, rec := range recs {
			st := &rec.Workspace.Status
			if st.Phase != workspace.PhaseRunning && st.Phase != workspace.PhaseStarting {
				continue
			}
			st.Phase, st.AccessURL = workspace.PhasePending, ""
			setCondition(st, workspace.ConditionAvailable, "False", "Restarted", "capstan restarted; the space starts again", now)
			m := rec.Workspace.Metadata
			if err := tx.Put(bucketSpaces, key(m.Namespace, m.Name), &rec); err != nil {
				return err
			}
		}
		return nil
	})
}

func key(ns, name string) string { return ns + "/" + name }

func splitKey(k string) (ns, name string) {
	ns, name, _ = strings.Cut(k, "/")
	return ns, name
}

func newToken() string {
	var b [24]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// failure is when a space last failed, and at which generation.
type failure struct {
	at  time.Time
	gen int64
}

// record is a stored space.
type record struct {
	Workspace workspace.Workspace `json:"workspace"`
	Deleting  bool                `json:"deleting,omitempty"`
	Events    []manifest.Event    `json:"events,omitempty"`
}

// BasePath is where the space ns/name is served.
func BasePath(ns, name string) string { return "/spaces/" + ns + "/" + name + "/" }

// ClusterOf is the cluster a space runs on.
func ClusterOf(w *workspace.Workspace) string {
	if c := manifest.ClusterOf(&w.Metadata); c != "" {
		return c
	}
	return cluster.DefaultName
}

// template finds the template a workspace names: its namespace, else the
// workspace's, else the system namespace.
func template(tx *store.Tx, w *workspace.Workspace, pending ...*workspace.WorkspaceTemplate) (*workspace.WorkspaceTemplate, error) {
	ref := w.Spec.TemplateRef
	if ref == nil {
		ref = &workspace.TemplateRef{Name: workspace.JupyterTemplate, Namespace: workspace.TemplateNamespace}
	}
	nss := []string{ref.Namespace}
	if ref.Namespace == "" {
		nss = []string{w.Metadata.Namespace, workspace.TemplateNamespace}
	}
	for _, ns := range nss {
		for _, t := range pending {
			if t.Metadata.Namespace == ns && t.Metadata.Name == ref.Name {
				return t, nil
			}
		}
		var t workspace.WorkspaceTemplate
		found, err := tx.Get(bucketTemplates, key(ns, ref.Name), &t)
		if err != nil {
			return nil, err
		}
		if found {
			return &t, nil
		}
	}
	return nil, manifest.ErrorList{{Path: "spec.templateRef.name", Message: fmt.Sprintf("WorkspaceTemplate %q not found in namespace %s", ref.Name, strings.Join(nss, " or "))}}
}

// clusterOffers is what a workspace's cluster offers, read before any store
// transaction opens: the cluster service reads the store itself, and a read
// transaction nested in another deadlocks bbolt when a commit between them
// must grow the file.
type clusterOffers struct {
	name   string
	offers []Offer
	err    error
}

func (s *Service) offersOf(ctx context.Context, w *workspace.Workspace) clusterOffers {
	name := ClusterOf(w)
	offers, err := s.o.Clusters.Offers(ctx, name)
	return clusterOffers{name: name, offers: offers, err: err}
}

// check resolves w against its template (templates in pending count as
// stored) and its cluster's offers: what Apply refuses before anything is
// stored.
func (s *Service) check(tx *store.Tx, w *workspace.Workspace, co clusterOffers, pending ...*workspace.WorkspaceTemplate) (workspace.Resolved, error) {
	t, err := template(tx, w, pending...)
	if err != nil {
		return workspace.Resolved{}, err
	}
	r, err := workspace.Resolve(w, t)
	if err != nil {
		return r, err
	}
	if errors.Is(co.err, manifest.ErrNotFound) {
		return r, manifest.ErrorList{{Path: "metadata.annotations[" + manifest.AnnotationCluster + "]", Message: fmt.Sprintf("cluster %q not found", co.name)}}
	}
	if co.err != nil {
		return r, co.err
	}
	return r, s.checkOffers(co.name, co.offers, r)
}

// checkOffers refuses a request no node of the cluster could ever hold.
func (s *Service) checkOffers(name string, offers []Offer, r workspace.Resolved) error {
	var errs manifest.ErrorList
	types := make([]string, 0, len(offers))
	for _, o := range offers {
		types = append(types, o.InstanceType)
	}
	if r.InstanceType != "" {
		i := slices.IndexFunc(offers, func(o Offer) bool { return o.InstanceType == r.InstanceType })
		if i < 0 {
			errs.Add("spec.nodeSelector["+workspace.LabelInstanceType+"]", "cluster %s has no instance group of type %s (it has: %s)", name, r.InstanceType, strings.Join(types, ", "))
			return errs.Err()
		}
		offers = offers[i : i+1]
	}
	req := r.Request
	switch {
	case req.MIGProfile != "":
		ok := slices.ContainsFunc(offers, func(o Offer) bool { return slices.Contains(o.MIGProfiles, req.MIGProfile) })
		if !ok {
			var have []string
			for _, o := range offers {
				for _, p := range o.MIGProfiles {
					if !slices.Contains(have, p) {
						have = append(have, p)
					}
				}
			}
			msg := fmt.Sprintf("cluster %s has no node with MIG slices of profile %s", name, req.MIGProfile)
			if len(have) > 0 {
				msg += " (its MIG profiles: " + strings.Join(have, ", ") + ")"
			} else {
				msg += " (no instance group has a MIG layout)"
			}
			errs.Add("spec.resources.requests["+manifest.ResourceMIGPrefix+req.MIGProfile+"]", "%s", msg)
		}
	case req.GPUs > 0:
		most := 0
		for _, o := range offers {
			if len(o.MIGProfiles) == 0 {
				most = max(most, o.GPUs)
			}
		}
		switch {
		case most == 0:
			errs.Add("spec.resources.requests["+manifest.ResourceGPU+"]", "cluster %s has no GPUs to give (its instance types: %s); remove the GPU request or run the space on a cluster with GPU nodes", name, strings.Join(types, ", "))
		case req.GPUs > most:
			errs.Add("spec.resources.requests["+manifest.ResourceGPU+"]", "%d GPUs is more than any node of cluster %s has (at most %d whole GPUs)", req.GPUs, name, most)
		}
	}
	if len(errs) > 0 {
		return errs
	}
	fits := false
	for _, o := range offers {
		it, err := s.o.Catalog.InstanceType(o.InstanceType)
		if err != nil {
			continue
		}
		c := cluster.CapacityOf(it)
		fits = fits || req.MilliCPU <= c.MilliCPU && req.MemoryBytes <= c.MemoryBytes
	}
	if !fits && len(offers) > 0 {
		errs.Add("spec.resources.requests", "%g CPUs and %gGi of memory is more than any node of cluster %s has", float64(req.MilliCPU)/1000, float64(req.MemoryBytes)/(1<<30), name)
	}
	return errs.Err()
}

// Check runs Apply's checks of a workspace against its template and
// cluster without storing anything (templates have none beyond Validate).
// Templates in pending (applied in the same request) count as stored.
func (s *Service) Check(ctx context.Context, obj workspace.Object, pending []*workspace.WorkspaceTemplate) error {
	w, ok := obj.(*workspace.Workspace)
	if !ok {
		return nil
	}
	co := s.offersOf(ctx, w)
	return s.o.Store.View(func(tx *store.Tx) error {
		_, err := s.check(tx, w, co, pending...)
		return err
	})
}

// Apply creates or updates a workspace or template. The object is already
// defaulted and valid on its own; Apply checks a workspace against its
// template and cluster, and refuses to grow past the limits.
func (s *Service) Apply(ctx context.Context, obj workspace.Object) (manifest.ApplyResult, error) {
	return s.ApplyWith(ctx, obj, manifest.Preconditions{})
}

// ApplyWith is Apply under pre, checked in the same transaction as the
// write: manifest.ErrAlreadyExists when pre.Create finds the object,
// manifest.ErrNotFound when pre.ResourceVersion is set and there is none,
// manifest.ErrConflict when it is not the stored object's.
func (s *Service) ApplyWith(ctx context.Context, obj workspace.Object, pre manifest.Preconditions) (manifest.ApplyResult, error) {
	m := obj.GetMeta()
	res := manifest.ApplyResult{Kind: obj.GetKind(), Namespace: m.Namespace, Name: m.Name}
	k := key(m.Namespace, m.Name)
	now := s.o.Clock.Now().UTC().Truncate(time.Second)
	var co clusterOffers
	if w, ok := obj.(*workspace.Workspace); ok {
		co = s.offersOf(ctx, w)
	}
	err := s.o.Store.Update(func(tx *store.Tx) error {
		switch o := obj.(type) {
		case *workspace.WorkspaceTemplate:
			return s.applyTemplate(tx, o, pre, k, now, &res)
		case *workspace.Workspace:
			return s.applySpace(tx, o, co, pre, k, now, &res)
		default:
			return fmt.Errorf("spaces: cannot apply %T", obj)
		}
	})
	if err != nil {
		return manifest.ApplyResult{}, err
	}
	if obj.GetKind() == workspace.KindWorkspace {
		s.queue.Enqueue(k)
	}
	return res, nil
}

func count(tx *store.Tx, bucket string) (int, error) {
	n := 0
	err := tx.Each(bucket, func(string, []byte) error { n++; return nil })
	return n, err
}

func (s *Service) applyTemplate(tx *store.Tx, t *workspace.WorkspaceTemplate, pre manifest.Preconditions, k string, now time.Time, res *manifest.ApplyResult) error {
	var prev workspace.WorkspaceTemplate
	found, err := tx.Get(bucketTemplates, k, &prev)
	if err != nil {
		return err
	}
	if err := checkPreconditions(pre, found, prev.Metadata.ResourceVersion, t.GetKind(), k); err != nil {
		return err
	}
	next := *t
	if !found {
		n, err := count(tx, bucketTemplates)
		if err != nil {
			return err
		}
		if n >= MaxTemplates {
			return fmt.Errorf("WorkspaceTemplate %s: the limit is %d templates: %w", k, MaxTemplates, ErrTooMany)
		}
		next.Metadata.UID, next.Metadata.Generation, next.Metadata.CreationTimestamp = uuid.NewString(), 1, &now
		next.Metadata.ResourceVersion = "1"
		res.Action, res.Generation = manifest.ActionCreated, 1
		return tx.Put(bucketTemplates, k, &next)
	}
	pm := prev.Metadata
	keepServerMeta(&pm, &next.Metadata)
	if reflect.DeepEqual(prev.Spec, next.Spec) && sameMeta(&pm, &next.Metadata) {
		res.Action, res.Generation = manifest.ActionUnchanged, pm.Generation
		return nil
	}
	if !reflect.DeepEqual(prev.Spec, next.Spec) {
		next.Metadata.Generation++
	}
	next.Metadata.ResourceVersion = bump(pm.ResourceVersion)
	res.Action, res.Generation = manifest.ActionConfigured, next.Metadata.Generation
	return tx.Put(bucketTemplates, k, &next)
}

// checkPreconditions checks a write's Kubernetes preconditions against
// what is stored under k (found, at version rv).
func checkPreconditions(pre manifest.Preconditions, found bool, rv, kind, k string) error {
	switch {
	case found && pre.Create:
		return fmt.Errorf("%s %s: %w", kind, k, manifest.ErrAlreadyExists)
	case !found && pre.ResourceVersion != "":
		return fmt.Errorf("%s %s: %w", kind, k, manifest.ErrNotFound)
	case found && pre.ResourceVersion != "" && rv != pre.ResourceVersion:
		return fmt.Errorf("%s %s: %w", kind, k, manifest.ErrConflict)
	}
	return nil
}

// keepServerMeta gives next the server-set metadata of prev, the stored
// object's: uid, creation time, generation, resourceVersion, and its
// managedFields when the write brings none (capstan apply records none).
func keepServerMeta(prev, next *manifest.ObjectMeta) {
	next.UID, next.CreationTimestamp, next.Generation = prev.UID, prev.CreationTimestamp, prev.Generation
	next.ResourceVersion = prev.ResourceVersion
	if next.ManagedFields == nil {
		next.ManagedFields = prev.ManagedFields
	}
}

func sameMeta(a, b *manifest.ObjectMeta) bool {
	eq := func(x, y map[string]string) bool { return len(x) == 0 && len(y) == 0 || reflect.DeepEqual(x, y) }
	return eq(a.Labels, b.Labels) && eq(a.Annotations, b.Annotations) &&
		(len(a.ManagedFields) == 0 && len(b.ManagedFields) == 0 || reflect.DeepEqual(a.ManagedFields, b.ManagedFields))
}

func bump(rv string) string {
	var n int64
	_, _ = fmt.Sscan(rv, &n)
	return fmt.Sprint(n + 1)
}

func (s *Service) applySpace(tx *store.Tx, w *workspace.Workspace, co clusterOffers, pre manifest.Preconditions, k string, now time.Time, res *manifest.ApplyResult) error {
	var rec record
	found, err := tx.Get(bucketSpaces, k, &rec)
	if err != nil {
		return err
	}
	if err := checkPreconditions(pre, found, rec.Workspace.Metadata.ResourceVersion, w.GetKind(), k); err != nil {
		return err
	}
	if found && rec.Deleting {
		return fmt.Errorf("Workspace %s is being deleted: %w", k, ErrInUse)
	}
	next := *w
	if next.Spec.TemplateRef != nil && next.Spec.TemplateRef.Namespace == "" {
		// Stored with the namespace it resolved to, so a template of the
		// same name created later elsewhere does not change it.
		if t, err := template(tx, &next); err == nil {
			ref := *next.Spec.TemplateRef
			ref.Namespace = t.Metadata.Namespace
			next.Spec.TemplateRef = &ref
		}
	}
	r, err := s.check(tx, &next, co)
	if err != nil {
		return err
	}
	res.Warnings = workspace.Ignored(&next, r)
	if !found {
		n, err := count(tx, bucketSpaces)
		if err != nil {
			return err
		}
		if n >= MaxSpaces {
			return fmt.Errorf("Workspace %s: the limit is %d spaces: %w", k, MaxSpaces, ErrTooMany)
		}
		next.Metadata.UID, next.Metadata.Generation, next.Metadata.CreationTimestamp = uuid.NewString(), 1, &now
		next.Metadata.ResourceVersion = "1"
		next.Status = workspace.WorkspaceStatus{Phase: workspace.PhasePending}
		rec = record{Workspace: next}
		rec.event(now, manifest.EventNormal, "Created", fmt.Sprintf("space created from template %s/%s", next.Spec.TemplateRef.Namespace, next.Spec.TemplateRef.Name))
		res.Action, res.Generation = manifest.ActionCreated, 1
		return tx.Put(bucketSpaces, k, &rec)
	}
	prev := rec.Workspace
	pm := prev.Metadata
	keepServerMeta(&pm, &next.Metadata)
	next.Status = prev.Status
	if reflect.DeepEqual(prev.Spec, next.Spec) && sameMeta(&pm, &next.Metadata) {
		res.Action, res.Generation = manifest.ActionUnchanged, pm.Generation
		return nil
	}
	if !reflect.DeepEqual(prev.Spec, next.Spec) {
		next.Metadata.Generation++
		if prev.Spec.DesiredStatus != next.Spec.DesiredStatus {
			rec.event(now, manifest.EventNormal, "DesiredStatus", fmt.Sprintf("desired status %s → %s", prev.Spec.DesiredStatus, next.Spec.DesiredStatus))
		} else {
			rec.event(now, manifest.EventNormal, "Updated", "spec changed; the space restarts with it")
		}
	}
	next.Metadata.ResourceVersion = bump(pm.ResourceVersion)
	rec.Workspace = next
	res.Action, res.Generation = manifest.ActionConfigured, next.Metadata.Generation
	return tx.Put(bucketSpaces, k, &rec)
}

func (r *record) event(t time.Time, typ, reason, msg string) {
	if n := len(r.Events); n > 0 {
		last := r.Events[n-1]
		if last.Reason == reason && last.Message == msg {
			return
		}
	}
	r.Events = append(r.Events, manifest.Event{Time: t, Type: typ, Reason: reason, Message: msg})
	if n := len(r.Events); n > MaxEvents {
		r.Events = r.Events[n-MaxEvents:]
	}
}

func notFound(kind, ns, name string) error {
	return fmt.Errorf("%s %s/%s: %w", kind, ns, name, manifest.ErrNotFound)
}

// Get returns one workspace or template.
func (s *Service) Get(_ context.Context, kind, ns, name string) (workspace.Object, error) {
	var out workspace.Object
	err := s.o.Store.View(func(tx *store.Tx) error {
		switch kind {
		case workspace.KindWorkspace:
			var rec record
			found, err := tx.Get(bucketSpaces, key(ns, name), &rec)
			if err != nil {
				return err
			}
			if !found {
				return notFound(kind, ns, name)
			}
			out = &rec.Workspace
		case workspace.KindWorkspaceTemplate:
			var t workspace.WorkspaceTemplate
			found, err := tx.Get(bucketTemplates, key(ns, name), &t)
			if err != nil {
				return err
			}
			if !found {
				return notFound(kind, ns, name)
			}
			out = &t
		default:
			return fmt.Errorf("spaces: unknown kind %q", kind)
		}
		return nil
	})
	return out, err
}

// List returns the workspaces or templates of ns ("" for all), sorted.
func (s *Service) List(_ context.Context, kind, ns string) ([]workspace.Object, error) {
	var out []workspace.Object
	err := s.o.Store.View(func(tx *store.Tx) error {
		switch kind {
		case workspace.KindWorkspace:
			recs, err := store.List[record](tx, bucketSpaces)
			if err != nil {
				return err
			}
			for i := range recs {
				if ns == "" || recs[i].Workspace.Metadata.Namespace == ns {
					out = append(out, &recs[i].Workspace)
				}
			}
		case workspace.KindWorkspaceTemplate:
			ts, err := store.List[workspace.WorkspaceTemplate](tx, bucketTemplates)
			if err != nil {
				return err
			}
			for i := range ts {
				if ns == "" || ts[i].Metadata.Namespace == ns {
					out = append(out, &ts[i])
				}
			}
		default:
			return fmt.Errorf("spaces: unknown kind %q", kind)
		}
		return nil
	})
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].GetMeta(), out[j].GetMeta()
		return a.Namespace < b.Namespace || a.Namespace == b.Namespace && a.Name < b.Name
	})
	return out, err
}

// Events returns a workspace's events, oldest first (templates have none).
func (s *Service) Events(_ context.Context, kind, ns, name string) ([]manifest.Event, error) {
	var out []manifest.Event
	err := s.o.Store.View(func(tx *store.Tx) error {
		if kind == workspace.KindWorkspaceTemplate {
			if !tx.Exists(bucketTemplates, key(ns, name)) {
				return notFound(kind, ns, name)
			}
			return nil
		}
		var rec record
		found, err := tx.Get(bucketSpaces, key(ns, name), &rec)
		if err != nil {
			return err
		}
		if !found {
			return notFound(kind, ns, name)
		}
		out = rec.Events
		return nil
	})
	return out, err
}

// Delete removes a template that no workspace names, or starts deleting a
// workspace: its process stops, its slice is freed, its files are removed,
// then the record goes.
func (s *Service) Delete(_ context.Context, kind, ns, name string) error {
	k := key(ns, name)
	err := s.o.Store.Update(func(tx *store.Tx) error {
		switch kind {
		case workspace.KindWorkspaceTemplate:
			if !tx.Exists(bucketTemplates, k) {
				return notFound(kind, ns, name)
			}
			recs, err := store.List[record](tx, bucketSpaces)
			if err != nil {
				return err
			}
			var users []string
			for _, r := range recs {
				if ref := r.Workspace.Spec.TemplateRef; ref != nil && ref.Name == name && ref.Namespace == ns {
					users = append(users, r.Workspace.Metadata.Namespace+"/"+r.Workspace.Metadata.Name)
				}
			}
			if len(users) > 0 {
				return fmt.Errorf("WorkspaceTemplate %s is used by workspaces %s; delete them first: %w", k, strings.Join(users, ", "), ErrInUse)
			}
			return tx.Delete(bucketTemplates, k)
		case workspace.KindWorkspace:
			var rec record
			found, err := tx.Get(bucketSpaces, k, &rec)
			if err != nil {
				return err
			}
			if !found {
				return notFound(kind, ns, name)
			}
			if rec.Deleting {
				return nil
			}
			rec.Deleting = true
			rec.event(s.o.Clock.Now().UTC(), manifest.EventNormal, "Deleting", "stopping the space and removing its files")
			return tx.Put(bucketSpaces, k, &rec)
		default:
			return fmt.Errorf("spaces: unknown kind %q", kind)
		}
	})
	if err == nil && kind == workspace.KindWorkspace {
		s.queue.Enqueue(k)
	}
	return err
}

// InCluster lists the spaces placed on, or waiting for, a cluster.
func (s *Service) InCluster(name string) ([]string, error) {
	var out []string
	err := s.o.Store.View(func(tx *store.Tx) error {
		recs, err := store.List[record](tx, bucketSpaces)
		if err != nil {
			return err
		}
		for _, r := range recs {
			if ClusterOf(&r.Workspace) == name {
				out = append(out, "Workspace "+r.Workspace.Metadata.Namespace+"/"+r.Workspace.Metadata.Name)
			}
		}
		return nil
	})
	return out, err
}
