package endpoint

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/capstan-dev/capstan/internal/catalog"
	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/engines"
	"github.com/capstan-dev/capstan/internal/fleet"
	"github.com/capstan-dev/capstan/internal/placement"
	"github.com/capstan-dev/capstan/internal/serving"
	"github.com/capstan-dev/capstan/internal/store"
)

// Service performs the control API's operations on stored resources. Each
// method is one store transaction.
type Service struct {
	store   *store.Store
	fleet   placement.Allocator
	catalog *catalog.Catalog
	clock   clock.Clock
	log     *slog.Logger
	res     placement.Plans
	alarms  Alarms
	// models fetches ModelDataUrl / ModelDataSource at CreateModel (nil:
	// not fetched; see SetModelSource).
	models       ModelSource
	modelTimeout time.Duration
	// modelCache removes fetched folders nothing uses (nil: never); see
	// modelcache.go for dataMu and dataEpoch.
	modelCache ModelDataCache
	dataMu     sync.Mutex
	dataEpoch  uint64
	// engines are the real engines installed here (see SetEngines).
	engines engines.Machine
}

// SetAlarms enables alarms in update policies, checked against a.
func (s *Service) SetAlarms(a Alarms) { s.alarms = a }

// SetReservations enables capacity-reservations-only variants, checked
// against r. Without it such variants are rejected.
func (s *Service) SetReservations(r placement.Plans) { s.res = r }

// NewService returns a Service.
func NewService(s *store.Store, f placement.Allocator, cat *catalog.Catalog, c clock.Clock, log *slog.Logger) *Service {
	if log == nil {
		log = slog.Default()
	}
	return &Service{store: s, fleet: f, catalog: cat, clock: c, log: log}
}

// ---- names ----

// holderOf returns the key of kind that name names under case folding: name
// itself when stored, else the first key (in key order) equal to it ignoring
// case, else "". SageMaker names are unique case-insensitively within an
// account and region, as their ARNs lower-case them, so a name that differs
// from a stored one only in case is taken. Records keep the key they were
// created under (so older data directories load as they are); when name is
// not stored as given, this scans the bucket's keys once, decoding no values.
func holderOf(tx *store.Tx, kind, name string) (string, error) {
	if tx.Exists(kind, name) {
		return name, nil
	}
	var key string
	err := tx.Each(kind, func(k string, _ []byte) error {
		if key == "" && strings.EqualFold(k, name) {
			key = k
		}
		return nil
	})
	return key, err
}

// checkNameFree fails with ErrAlreadyExists (naming res and name) when
// kind holds name, or a name equal to it ignoring case.
func checkNameFree(tx *store.Tx, kind, res, name string) error {
	key, err := holderOf(tx, kind, name)
	if err != nil {
		return err
	}
	if key != "" {
		return alreadyExists(res, name)
	}
	return nil
}

// ---- models ----

// CreateModel stores m (CreationTime is set here). With a model source set
// (SetModelSource), the model's artifacts are fetched first and a model whose
// artifacts cannot be used is refused, naming the field; nothing is stored.
func (s *Service) CreateModel(ctx context.Context, m Model) (Model, error) {
	m.CreationTime = s.clock.Now().UTC().Truncate(1e6)
	m.ModelDir, m.ResolvedModel = "", ""
	ch, err := s.chooseEngine(&m)
	if err != nil {
		return m, err
	}
	if ch.Note != "" {
		s.log.Warn("engine simulated", "model", m.Name, "note", ch.Note)
	}
	if s.models != nil {
		// A duplicate name is refused before any download.
		if err := s.store.View(func(tx *store.Tx) error {
			return checkNameFree(tx, KindModel, ResModel, m.Name)
		}); err != nil {
			return m, err
		}
		return m, s.fetchAndStoreModel(ctx, &m)
	}
	return m, s.storeModel(m)
}

// storeModel stores m unless its name is taken.
func (s *Service) storeModel(m Model) error {
	return s.store.Update(func(tx *store.Tx) error {
		if err := checkNameFree(tx, KindModel, ResModel, m.Name); err != nil {
			return err
		}
		return tx.Put(KindModel, m.Name, m)
	})
}

// GetModel returns the named model.
func (s *Service) GetModel(_ context.Context, name string) (Model, error) {
	var m Model
	err := s.store.View(func(tx *store.Tx) error {
		found, err := tx.Get(KindModel, name, &m)
		if err == nil && !found {
			return notFound(ResModel, name)
		}
		return err
	})
	return m, err
}

// DeleteModel removes the named model. Running endpoints keep their resolved
// model, as in SageMaker. With a ModelDataCache, the fetched folders that no
// stored model or endpoint uses any more are removed from the model cache
// (see removeUnusedModelData); that cleanup never fails the call.
func (s *Service) DeleteModel(ctx context.Context, name string) error {
	err := s.store.Update(func(tx *store.Tx) error {
		if !tx.Exists(KindModel, name) {
			return notFound(ResModel, name)
		}
		return tx.Delete(KindModel, name)
	})
	if err == nil {
		s.removeUnusedModelData(ctx)
	}
	return err
}

// ListModels returns every model in name order.
func (s *Service) ListModels(_ context.Context) ([]Model, error) {
	var out []Model
	err := s.store.View(func(tx *store.Tx) error {
		var err error
		out, err = store.List[Model](tx, KindModel)
		return err
	})
	return out, err
}

// ---- endpoint configs ----

// CreateEndpointConfig stores c after checking its models exist.
func (s *Service) CreateEndpointConfig(_ context.Context, c EndpointConfig) (EndpointConfig, error) {
	c.CreationTime = s.clock.Now().UTC().Truncate(1e6)
	if n := len(c.ProductionVariants); n < 1 || n > MaxVariants {
		return c, invalidf("An endpoint configuration has 1 to %d production variants, not %d.", MaxVariants, n)
	}
	seen := map[string]bool{}
	total := 0.0
	for _, v := range c.ProductionVariants {
		if err := checkCount(v.VariantName, v.InitialInstanceCount); err != nil {
			return c, err
		}
		if err := checkWeight(v.VariantName, v.Weight()); err != nil {
			return c, err
		}
		total += v.Weight()
		if seen[v.VariantName] {
			return c, invalidf("Variant name %q is used more than once. Variant names must be unique within an endpoint configuration.", v.VariantName)
		}
		seen[v.VariantName] = true
	}
	if math.IsInf(total, 0) {
		return c, invalidf("The variant weights of endpoint configuration %q add up to more than a float64 holds.", c.Name)
	}
	if err := checkServerlessVariants(c.ProductionVariants); err != nil {
		return c, err
	}
	if err := checkStrategyTag(c.Tags); err != nil {
		return c, err
	}
	err := s.store.Update(func(tx *store.Tx) error {
		if err := checkNameFree(tx, KindConfig, ResConfig, c.Name); err != nil {
			return err
		}
		for _, v := range c.ProductionVariants {
			if !tx.Exists(KindModel, v.ModelName) {
				return notFound(ResModel, v.ModelName)
			}
		}
		for _, v := range c.ProductionVariants {
			if err := checkReservation(tx, s.res, v, "", c.CreationTime); err != nil {
				return err
			}
		}
		return tx.Put(KindConfig, c.Name, c)
	})
	return c, err
}

// GetEndpointConfig returns the named config.
func (s *Service) GetEndpointConfig(_ context.Context, name string) (EndpointConfig, error) {
	var c EndpointConfig
	err := s.store.View(func(tx *store.Tx) error {
		found, err := tx.Get(KindConfig, name, &c)
		if err == nil && !found {
			return notFound(ResConfig, name)
		}
		return err
	})
	return c, err
}

// DeleteEndpointConfig removes the named config; endpoints using it keep
// running (SageMaker only warns against this).
func (s *Service) DeleteEndpointConfig(_ context.Context, name string) error {
	return s.store.Update(func(tx *store.Tx) error {
		if !tx.Exists(KindConfig, name) {
			return notFound(ResConfig, name)
		}
		return tx.Delete(KindConfig, name)
	})
}

// ListEndpointConfigs returns every config in name order.
func (s *Service) ListEndpointConfigs(_ context.Context) ([]EndpointConfig, error) {
	var out []EndpointConfig
	err := s.store.View(func(tx *store.Tx) error {
		var err error
		out, err = store.List[EndpointConfig](tx, KindConfig)
		return err
	})
	return out, err
}

// ---- endpoints ----

// CreateEndpoint records a Creating endpoint with its first deployment and
// takes its instances from the fleet, in one transaction.
func (s *Service) CreateEndpoint(_ context.Context, name, configName string, tags []Tag) (Endpoint, error) {
	now := s.clock.Now().UTC().Truncate(1e6)
	var ep Endpoint
	err := s.store.Update(func(tx *store.Tx) error {
		if err := checkNameFree(tx, KindEndpoint, ResEndpoint, name); err != nil {
			return err
		}
		dep, err := s.deployment(tx, configName, 1, now, name)
		if err != nil {
			return err
		}
		want, err := instanceCounts(dep)
		if err != nil {
			return err
		}
		if err := s.fleet.Set(tx, name, want); err != nil {
			return err
		}
		ep = Endpoint{Name: name, Status: StatusCreating, CreationTime: now, LastModifiedTime: now,
			Tags: tags, Generation: 1, Pending: dep, Version: 1}
		return tx.Put(KindEndpoint, name, ep)
	})
	return ep, err
}

// GetEndpoint returns the stored endpoint.
func (s *Service) GetEndpoint(_ context.Context, name string) (Endpoint, error) {
	var ep Endpoint
	err := s.store.View(func(tx *store.Tx) error {
		found, err := tx.Get(KindEndpoint, name, &ep)
		if err == nil && !found {
			return notFound(ResEndpoint, name)
		}
		return err
	})
	return ep, err
}

// ListEndpoints returns every endpoint in name order.
func (s *Service) ListEndpoints(_ context.Context) ([]Endpoint, error) {
	var out []Endpoint
	err := s.store.View(func(tx *store.Tx) error {
		var err error
		out, err = store.List[Endpoint](tx, KindEndpoint)
		return err
	})
	return out, err
}

// mutable loads an endpoint for an API change, rejecting states that allow
// none. Delete is allowed in every state (see DeleteEndpoint). A Failed
// endpoint also allows, when update is set, UpdateEndpoint: SageMaker's remedy
// for an expired reservation is "update endpoint configuration", so moving a
// Failed endpoint to a new config must work.
func mutable(tx *store.Tx, name string, deleting bool, update ...bool) (Endpoint, error) {
	var ep Endpoint
	found, err := tx.Get(KindEndpoint, name, &ep)
	if err != nil {
		return ep, err
	}
	if !found {
		return ep, notFound(ResEndpoint, name)
	}
	if ep.ManagedBy != "" {
		return ep, invalidf("Endpoint %q is managed by %s; change it with capstan apply or capstan delete.", name, ep.ManagedBy)
	}
	if deleting {
		return ep, nil
	}
	switch ep.Status {
	case StatusCreating, StatusUpdating, StatusDeleting:
		return ep, &Error{Kind: ErrInProgress, Resource: ResEndpoint, Name: name}
	case StatusFailed:
		if !(len(update) > 0 && update[0]) {
			return ep, &Error{Kind: ErrFailedState, Resource: ResEndpoint, Name: name}
		}
	}
	return ep, nil
}

func (s *Service) put(tx *store.Tx, ep *Endpoint) error {
	ep.Version++
	ep.LastModifiedTime = s.clock.Now().UTC().Truncate(1e6)
	return tx.Put(KindEndpoint, ep.Name, ep)
}

// UpdateOptions say how UpdateEndpoint moves to the new configuration.
type UpdateOptions struct {
	// Policy is the rollout policy; nil is blue/green all at once, or the
	// last update's policy with RetainPolicy.
	Policy       *serving.Policy
	RetainPolicy bool
}

// UpdateCapacityError says a blue/green update cannot hold its new side
// beside the serving one: Err is the fleet's or the plan's limit error,
// Serving how many instances the serving side holds, Needed how many the
// new side needs. A rolling policy replaces instances in place instead.
type UpdateCapacityError struct {
	Endpoint        string
	Serving, Needed int
	Err             error
}

func (e *UpdateCapacityError) Error() string {
	return fmt.Sprintf("endpoint %s: a blue/green update needs %d instances beside the %d serving: %v", e.Endpoint, e.Needed, e.Serving, e.Err)
}

func (e *UpdateCapacityError) Unwrap() error { return e.Err }

// UpdateEndpoint starts an update to configName. Blue/green (the default)
// holds instances for both sides until the old one retires; a rolling
// policy holds, per variant, the larger side plus one batch when the fleet
// or plan has it (else it replaces instances in place).
func (s *Service) UpdateEndpoint(_ context.Context, name, configName string, o UpdateOptions) (Endpoint, error) {
	now := s.clock.Now().UTC().Truncate(1e6)
	policy := serving.Policy{}
	if o.Policy != nil {
		policy = *o.Policy
		if err := policy.Validate(); err != nil {
			return Endpoint{}, &Error{Kind: ErrInvalid, Message: err.Error(), Err: err}
		}
	}
	if len(policy.Alarms) > 0 {
		if s.alarms == nil {
			return Endpoint{}, invalidf("alarms are not configured on this server")
		}
		if err := s.alarms.Known(policy.Alarms); err != nil {
			return Endpoint{}, &Error{Kind: ErrInvalid, Message: err.Error(), Err: err}
		}
	}
	var ep Endpoint
	err := s.store.Update(func(tx *store.Tx) error {
		var err error
		if ep, err = mutable(tx, name, false, true); err != nil {
			return err
		}
		if o.Policy == nil && o.RetainPolicy && ep.LastPolicy != nil {
			policy = *ep.LastPolicy
		}
		dep, err := s.deployment(tx, configName, ep.Generation+1, now, name)
		if err != nil {
			return err
		}
		if policy.Rolling != nil && ep.Current != nil && ep.Status != StatusFailed {
			if err := s.holdRolling(tx, &ep, dep, policy.Rolling.Batch); err != nil {
				return err
			}
		} else {
			want, err := instanceCounts(ep.Current, dep)
			if err != nil {
				return err
			}
			if err := s.fleet.Set(tx, name, want); err != nil {
				var ple *placement.LimitError
				if errors.As(err, &ple) && ep.Status != StatusFailed && sameButCounts(ep.Current, dep) {
					// The same variants on the same plan with other counts or
					// weights: the plan cannot hold old and new side by side, so
					// scale in place as UpdateEndpointWeightsAndCapacities does (the
					// documented way to "raise the count during the active window").
					return s.scaleInPlace(tx, &ep, dep, configName, now)
				}
				if ep.Current != nil && ep.Status != StatusFailed && isLimit(err) {
					cur, _ := instanceCounts(ep.Current)
					need, _ := instanceCounts(dep)
					return &UpdateCapacityError{Endpoint: name, Serving: sum(cur), Needed: sum(need), Err: err}
				}
				return err
			}
		}
		ep.Generation++
		ep.Pending = dep
		ep.Status = StatusUpdating
		ep.FailureReason = ""
		ep.Rollout = &Rollout{Policy: policy, Start: now}
		return s.put(tx, &ep)
	})
	return ep, err
}

func isLimit(err error) bool {
	var ple *placement.LimitError
	return errors.As(err, &ple) || fleet.IsLimit(err)
}

func sum(m placement.Want) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// holdRolling sets, for each new variant that replaces a serving one, the
// instances the pair may use together (Hold): the larger side, plus a
// batch when the fleet or plan has room for it, and takes them.
func (s *Service) holdRolling(tx *store.Tx, ep *Endpoint, dep *Deployment, batch serving.Size) error {
	set := func(surge bool) error {
		for i := range dep.Variants {
			v := &dep.Variants[i]
			o := variantOf(ep.Current, v.Name)
			if o == nil || o.Reservation != v.Reservation || (o.Reservation.IsZero() && o.InstanceType != v.InstanceType) {
				v.Hold = 0 // a new variant, or one that moves: it needs its own instances
				continue
			}
			v.Hold = max(len(o.Replicas), o.DesiredCount, v.DesiredCount)
			if surge {
				v.Hold += batch.Of(v.DesiredCount)
			}
		}
		want, err := instanceCounts(ep.Current, dep)
		if err != nil {
			return err
		}
		return s.fleet.Set(tx, ep.Name, want)
	}
	if err := set(true); err == nil || !isLimit(err) {
		return err
	}
	return set(false)
}

// scaleInPlace applies dep's counts and weights to the serving deployment.
func (s *Service) scaleInPlace(tx *store.Tx, ep *Endpoint, dep *Deployment, configName string, now time.Time) error {
	for i := range ep.Current.Variants {
		v, n := &ep.Current.Variants[i], dep.Variants[i]
		v.DesiredCount, v.DesiredWeight, v.ChangeStart = n.DesiredCount, n.DesiredWeight, now
	}
	want, err := instanceCounts(ep.Current)
	if err != nil {
		return err
	}
	if err := s.fleet.Set(tx, ep.Name, want); err != nil {
		return err
	}
	ep.Current.ConfigName = configName
	ep.Status = StatusUpdating
	ep.FailureReason = ""
	return s.put(tx, ep)
}

// sameButCounts reports whether dep differs from cur only in instance
// counts and weights, with every variant on a training plan.
func sameButCounts(cur, dep *Deployment) bool {
	if cur == nil || len(cur.Variants) != len(dep.Variants) {
		return false
	}
	for i, a := range cur.Variants {
		b := dep.Variants[i]
		if a.Reservation.IsZero() || a.Name != b.Name || a.ModelName != b.ModelName || a.Model != b.Model ||
			a.InstanceType != b.InstanceType || a.Reservation != b.Reservation || a.RoutingStrategy != b.RoutingStrategy {
			return false
		}
	}
	return true
}

// UpdateWeightsAndCapacities changes variant weights and instance counts in place.
// A variant named twice is refused, as in an endpoint configuration.
func (s *Service) UpdateWeightsAndCapacities(_ context.Context, name string, desired []Desired) (Endpoint, error) {
	now := s.clock.Now().UTC().Truncate(1e6)
	seen := make(map[string]bool, len(desired))
	for _, d := range desired {
		if seen[d.VariantName] {
			return Endpoint{}, invalidf("Variant name %q is used more than once. Variant names must be unique within DesiredWeightsAndCapacities.", d.VariantName)
		}
		seen[d.VariantName] = true
	}
	var ep Endpoint
	err := s.store.Update(func(tx *store.Tx) error {
		var err error
		if ep, err = mutable(tx, name, false); err != nil {
			return err
		}
		if ep.Current == nil {
			return invalidf("Endpoint %q has no deployed variants.", name)
		}
		var missing []string
		for _, d := range desired {
			found := false
			for i := range ep.Current.Variants {
				v := &ep.Current.Variants[i]
				if v.Name != d.VariantName {
					continue
				}
				found = true
				if d.Weight != nil {
					if err := checkWeight(v.Name, *d.Weight); err != nil {
						return err
					}
					v.DesiredWeight = *d.Weight
				}
				if d.InstanceCount != nil {
					if v.Serverless != nil {
						return invalidf("Variant %q is serverless: change its capacity with ServerlessUpdateConfig, not DesiredInstanceCount.", v.Name)
					}
					if err := checkCount(v.Name, *d.InstanceCount); err != nil {
						return err
					}
					v.DesiredCount = *d.InstanceCount
				}
				if u := d.Serverless; u != nil {
					if u.MaxConcurrency == nil && u.ProvisionedConcurrency == nil {
						return invalidf("ServerlessUpdateConfig of variant %q names neither MaxConcurrency nor ProvisionedConcurrency.", v.Name)
					}
					if v.Serverless == nil {
						return invalidf("Variant %q is not serverless: ServerlessUpdateConfig applies only to variants with a ServerlessConfig.", v.Name)
					}
					next := v.Serverless.clone()
					if v.DesiredServerless != nil {
						next = v.DesiredServerless.clone()
					}
					if u.MaxConcurrency != nil {
						next.MaxConcurrency = *u.MaxConcurrency
					}
					if u.ProvisionedConcurrency != nil {
						next.ProvisionedConcurrency = u.ProvisionedConcurrency
					}
					if err := next.check(v.Name); err != nil {
						return err
					}
					v.DesiredServerless = next
				}
				v.ChangeStart = now
			}
			if !found {
				missing = append(missing, d.VariantName)
			}
		}
		if len(missing) > 0 {
			return invalidf("The variant(s) \"[%s]\" is/are not present in the endpoint %q.", strings.Join(missing, ", "), name)
		}
		total := 0.0
		for _, v := range ep.Current.Variants {
			total += v.DesiredWeight
		}
		if !(total > 0) || math.IsInf(total, 0) {
			return invalidf("The sum of the desired weights of the variants of endpoint %q must be greater than 0 and finite.", name)
		}
		want, err := instanceCounts(ep.Current)
		if err != nil {
			return err
		}
		if err := s.fleet.Set(tx, name, want); err != nil {
			return err
		}
		ep.Status = StatusUpdating
		ep.FailureReason = ""
		return s.put(tx, &ep)
	})
	return ep, err
}

// DeleteEndpoint marks the endpoint Deleting; the controller stops its
// replicas, releases its instances and removes the record. Unlike SageMaker,
// which refuses it while an endpoint is Creating or Updating (leaving a stuck
// create undeletable for up to an hour), it is accepted in every state, so
// any endpoint can always be deleted; the controller abandons whatever
// rollout was under way. Deleting one already Deleting changes nothing.
func (s *Service) DeleteEndpoint(_ context.Context, name string) error {
	return s.store.Update(func(tx *store.Tx) error {
		ep, err := mutable(tx, name, true)
		if err != nil || ep.Status == StatusDeleting {
			return err
		}
		ep.Status = StatusDeleting
		return s.put(tx, &ep)
	})
}

// deployment builds generation gen of configName for endpoint owner,
// resolving models and checking reserved-only variants against their plans.
func (s *Service) deployment(tx *store.Tx, configName string, gen int, now time.Time, owner string) (*Deployment, error) {
	var cfg EndpointConfig
	found, err := tx.Get(KindConfig, configName, &cfg)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, notFound(ResConfig, configName)
	}
	dep := &Deployment{ConfigName: configName, Generation: gen, StartTime: now}
	tagged := taggedStrategy(cfg.Tags) // StrategyTag: every variant, over its RoutingConfig
	for _, v := range cfg.ProductionVariants {
		var m Model
		found, err := tx.Get(KindModel, v.ModelName, &m)
		if err != nil {
			return nil, err
		}
		if !found {
			return nil, notFound(ResModel, v.ModelName)
		}
		vs := VariantState{Name: v.VariantName, ModelName: v.ModelName, InstanceType: v.InstanceType,
			Weight: v.Weight(), DesiredWeight: v.Weight(), DesiredCount: v.InitialInstanceCount, Engine: m.Engine}
		if v.RoutingConfig != nil {
			vs.RoutingStrategy = v.RoutingConfig.RoutingStrategy
		}
		if tagged != "" {
			vs.RoutingStrategy = tagged
		}
		if err := checkReservation(tx, s.res, v, owner, now); err != nil {
			return nil, err
		}
		if crc := v.CapacityReservationConfig; crc != nil && crc.MlReservationArn != "" {
			vs.Reservation, _ = PlanRefFromArn(crc.MlReservationArn)
			vs.ReservationArn = crc.MlReservationArn
		}
		itName := v.InstanceType
		if sc := v.ServerlessConfig; sc != nil {
			// Serverless: no fleet instance; the stand-in type's GPU runs the replicas.
			itName = catalog.ServerlessInstanceType
			vs.Serverless, vs.DesiredServerless = sc.clone(), sc.clone()
			vs.DesiredCount = sc.provisioned()
		}
		it, itErr := s.catalog.InstanceType(itName)
		if itErr != nil {
			vs.ModelError = fmt.Sprintf("instance type %s is not in the catalog", itName)
		} else {
			vs.GPU, vs.GPUCount = it.Device(), it.GPUCount
		}
		switch {
		case m.ModelDir != "":
			// The model's own folder: the engine reads its config.json. The
			// name seeds the KV block hashes, so engine and gateway must
			// agree on it: the catalog id when the folder is a catalog
			// model, else the SageMaker model's name.
			vs.ModelDir, vs.Model = m.ModelDir, m.ResolvedModel
			if vs.Model == "" {
				vs.Model = m.Name
				if cm, err := s.catalog.Model(m.Name); err == nil {
					vs.Model = cm.ID
				}
			}
		case m.ResolvedModel != "":
			vs.Model = m.ResolvedModel
		default:
			if id, err := ResolveModel(s.catalog, m); err != nil {
				vs.ModelError = err.Error()
			} else {
				vs.Model = id
			}
		}
		if vs.ModelError == "" && itErr == nil {
			// The model's own folder counts by the size of its weight
			// files; a catalog model (or a folder of a config alone) by
			// the catalog's figures, on a CPU type.
			msg, checked := "", false
			if m.ModelDir != "" {
				msg, checked = folderFit(s.catalog, m.Name, m.ModelDir, m.Engine, it)
			}
			if !checked && it.IsCPU() {
				msg = cpuFit(s.catalog, vs.Model, it)
			}
			vs.ModelError = msg
		}
		dep.Variants = append(dep.Variants, vs)
	}
	return dep, nil
}

// ResolveModel decides which catalog model a SageMaker model runs. The rule,
// first match wins, using the primary container (or the first of Containers):
//  1. Environment["HF_MODEL_ID"] (Hugging Face name, e.g. meta-llama/Llama-3.1-8B-Instruct)
//  2. Environment["SM_MODEL_ID"] (a catalog id or alias, e.g. llama-3.1-8b, or a
//     JumpStart id, e.g. meta-textgeneration-llama-3-1-8b-instruct)
//  3. ModelDataUrl: the object key without a trailing ".tar.gz" or "/", then its
//     last path segment (s3://bucket/models/llama-3.1-8b.tar.gz → llama-3.1-8b).
//
// Each candidate is looked up by catalog id or alias. A named model that is not
// in the catalog is an error naming the field it came from. An environment
// value that is a local path (HF_MODEL_ID=/opt/ml/model) names no model and
// is skipped. With a model source set, CreateModel fetches ModelDataUrl
// instead (Model.ModelDir) and rule 3 is not used.
func ResolveModel(cat *catalog.Catalog, m Model) (string, error) {
	c := m.PrimaryContainer
	if c == nil && len(m.Containers) > 0 {
		c = &m.Containers[0]
	}
	if c == nil {
		return "", fmt.Errorf("model %s has no container: set PrimaryContainer.Environment.HF_MODEL_ID to a catalog model", m.Name)
	}
	for _, key := range []string{"HF_MODEL_ID", "SM_MODEL_ID"} {
		if id := strings.TrimSpace(c.Environment[key]); id != "" && !strings.HasPrefix(id, "/") {
			cm, err := cat.Model(id)
			if err != nil && key == "SM_MODEL_ID" {
				cm, err = cat.JumpStartModel(id)
			}
			if err != nil {
				return "", fmt.Errorf("model %q (PrimaryContainer.Environment.%s of model %s) is not in the model catalog; known models: %s",
					id, key, m.Name, strings.Join(cat.ModelIDs(), ", "))
			}
			return cm.ID, nil
		}
	}
	if c.ModelDataUrl != "" {
		u, err := url.Parse(c.ModelDataUrl)
		if err == nil {
			key := strings.TrimSuffix(strings.TrimSuffix(strings.Trim(u.Path, "/"), ".tar.gz"), "/")
			cands := []string{key}
			if i := strings.LastIndex(key, "/"); i >= 0 {
				cands = append(cands, key[i+1:])
			}
			for _, cand := range cands {
				if cm, err := cat.Model(cand); err == nil && cand != "" {
					return cm.ID, nil
				}
			}
		}
		return "", fmt.Errorf("ModelDataUrl %q of model %s names no model in the catalog; set PrimaryContainer.Environment.HF_MODEL_ID (known models: %s)",
			c.ModelDataUrl, m.Name, strings.Join(cat.ModelIDs(), ", "))
	}
	return "", fmt.Errorf("model %s names no model: set PrimaryContainer.Environment.HF_MODEL_ID or SM_MODEL_ID to a catalog model (known models: %s)",
		m.Name, strings.Join(cat.ModelIDs(), ", "))
}

// folderFit says why the model name, whose folder dir engine loads, cannot
// run on instance type it ("" when it fits); checked is false when dir
// holds no weight files capstan recognises.
func folderFit(cat *catalog.Catalog, name, dir, engine string, it catalog.InstanceType) (msg string, checked bool) {
	n, err := engines.WeightBytes(dir, engines.MustByName(engine).Format)
	if err != nil || n == 0 {
		return "", false
	}
	if err := cat.WeightFilesFit(n, it); err != nil {
		return fmt.Sprintf("Model %s does not fit: %v. Use an instance type with more memory.", name, err), true
	}
	return "", true
}

// cpuFit says why model id cannot run on CPU instance type it ("" when its
// weights fit the instance's memory). A GPU type is left to the engine,
// which reports the arithmetic when it starts.
func cpuFit(cat *catalog.Catalog, id string, it catalog.InstanceType) string {
	m, err := cat.Model(id)
	if err != nil {
		return ""
	}
	mem, err := cat.DeviceMemoryBytes(it)
	// The engine keeps its default 10 % of memory free (gpu-memory-utilization
	// 0.9) and needs room for some KV cache beyond the weights.
	usable := float64(mem) * catalog.CPUMemoryUtilization
	if err != nil || float64(m.WeightBytes()) < usable {
		return ""
	}
	return fmt.Sprintf("Model %s needs %.1f GB of memory for its weights; CPU instance type %s has %d GiB of memory (%.1f GB usable by the model server). Use an instance type with more memory.",
		m.ID, float64(m.WeightBytes())/1e9, it.Name, it.MemoryGiB, usable/1e9)
}
