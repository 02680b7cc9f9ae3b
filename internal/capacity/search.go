package capacity

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/capstan-dev/capstan/internal/placement"
	"github.com/capstan-dev/capstan/internal/store"
)

// OfferingTTL is how long an offering id from SearchTrainingPlanOfferings can
// be bought. It is also only good while its capacity is still free: a
// purchase re-checks the calendar. Offerings live in memory; after a server
// restart, search again.
const OfferingTTL = 30 * time.Minute

// OfferingsPerZone is how many start times (earliest first) a search offers
// per zone; successive offerings in a zone start at least OfferingStep apart.
const (
	OfferingsPerZone = 3
	OfferingStep     = 24 * time.Hour
	// maxSplitCandidates bounds the cross-zone search (start times tried).
	maxSplitCandidates = 4096
	// maxOffers bounds the offerings kept for purchase.
	maxOffers = 100000
)

// Limits of a search, SageMaker's documented ranges: InstanceCount 1..256
// and DurationHours 1..87600 (ten years).
const (
	MaxPlanInstances = 256
	MaxPlanDuration  = 87600 * time.Hour
)

// lastNano is the latest instant the calendar can represent: bookings are
// unix nanoseconds in an int64 (the year 2262).
var lastNano = time.Unix(0, 1<<63-1)

// CurrencyCode of every fee.
const CurrencyCode = "USD"

// TargetResources SageMaker accepts; capstan serves endpoints with them.
var TargetResources = []string{"training-job", "hyperpod-cluster", "endpoint", "studio-apps"}

// Query is a validated search.
type Query struct {
	InstanceType    string
	Count           int
	Duration        time.Duration
	StartAfter      time.Time // zero: now
	EndBefore       time.Time // zero: no bound
	TargetResources []string
}

// Offering is a purchasable reservation: Capacities instances of
// InstanceType for [Start, End).
type Offering struct {
	ID                  string
	InstanceType        string
	Capacities          []Reserved
	Start, End          time.Time
	DurationHours       int
	UpfrontFee          string
	CurrencyCode        string
	TargetResources     []string
	RequestedStartAfter time.Time
	RequestedEndBefore  time.Time
	Expires             time.Time
}

// Fee is the upfront fee of count instances of typ for hours: the catalog's
// on-demand price per hour × hours × count, rounded to cents. (SageMaker
// prices plans below on-demand; capstan keeps the arithmetic obvious.)
func (c *Calendar) Fee(typ string, hours, count int) string {
	it, err := c.cat.InstanceType(typ)
	if err != nil {
		return "0.00"
	}
	return fmt.Sprintf("%.2f", it.PricePerHour*float64(hours)*float64(count))
}

// Search returns feasible offerings inside [StartAfter, EndBefore], best
// first: earliest start, then single-zone before split, then zone. A window
// shorter than the duration gives none (not an error). Each zone offers up to
// OfferingsPerZone start times; when no single zone can hold Count at any
// time, offerings split the count across zones at one start time.
func (c *Calendar) Search(q Query) ([]Offering, error) {
	if q.Count < 1 || q.Count > MaxPlanInstances {
		return nil, &Error{Kind: ErrInvalid, Message: fmt.Sprintf("InstanceCount %d is outside [1, %d].", q.Count, MaxPlanInstances)}
	}
	if q.Duration < time.Hour || q.Duration > MaxPlanDuration {
		return nil, &Error{Kind: ErrInvalid, Message: fmt.Sprintf("Duration %s is outside [1h, %s].", q.Duration, MaxPlanDuration)}
	}
	now := c.clock.Now().UTC()
	if !q.EndBefore.IsZero() && !q.EndBefore.After(now) {
		// A window that has already closed is a mistake (a date typed in
		// the past), not a search with no result.
		return nil, &Error{Kind: ErrInvalid, Message: fmt.Sprintf("EndTimeBefore (%s) is in the past; it must be after the current time (%s).",
			q.EndBefore.UTC().Format(time.RFC3339), now.Format(time.RFC3339))}
	}
	if q.StartAfter.After(lastNano.Add(-q.Duration)) {
		// No window that starts then fits in the calendar's range.
		return nil, nil
	}
	if q.EndBefore.After(lastNano) {
		q.EndBefore = time.Time{} // past the calendar's end: no bound
	}
	from := q.StartAfter
	if from.Before(now) {
		from = now
	}
	// Start on a whole second so offerings read cleanly.
	if t := from.Truncate(time.Second); !t.Equal(from) {
		from = t.Add(time.Second)
	}
	d := q.Duration.Nanoseconds()
	endBefore := int64(1<<63 - 1)
	if !q.EndBefore.IsZero() {
		endBefore = q.EndBefore.UnixNano()
	}
	if from.UnixNano() > endBefore-d {
		return nil, nil
	}
	var used map[string]map[string]int
	if err := c.store.View(func(tx *store.Tx) error {
		hs, err := holdings(tx)
		used = onDemand(hs, "")
		return err
	}); err != nil {
		return nil, fmt.Errorf("capacity: read holdings: %w", err)
	}
	type zoneCal struct {
		zone string
		room int // instances plans may book here at any instant
		segs []segment
	}
	c.mu.RLock()
	var zones []zoneCal
	for _, z := range c.Zones(q.InstanceType) {
		zones = append(zones, zoneCal{z, c.capacity[q.InstanceType][z] - used[q.InstanceType][z],
			c.profileOf(q.InstanceType, z)})
	}
	c.mu.RUnlock()

	var out []Offering
	add := func(start int64, caps []Reserved) {
		st := time.Unix(0, start).UTC()
		out = append(out, Offering{InstanceType: q.InstanceType, Capacities: caps, Start: st, End: st.Add(q.Duration),
			DurationHours: int(q.Duration / time.Hour), UpfrontFee: c.Fee(q.InstanceType, int(q.Duration/time.Hour), q.Count),
			CurrencyCode: CurrencyCode, TargetResources: q.TargetResources, RequestedStartAfter: q.StartAfter,
			RequestedEndBefore: q.EndBefore, Expires: now.Add(OfferingTTL)})
	}
	for _, zc := range zones {
		limit := zc.room - q.Count
		if limit < 0 {
			continue
		}
		s, found := from.UnixNano(), 0
		// s <= endBefore-d rather than s+d <= endBefore: s may reach the
		// calendar's last instant, and s+d would wrap.
		for found < OfferingsPerZone && s <= endBefore-d {
			until, _, over := firstOver(zc.segs, s, s+d, limit)
			if over {
				s = until
				continue
			}
			add(s, []Reserved{{zc.zone, q.Count}})
			found++
			s += OfferingStep.Nanoseconds()
		}
	}
	if len(out) == 0 && len(zones) > 1 {
		// No zone alone can hold the count: try start times where the zones'
		// free instances together can (each zone's free count is its room
		// minus its peak booking over the window).
		cands := []int64{from.UnixNano()}
		for _, zc := range zones {
			for _, sg := range zc.segs {
				if sg.start > from.UnixNano() && sg.start <= endBefore-d {
					cands = append(cands, sg.start)
				}
			}
		}
		sort.Slice(cands, func(i, j int) bool { return cands[i] < cands[j] })
		next := int64(-1 << 63)
		for i, s := range cands {
			if i >= maxSplitCandidates || len(out) >= OfferingsPerZone || s > endBefore-d {
				break
			}
			if s < next {
				continue
			}
			left := q.Count
			var caps []Reserved
			for _, zc := range zones {
				free := zc.room - peak(zc.segs, s, s+d)
				if take := min(free, left); take > 0 {
					caps = append(caps, Reserved{zc.zone, take})
					left -= take
				}
			}
			if left == 0 {
				add(s, caps)
				next = s + OfferingStep.Nanoseconds()
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if !out[i].Start.Equal(out[j].Start) {
			return out[i].Start.Before(out[j].Start)
		}
		if len(out[i].Capacities) != len(out[j].Capacities) {
			return len(out[i].Capacities) < len(out[j].Capacities)
		}
		return out[i].Capacities[0].Zone < out[j].Capacities[0].Zone
	})
	c.offMu.Lock()
	defer c.offMu.Unlock()
	// Offerings expire in issue order: drop expired ones from the front, and
	// the oldest beyond maxOffers so memory stays bounded.
	for len(c.offerQ) > 0 {
		o, ok := c.offers[c.offerQ[0]]
		if ok && now.Before(o.Expires) && len(c.offerQ) <= maxOffers {
			break
		}
		delete(c.offers, c.offerQ[0])
		c.offerQ = c.offerQ[1:]
	}
	for i := range out {
		c.seq++
		h := sha256.New()
		fmt.Fprintf(h, "%s|%v|%d|%d|%d|%d", out[i].InstanceType, out[i].Capacities, out[i].Start.UnixNano(),
			out[i].End.UnixNano(), now.UnixNano(), c.seq)
		out[i].ID = "tpo-" + hex.EncodeToString(h.Sum(nil))
		c.offers[out[i].ID] = out[i]
		c.offerQ = append(c.offerQ, out[i].ID)
	}
	return out, nil
}

// CreatePlan buys offering offeringID as plan name: the plan is booked in one
// store transaction that first re-checks that every zone still has the
// instances free for the whole window, so two buyers of the last capacity
// get one plan and one ErrCapacityGone.
func (c *Calendar) CreatePlan(name, offeringID string, tags []Tag) (Plan, error) {
	now := c.clock.Now().UTC()
	key := strings.ToLower(name)
	var p Plan
	c.buy.Lock()
	defer c.buy.Unlock()
	indexed := false
	err := c.store.Update(func(tx *store.Tx) error {
		// The name first: a retried purchase gets ResourceInUse, not a
		// complaint about its (now used) offering.
		if tx.Exists(KindPlans, key) {
			return &Error{Kind: ErrPlanExists, Name: name, Message: fmt.Sprintf("Training plan %s already exists. Choose a different name.", name)}
		}
		c.offMu.Lock()
		o, ok := c.offers[offeringID]
		c.offMu.Unlock()
		if !ok || !now.Before(o.Expires) {
			return &Error{Kind: ErrOfferingNotFound, Name: offeringID,
				Message: fmt.Sprintf("Training plan offering %s does not exist or is no longer valid (offerings are valid for %s); search again.", offeringID, OfferingTTL)}
		}
		p = Plan{Key: key, Name: name, OfferingID: offeringID, InstanceType: o.InstanceType,
			Capacities: o.Capacities, Start: o.Start, End: o.End, DurationHours: o.DurationHours, UpfrontFee: o.UpfrontFee,
			CurrencyCode: o.CurrencyCode, TargetResources: o.TargetResources, CreationTime: now.Truncate(time.Millisecond), Tags: tags}
		hs, err := holdings(tx)
		if err != nil {
			return err
		}
		used := onDemand(hs, "")
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, r := range o.Capacities {
			segs := c.profileOf(o.InstanceType, r.Zone)
			free := c.capacity[o.InstanceType][r.Zone] - used[o.InstanceType][r.Zone] - peak(segs, o.Start.UnixNano(), o.End.UnixNano())
			if free < r.Count {
				return &Error{Kind: ErrCapacityGone, Name: offeringID, Message: fmt.Sprintf(
					"The capacity of training plan offering %s is no longer available: %s in %s has %d instances free from %s to %s and the offering needs %d. Search again.",
					offeringID, o.InstanceType, r.Zone, max(free, 0), o.Start.Format(time.RFC3339), o.End.Format(time.RFC3339), r.Count)}
			}
		}
		if err := tx.Put(KindPlans, p.Key, p); err != nil {
			return err
		}
		c.index(p)
		indexed = true
		return nil
	})
	if err != nil {
		if indexed {
			c.mu.Lock()
			c.unindex(p)
			c.mu.Unlock()
		}
		return Plan{}, err
	}
	c.offMu.Lock()
	delete(c.offers, offeringID)
	c.offMu.Unlock()
	return p, nil
}

// PlanView is a plan with its counts at a moment.
type PlanView struct {
	Plan
	Status    string
	InUse     int
	Available int
	Usage     Usage // instance-hours used on the plan so far
}

// view computes p's counts in tx at now.
func (c *Calendar) view(tx *store.Tx, p Plan, now time.Time) (PlanView, error) {
	v := PlanView{Plan: p, Status: p.Status(now)}
	n, err := c.InUse(tx, placement.PlanRef{Key: p.Key}, "")
	if err != nil {
		return v, err
	}
	if v.Status != StatusExpired {
		v.InUse = n
		v.Available = max(p.Total()-n, 0)
	}
	if _, err := tx.Get(KindAccounting, planAccount(p.Key), &v.Usage); err != nil {
		return v, err
	}
	// Add what current holders have used since their last change.
	hs, err := holdings(tx)
	if err != nil {
		return v, err
	}
	for _, h := range hs {
		m := h.Plans[p.Key]
		if m == 0 || h.Since.IsZero() {
			continue
		}
		from, to := h.Since, now
		if p.Start.After(from) {
			from = p.Start
		}
		if p.End.Before(to) {
			to = p.End
		}
		if hours := float64(m) * to.Sub(from).Hours(); hours > 0 {
			if v.Usage.InstanceHours == nil {
				v.Usage.InstanceHours = map[string]float64{}
			}
			v.Usage.InstanceHours[p.Key] += hours
		}
	}
	return v, nil
}

// GetPlan returns the named plan and its counts.
func (c *Calendar) GetPlan(name string) (PlanView, error) {
	c.mu.RLock()
	p, ok := c.plans[strings.ToLower(name)]
	c.mu.RUnlock()
	if !ok {
		return PlanView{}, &Error{Kind: ErrPlanNotFound, Name: name, Message: fmt.Sprintf("Training plan %s does not exist.", name)}
	}
	var v PlanView
	err := c.store.View(func(tx *store.Tx) error {
		var err error
		v, err = c.view(tx, p, c.clock.Now())
		return err
	})
	return v, err
}

// ListPlans returns every plan with its counts, in name order.
func (c *Calendar) ListPlans() ([]PlanView, error) {
	c.mu.RLock()
	plans := make([]Plan, 0, len(c.plans))
	for _, p := range c.plans {
		plans = append(plans, p)
	}
	c.mu.RUnlock()
	sort.Slice(plans, func(i, j int) bool { return plans[i].Key < plans[j].Key })
	now := c.clock.Now()
	out := make([]PlanView, 0, len(plans))
	err := c.store.View(func(tx *store.Tx) error {
		for _, p := range plans {
			v, err := c.view(tx, p, now)
			if err != nil {
				return err
			}
			out = append(out, v)
		}
		return nil
	})
	return out, err
}

// EndpointUsage returns the accounting of endpoint owner, including what its
// current holding has used since its last change.
func (c *Calendar) EndpointUsage(owner string) (Usage, error) {
	var u Usage
	now := c.clock.Now()
	err := c.store.View(func(tx *store.Tx) error {
		if _, err := tx.Get(KindAccounting, owner, &u); err != nil {
			return err
		}
		var h Holding
		found, err := tx.Get(KindHoldings, owner, &h)
		if err != nil || !found {
			return err
		}
		if u.InstanceHours == nil {
			u.InstanceHours = map[string]float64{}
		}
		for t, zs := range h.Instances {
			n := 0
			for _, m := range zs {
				n += m
			}
			hours := float64(n) * now.Sub(h.Since).Hours()
			u.InstanceHours[t] += hours
			if it, err := c.cat.InstanceType(t); err == nil {
				u.CostUSD += hours * it.PricePerHour
			}
		}
		c.mu.RLock()
		defer c.mu.RUnlock()
		for k, n := range h.Plans {
			p, ok := c.plans[k]
			if !ok {
				continue
			}
			from, to := h.Since, now
			if p.Start.After(from) {
				from = p.Start
			}
			if p.End.Before(to) {
				to = p.End
			}
			if hours := float64(n) * to.Sub(from).Hours(); hours > 0 {
				u.InstanceHours[placement.OnPlan(placement.PlanRef{Key: k}).String()] += hours
			}
		}
		return nil
	})
	return u, err
}
