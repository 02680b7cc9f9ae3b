package capacity

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/capstan-dev/capstan/internal/catalog"
	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/fleet"
	"github.com/capstan-dev/capstan/internal/placement"
	"github.com/capstan-dev/capstan/internal/store"
)

// Store buckets. Holdings share the "allocations" bucket with internal/fleet's
// old format (a Holding without Plans reads as a fleet.Allocation), so data
// dirs written before reservations existed open unchanged.
const (
	KindPlans      = "trainingplans"
	KindHoldings   = fleet.Kind
	KindAccounting = "accounting"
)

// Plan statuses (SageMaker's TrainingPlanStatus values capstan produces).
const (
	StatusScheduled = "Scheduled"
	StatusActive    = "Active"
	StatusExpired   = "Expired"
)

// Reserved is one zone's part of a plan or offering.
type Reserved struct {
	Zone  string `json:"zone"`
	Count int    `json:"count"`
}

// Plan is a purchased training plan: Count instances of InstanceType per zone
// for [Start, End). Plans are never modified after purchase.
type Plan struct {
	Key             string     `json:"key"` // lower-case name; ARNs lower-case it too
	Name            string     `json:"name"`
	OfferingID      string     `json:"offeringId"`
	InstanceType    string     `json:"instanceType"`
	Capacities      []Reserved `json:"capacities"`
	Start           time.Time  `json:"start"`
	End             time.Time  `json:"end"`
	DurationHours   int        `json:"durationHours"`
	UpfrontFee      string     `json:"upfrontFee"`
	CurrencyCode    string     `json:"currencyCode"`
	TargetResources []string   `json:"targetResources"`
	CreationTime    time.Time  `json:"creationTime"`
	Tags            []Tag      `json:"tags,omitempty"`
}

// Tag is a key/value label of a plan, kept only to be echoed back. Its JSON
// names are the stored format of plans.
type Tag struct {
	Key   string `json:"Key"`
	Value string `json:"Value"`
}

// Total is the plan's instance count over all zones.
func (p Plan) Total() int {
	n := 0
	for _, r := range p.Capacities {
		n += r.Count
	}
	return n
}

// Status follows the clock: Scheduled before Start, Active until End, then
// Expired.
func (p Plan) Status(now time.Time) string {
	switch {
	case now.Before(p.Start):
		return StatusScheduled
	case now.Before(p.End):
		return StatusActive
	default:
		return StatusExpired
	}
}

// Holding is what one owner (endpoint) holds: on-demand instances (type →
// zone → count, held from Since on with no end) and instances of plans
// (plan key → count).
type Holding struct {
	Owner     string                    `json:"owner"`
	Instances map[string]map[string]int `json:"instances"`
	Plans     map[string]int            `json:"plans,omitempty"`
	Since     time.Time                 `json:"since,omitempty"`
}

// Usage is the accounting record of an endpoint or a plan: instance-hours per
// instance type (on-demand) or plan key (reserved), and the on-demand cost.
// Reserved instance-hours cost nothing beyond the plan's upfront fee.
type Usage struct {
	InstanceHours map[string]float64 `json:"instanceHours"`
	CostUSD       float64            `json:"costUSD"`
}

// planAccount is the accounting key of a plan.
func planAccount(key string) string { return "plan/" + key }

// booking is one plan's instances in one zone, as unix nanoseconds.
type booking struct {
	start, end int64
	count      int
}

// Calendar is the fleet calendar. It is safe for concurrent use.
type Calendar struct {
	store    *store.Store
	cat      *catalog.Catalog
	clock    clock.Clock
	capacity fleet.Capacity

	// mu guards plans and book, an in-memory index of the plans bucket.
	// Plans are only written by CreatePlan, which holds buy and updates the
	// index inside its store transaction, so an Allocator Set (another
	// transaction, which bbolt runs strictly before or after) always sees the
	// index matching the committed plans.
	mu    sync.RWMutex
	plans map[string]Plan
	book  map[string]map[string][]booking // type → zone → bookings by start
	buy   sync.Mutex

	// profMu guards prof, the reservation profile of each type and zone,
	// built lazily from book and dropped when a plan is added there.
	profMu sync.Mutex
	prof   map[string][]segment

	offMu  sync.Mutex
	offers map[string]Offering
	offerQ []string // offering ids in issue order
	seq    uint64
}

var (
	_ placement.Allocator  = (*Calendar)(nil)
	_ placement.Plans      = (*Calendar)(nil)
	_ placement.NodeSource = (*Calendar)(nil)
)

// New returns the calendar of a fleet with capacity c, loading plans from st.
func New(st *store.Store, cat *catalog.Catalog, clk clock.Clock, c fleet.Capacity) (*Calendar, error) {
	cp := fleet.Capacity{}
	for t, zs := range c {
		cp[t] = map[string]int{}
		for z, n := range zs {
			cp[t][z] = n
		}
	}
	cal := &Calendar{store: st, cat: cat, clock: clk, capacity: cp, plans: map[string]Plan{},
		book: map[string]map[string][]booking{}, offers: map[string]Offering{}, prof: map[string][]segment{}}
	err := st.View(func(tx *store.Tx) error {
		plans, err := store.List[Plan](tx, KindPlans)
		for _, p := range plans {
			cal.index(p)
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("capacity: load plans: %w", err)
	}
	return cal, nil
}

// index adds p to the in-memory index; the caller holds mu or owns cal.
func (c *Calendar) index(p Plan) {
	c.plans[p.Key] = p
	if c.book[p.InstanceType] == nil {
		c.book[p.InstanceType] = map[string][]booking{}
	}
	for _, r := range p.Capacities {
		bs := c.book[p.InstanceType][r.Zone]
		b := booking{p.Start.UnixNano(), p.End.UnixNano(), r.Count}
		i := sort.Search(len(bs), func(i int) bool { return bs[i].start > b.start })
		bs = append(bs, booking{})
		copy(bs[i+1:], bs[i:])
		bs[i] = b
		c.book[p.InstanceType][r.Zone] = bs
		c.profMu.Lock()
		if segs, ok := c.prof[p.InstanceType+"|"+r.Zone]; ok {
			c.prof[p.InstanceType+"|"+r.Zone] = withBooking(segs, b)
		}
		c.profMu.Unlock()
	}
}

// withBooking returns a new profile: segs plus b. Profiles are shared
// read-only with searches, so it never modifies segs.
func withBooking(segs []segment, b booking) []segment {
	out := make([]segment, 0, len(segs)+2)
	at := func(t int64) int { // usage just before the first boundary ≥ t
		i := sort.Search(len(segs), func(i int) bool { return segs[i].start > t }) - 1
		if i < 0 {
			return 0
		}
		return segs[i].usage
	}
	startU, endU := at(b.start), at(b.end)
	push := func(sg segment) {
		if n := len(out); n > 0 && out[n-1].usage == sg.usage {
			return
		}
		if n := len(out); n == 0 && sg.usage == 0 {
			return
		}
		out = append(out, sg)
	}
	i := 0
	for ; i < len(segs) && segs[i].start < b.start; i++ {
		push(segs[i])
	}
	push(segment{b.start, startU + b.count})
	for ; i < len(segs) && segs[i].start < b.end; i++ {
		if segs[i].start > b.start {
			push(segment{segs[i].start, segs[i].usage + b.count})
		}
	}
	push(segment{b.end, endU})
	for ; i < len(segs); i++ {
		if segs[i].start > b.end {
			push(segs[i])
		}
	}
	return out
}

func (c *Calendar) dropProfile(typ, zone string) {
	c.profMu.Lock()
	delete(c.prof, typ+"|"+zone)
	c.profMu.Unlock()
}

// profileOf returns the (shared, read-only) profile of every booking of typ
// in zone; the caller holds mu (read or write).
func (c *Calendar) profileOf(typ, zone string) []segment {
	k := typ + "|" + zone
	c.profMu.Lock()
	defer c.profMu.Unlock()
	segs, ok := c.prof[k]
	if !ok {
		segs = profile(c.book[typ][zone], -1<<63)
		c.prof[k] = segs
	}
	return segs
}

// unindex removes p (a purchase whose commit failed).
func (c *Calendar) unindex(p Plan) {
	delete(c.plans, p.Key)
	for _, r := range p.Capacities {
		bs := c.book[p.InstanceType][r.Zone]
		for i, b := range bs {
			if b.start == p.Start.UnixNano() && b.end == p.End.UnixNano() && b.count == r.Count {
				c.book[p.InstanceType][r.Zone] = append(bs[:i], bs[i+1:]...)
				c.dropProfile(p.InstanceType, r.Zone)
				break
			}
		}
	}
}

// Zones returns the zones that have instances of typ, in name order.
func (c *Calendar) Zones(typ string) []string {
	zs := make([]string, 0, len(c.capacity[typ]))
	for z, n := range c.capacity[typ] {
		if n > 0 {
			zs = append(zs, z)
		}
	}
	sort.Strings(zs)
	return zs
}

// segment is a piece of a zone's reservation profile: from start until the
// next segment's start, usage instances are booked by plans.
type segment struct {
	start int64
	usage int
}

// profile returns the step function of plan bookings in bs that end after
// from. Before the first segment usage is 0; the last segment has usage 0.
func profile(bs []booking, from int64) []segment {
	type ev struct {
		t int64
		d int
	}
	evs := make([]ev, 0, 2*len(bs))
	for _, b := range bs {
		if b.end <= from {
			continue
		}
		evs = append(evs, ev{b.start, b.count}, ev{b.end, -b.count})
	}
	slices.SortFunc(evs, func(a, b ev) int { return cmp.Compare(a.t, b.t) })
	segs := make([]segment, 0, len(evs))
	u := 0
	for i := 0; i < len(evs); {
		t := evs[i].t
		for i < len(evs) && evs[i].t == t {
			u += evs[i].d
			i++
		}
		if n := len(segs); n > 0 && segs[n-1].usage == u {
			continue
		}
		segs = append(segs, segment{t, u})
	}
	return segs
}

// firstOver finds, within [a, b), the first segment whose usage exceeds limit.
// It returns the time that segment ends (the earliest start that could avoid
// it) and true, or false when the whole window is within limit. peak is the
// highest usage seen up to that point.
func firstOver(segs []segment, a, b int64, limit int) (until int64, peak int, over bool) {
	// The last segment starting at or before a covers a; earlier ones do not.
	i := max(sort.Search(len(segs), func(i int) bool { return segs[i].start > a })-1, 0)
	for ; i < len(segs) && segs[i].start < b; i++ {
		u := segs[i].usage
		if i+1 < len(segs) && segs[i+1].start <= a {
			continue // only possible for i == 0 when no segment starts before a
		}
		peak = max(peak, u)
		if u > limit {
			end := int64(1<<63 - 1)
			if i+1 < len(segs) {
				end = segs[i+1].start
			}
			return end, peak, true
		}
	}
	return 0, peak, false
}

// peak is the most instances plans book at any instant of [a, b).
func peak(segs []segment, a, b int64) int {
	_, p, _ := firstOver(segs, a, b, int(^uint(0)>>1))
	return p
}

// holdings reads every owner's holding in tx.
func holdings(tx *store.Tx) (map[string]Holding, error) {
	out := map[string]Holding{}
	err := tx.Each(KindHoldings, func(name string, _ []byte) error {
		var h Holding
		if _, err := tx.Get(KindHoldings, name, &h); err != nil {
			return err
		}
		out[name] = h
		return nil
	})
	return out, err
}

// onDemand sums on-demand instances per type and zone over hs, skipping except.
func onDemand(hs map[string]Holding, except string) map[string]map[string]int {
	out := map[string]map[string]int{}
	for owner, h := range hs {
		if owner == except {
			continue
		}
		for t, zs := range h.Instances {
			if out[t] == nil {
				out[t] = map[string]int{}
			}
			for z, n := range zs {
				out[t][z] = addHeld(out[t][z], n)
			}
		}
	}
	return out
}

// addHeld sums stored instance counts with checked addition, saturating at
// math.MaxInt32 instead of wrapping (the sums are later subtracted from
// capacities, which must not wrap either). Set stores at most what the
// configured fleet or a plan holds, so saturation only guards against a
// damaged store, and then over-counts (refusing capacity) rather than
// under-counts.
func addHeld(a, b int) int {
	a, b = min(max(a, 0), math.MaxInt32), min(max(b, 0), math.MaxInt32)
	return min(a+b, math.MaxInt32)
}

// total is the configured on-demand capacity of typ over all zones.
func (c *Calendar) total(typ string) int {
	n := 0
	for _, m := range c.capacity[typ] {
		n += m
	}
	return n
}

// Set implements placement.Allocator: owner's holding becomes want.
// On-demand sources are placed zone by zone in name order where no plan books
// the instances at any time from now on (an on-demand instance has no end).
// Plan sources draw on their plan, up to what other owners leave of it.
// Shortfalls are *fleet.LimitError or *placement.LimitError, and nothing is
// written.
func (c *Calendar) Set(tx *store.Tx, owner string, want placement.Want) error {
	now := c.clock.Now()
	hs, err := holdings(tx)
	if err != nil {
		return fmt.Errorf("capacity: read holdings: %w", err)
	}
	used := onDemand(hs, owner)
	planUsed := planHeld(hs, owner)
	c.mu.RLock()
	defer c.mu.RUnlock()
	h := Holding{Owner: owner, Instances: map[string]map[string]int{}, Plans: map[string]int{}, Since: now.UTC()}
	srcs := make([]placement.Source, 0, len(want))
	for src := range want {
		srcs = append(srcs, src)
	}
	slices.SortFunc(srcs, func(a, b placement.Source) int { return cmp.Compare(a.String(), b.String()) })
	for _, src := range srcs {
		n := want[src]
		if n <= 0 {
			continue
		}
		ref, isPlan := src.Plan()
		if n > placement.MaxInstancesPerOwner {
			// No fleet or plan is this large; refusing here keeps every
			// sum below bounded whatever a caller passes.
			if isPlan {
				return &placement.LimitError{Plan: ref, Name: ref.Key, Requested: n}
			}
			return &fleet.LimitError{InstanceType: src.InstanceType(), Requested: n, Total: c.total(src.InstanceType())}
		}
		if isPlan {
			p, ok := c.plans[ref.Key]
			if !ok || !now.Before(p.End) {
				return &placement.LimitError{Plan: ref, Name: ref.Key, Requested: n}
			}
			if free := max(p.Total()-planUsed[ref.Key], 0); n > free {
				return &placement.LimitError{Plan: ref, Name: p.Name, Requested: n, Available: free, Total: p.Total()}
			}
			h.Plans[ref.Key] = n
			continue
		}
		k := src.InstanceType()
		left, free, placed := n, 0, map[string]int{}
		for _, z := range c.Zones(k) {
			fz := c.zoneFree(k, z, used, now)
			free += fz
			if take := min(fz, left); take > 0 {
				placed[z] = take
				left -= take
			}
		}
		if left > 0 {
			return &fleet.LimitError{InstanceType: k, Requested: n, Available: free, Total: c.total(k)}
		}
		h.Instances[k] = placed
	}
	if err := c.accrue(tx, hs[owner], now); err != nil {
		return err
	}
	if len(h.Instances) == 0 && len(h.Plans) == 0 {
		return tx.Delete(KindHoldings, owner)
	}
	return tx.Put(KindHoldings, owner, h)
}

// Free implements placement.Allocator: what Set would let owner hold of src
// beyond its current holding.
func (c *Calendar) Free(tx *store.Tx, owner string, src placement.Source) (int, error) {
	now := c.clock.Now()
	hs, err := holdings(tx)
	if err != nil {
		return 0, fmt.Errorf("capacity: read holdings: %w", err)
	}
	own := hs[owner]
	c.mu.RLock()
	defer c.mu.RUnlock()
	if ref, ok := src.Plan(); ok {
		p, ok := c.plans[ref.Key]
		if !ok || !now.Before(p.End) {
			return 0, nil
		}
		free := min(max(p.Total()-planHeld(hs, owner)[ref.Key], 0), placement.MaxInstancesPerOwner)
		return max(free-own.Plans[ref.Key], 0), nil
	}
	k := src.InstanceType()
	used := onDemand(hs, owner)
	free, held := 0, 0
	for _, z := range c.Zones(k) {
		free += c.zoneFree(k, z, used, now)
	}
	for _, n := range own.Instances[k] {
		held = addHeld(held, n)
	}
	return max(min(free, placement.MaxInstancesPerOwner)-held, 0), nil
}

// zoneFree is how many on-demand instances of typ in zone are left beside
// used (instances other owners hold) and every plan booking from now on; the
// caller holds mu.
func (c *Calendar) zoneFree(typ, zone string, used map[string]map[string]int, now time.Time) int {
	return max(c.capacity[typ][zone]-used[typ][zone]-peak(c.profileOf(typ, zone), now.UnixNano(), 1<<63-1), 0)
}

// planHeld sums plan instances per plan key over hs, skipping except.
func planHeld(hs map[string]Holding, except string) map[string]int {
	out := map[string]int{}
	for o, h := range hs {
		if o == except {
			continue
		}
		for k, n := range h.Plans {
			out[k] = addHeld(out[k], n)
		}
	}
	return out
}

// accrue books old's instance-hours from old.Since to now into the owner's
// and the plans' accounting records. Reserved hours count only inside the
// plan's window, so nothing accrues after a plan ends even if the release is
// noticed later.
func (c *Calendar) accrue(tx *store.Tx, old Holding, now time.Time) error {
	if old.Owner == "" || old.Since.IsZero() {
		return nil
	}
	add := func(account, key string, hours, cost float64) error {
		if hours <= 0 {
			return nil
		}
		var u Usage
		if _, err := tx.Get(KindAccounting, account, &u); err != nil {
			return err
		}
		if u.InstanceHours == nil {
			u.InstanceHours = map[string]float64{}
		}
		u.InstanceHours[key] += hours
		u.CostUSD += cost
		return tx.Put(KindAccounting, account, u)
	}
	for t, zs := range old.Instances {
		n := 0
		for _, m := range zs {
			n += m
		}
		hours := float64(n) * now.Sub(old.Since).Hours()
		price := 0.0
		if it, err := c.cat.InstanceType(t); err == nil {
			price = it.PricePerHour
		}
		if err := add(old.Owner, t, hours, hours*price); err != nil {
			return err
		}
	}
	for k, n := range old.Plans {
		p, ok := c.plans[k]
		if !ok {
			continue
		}
		from, to := old.Since, now
		if p.Start.After(from) {
			from = p.Start
		}
		if p.End.Before(to) {
			to = p.End
		}
		hours := float64(n) * to.Sub(from).Hours()
		if err := add(old.Owner, placement.OnPlan(placement.PlanRef{Key: k}).String(), hours, 0); err != nil {
			return err
		}
		if err := add(planAccount(k), k, hours, 0); err != nil {
			return err
		}
	}
	return nil
}

// Plan implements placement.Plans.
func (c *Calendar) Plan(ref placement.PlanRef) (placement.PlanInfo, bool) {
	c.mu.RLock()
	p, ok := c.plans[strings.ToLower(ref.Key)]
	c.mu.RUnlock()
	if !ok {
		return placement.PlanInfo{}, false
	}
	return placement.PlanInfo{Ref: placement.PlanRef{Key: p.Key}, Name: p.Name, InstanceType: p.InstanceType, Start: p.Start,
		End: p.End, Total: p.Total(), TargetResources: p.TargetResources}, true
}

// InUse implements placement.Plans: instances of plan ref held by owners
// other than except.
func (c *Calendar) InUse(tx *store.Tx, ref placement.PlanRef, except string) (int, error) {
	hs, err := holdings(tx)
	n := 0
	for o, h := range hs {
		if o != except {
			n = addHeld(n, h.Plans[ref.Key])
		}
	}
	return n, err
}

// Nodes implements placement.NodeSource: while a hyperpod-cluster plan is
// Active it provides one node per instance, named <plan key>-<i> in the
// plan's zone order, each with its instance type's catalog resources.
func (c *Calendar) Nodes(ref placement.PlanRef) ([]placement.NodeSpec, error) {
	c.mu.RLock()
	p, ok := c.plans[strings.ToLower(ref.Key)]
	c.mu.RUnlock()
	if !ok {
		return nil, &Error{Kind: ErrPlanNotFound, Name: ref.Key, Message: fmt.Sprintf("Training plan %s does not exist.", ref.Key)}
	}
	if !slices.Contains(p.TargetResources, placement.TargetHyperPodCluster) {
		return nil, &Error{Kind: ErrInvalid, Name: p.Name, Message: fmt.Sprintf(
			"Training plan %s does not target %s (TargetResources %v).", p.Name, placement.TargetHyperPodCluster, p.TargetResources)}
	}
	if p.Status(c.clock.Now()) != StatusActive {
		return nil, nil
	}
	it, err := c.cat.InstanceType(p.InstanceType)
	if err != nil {
		return nil, fmt.Errorf("capacity: plan %s: %w", p.Name, err)
	}
	res := placement.Resources{GPUs: it.GPUCount, MilliCPU: int64(it.VCPU) * 1000, MemoryBytes: int64(it.MemoryGiB) << 30}
	out := make([]placement.NodeSpec, 0, p.Total())
	for _, r := range p.Capacities {
		for range r.Count {
			out = append(out, placement.NodeSpec{Name: fmt.Sprintf("%s-%d", p.Key, len(out)), InstanceType: it.Name,
				Zone: r.Zone, GPU: it.GPU, Capacity: res})
		}
	}
	return out, nil
}

// Errors of plan operations; the wire layer maps each kind.
type ErrorKind int

const (
	// ErrPlanNotFound: no plan of that name.
	ErrPlanNotFound ErrorKind = iota + 1
	// ErrPlanExists: CreateTrainingPlan named an existing plan.
	ErrPlanExists
	// ErrOfferingNotFound: the offering id is unknown or its validity ended.
	ErrOfferingNotFound
	// ErrCapacityGone: the offering's capacity was booked meanwhile.
	ErrCapacityGone
	// ErrInvalid: inconsistent input (Message says what).
	ErrInvalid
)

// Error is a typed capacity error.
type Error struct {
	Kind    ErrorKind
	Name    string
	Message string
}

func (e *Error) Error() string { return e.Message }

// AsError returns the *Error in err's chain.
func AsError(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}
