package deployment

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/capstan-dev/capstan/internal/autoscale"
	"github.com/capstan-dev/capstan/internal/autoscale/triggers"
	"github.com/capstan-dev/capstan/internal/manifest"
)

// autoscale runs the object's scaler when a poll is due and applies an
// activation; it reports whether rec.Desired changed. Without an
// autoScalingSpec the deployment follows spec.replicas.
func (c *Controller) autoscale(ctx context.Context, k string, rec *record, p *plan, st *objState) bool {
	if p.autoscale == nil {
		c.stopPolling(st)
		st.scaler, st.scalerKey = nil, ""
		st.peek.Store(nil)
		if rec.Desired != nil {
			rec.Desired = nil
			return true
		}
		return false
	}
	now := c.o.Clock.Now()
	b, _ := json.Marshal(p.autoscale)
	sk := string(b) + "|" + p.route
	if st.scalerKey != sk {
		cfg, trigs, err := c.o.Triggers(p.autoscale, triggers.Env{Endpoint: p.route, Source: c.o.Gateway, Clock: c.o.Clock, Logger: c.log})
		var sc *autoscale.Scaler
		if err == nil {
			sc, err = autoscale.New(cfg, c.o.Clock, trigs...)
		}
		if err != nil {
			msg := fmt.Sprintf("autoscaling is off: %v", err)
			if st.scalerErr != msg {
				c.event(k, manifest.EventWarning, "AutoscalingFailed", msg)
				c.log.Warn("autoscaling spec rejected", "object", k, "err", err)
			}
			st.scalerErr = msg
			st.scaler = nil
			st.scalerKey = sk
			st.peek.Store(nil)
			c.stopPolling(st)
			return false
		}
		st.scaler, st.cfg, st.scalerKey, st.scalerErr = sc, cfg, sk, ""
		st.nextPoll = now.Add(c.pollInterval(st))
		c.startPolling(k, st)
	}
	if st.scaler == nil {
		return false
	}
	// Whatever this reconcile decides, the pressure watch then peeks with
	// this scaler at the replica count decided.
	defer func() {
		st.peek.Store(&peekState{scaler: st.scaler, route: p.route, current: *rec.Desired, quietUntil: st.quietUntil})
	}()
	changed := false
	if rec.Desired == nil {
		d := min(max(p.replicas, st.cfg.MinReplicas), st.cfg.MaxReplicas)
		rec.Desired = &d
		changed = true
	}
	c.mu.Lock()
	activate, pressedBy := st.activate, st.pressedBy
	st.activate, st.pressedBy = false, ""
	c.mu.Unlock()
	if activate && *rec.Desired == 0 {
		d := max(st.cfg.MinReplicas, 1)
		rec.Desired = &d
		rec.Activated = now
		st.coldStart = now
		// The cold-start series exists (at zero) from the first activation
		// on, so a scrape sees it before the replica serves and rate() counts
		// the first cold start too.
		c.m.coldStart.WithLabelValues(p.namespace, p.name, p.kind)
		changed = true
		c.m.decisions.WithLabelValues(p.namespace, p.name, p.kind, string(autoscale.ReasonActivated)).Inc()
		c.m.desired.WithLabelValues(p.namespace, p.name, p.kind).Set(float64(d))
		c.event(k, manifest.EventNormal, "Activated", fmt.Sprintf("a request arrived at zero replicas; scaling to %d", d))
		c.log.Info("activated from zero", "object", k, "route", p.route, "replicas", d)
	}
	every := c.pollInterval(st)
	due := pollDue(now, st.nextPoll, every)
	early := !due && pressedBy != "" && !now.Before(st.quietUntil)
	if !due && !early {
		return changed
	}
	if due {
		st.nextPoll = nextPoll(now, st.nextPoll, every)
	}
	d, err := st.scaler.Reconcile(ctx, *rec.Desired)
	if ctx.Err() != nil {
		return changed
	}
	log := c.log.With("object", k, "route", p.route)
	if early {
		// A poll run ahead of the schedule; the scheduled ones keep their
		// times. One that changes nothing (a scale-up limit, another
		// trigger's view) silences the watch until the next scheduled poll.
		log = log.With("early", pressedBy)
		if !d.Changed() {
			st.quietUntil = st.nextPoll
		}
	}
	if err != nil {
		log.Warn("autoscaling decision", "decision", d, "err", err)
	} else {
		log.Info("autoscaling decision", "decision", d)
	}
	for _, in := range d.Inputs {
		if in.Err == nil || in.Fallback {
			c.m.triggerValue.WithLabelValues(p.namespace, p.name, p.kind, in.Name).Set(in.Value)
		}
	}
	c.m.decisions.WithLabelValues(p.namespace, p.name, p.kind, string(d.Reason)).Inc()
	if !d.Changed() {
		c.m.desired.WithLabelValues(p.namespace, p.name, p.kind).Set(float64(*rec.Desired))
		return changed
	}
	if d.Desired == 0 && !rec.Activated.IsZero() && !now.After(rec.Activated.Add(st.cfg.CooldownPeriod)) {
		// The activator brought it up for a request the triggers may not
		// have seen yet: give it a cooldown period before scaling to zero.
		log.Info("scale to zero held: activated recently", "activated", rec.Activated, "cooldown", st.cfg.CooldownPeriod)
		return changed
	}
	from := *rec.Desired
	to := d.Desired
	rec.Desired = &to
	c.m.desired.WithLabelValues(p.namespace, p.name, p.kind).Set(float64(to))
	verb := "ScaledOut"
	switch {
	case to == 0:
		verb = "ScaledToZero"
	case to < from:
		verb = "ScaledIn"
	}
	c.event(k, manifest.EventNormal, verb, fmt.Sprintf("%d → %d replicas (%s)%s", from, to, d.Reason, describeInputs(d)))
	return true
}

func describeInputs(d autoscale.Decision) string {
	s := ""
	for _, in := range d.Inputs {
		if in.Err != nil && !in.Fallback {
			s += fmt.Sprintf("; %s failed: %v", in.Name, in.Err)
			continue
		}
		s += fmt.Sprintf("; %s=%g (target %g)", in.Name, in.Value, in.Target.Value)
	}
	return s
}

// pollSlack is how early, as a fraction of the polling interval, a reconcile
// may still run the poll due next. The ticker that enqueues polls fires on
// the schedule, but the reconcile it causes reads the clock a little later,
// and a reconcile of the previous poll may have run late too; without slack
// a tick that lands a few milliseconds before nextPoll was skipped, and the
// effective interval became two polling intervals whenever the jitter went
// the wrong way (seen with pollingInterval 1: polls every 1–2 s, which
// delayed scale-out on a spike by a second).
const pollSlack = 10

// pollDue reports whether a poll scheduled for next is due at now.
func pollDue(now, next time.Time, every time.Duration) bool {
	return !now.Before(next.Add(-every / pollSlack))
}

// nextPoll schedules the poll after the one that runs at now and was due at
// prev: anchored to the schedule (prev + every), so late reconciles do not
// accumulate into a slower cadence, unless the schedule fell a whole
// interval behind (a long reconcile, or a stopped clock), when it restarts
// from now.
func nextPoll(now, prev time.Time, every time.Duration) time.Time {
	if n := prev.Add(every); n.After(now) {
		return n
	}
	return now.Add(every)
}

func (c *Controller) pollInterval(st *objState) time.Duration {
	if d := st.scaler.PollingInterval(); d > 0 {
		return d
	}
	return autoscale.DefaultPollingInterval
}

// peekState is what the pressure watch needs from the last reconcile.
type peekState struct {
	scaler     *autoscale.Scaler
	route      string
	current    int
	quietUntil time.Time
}

// peeksPerPoll is how many times per polling interval the pressure watch
// peeks at the triggers that can be read cheaply (autoscale.Peeker), and
// minPeekEvery bounds how often. With pollingInterval 1 a burst that starts
// just after a poll is seen within 100 ms instead of up to a second later;
// at 12 requests per second that second is a dozen requests queued on the
// replicas already there.
const (
	peeksPerPoll = 10
	minPeekEvery = 50 * time.Millisecond
)

// startPolling (re)starts the ticker that enqueues the object every polling
// interval, and the pressure watch that enqueues it early when a peek asks
// for more replicas (autoscale.Scaler.Pressure); it does nothing before Run.
func (c *Controller) startPolling(k string, st *objState) {
	every := c.pollInterval(st)
	c.mu.Lock()
	ctx := c.ctx
	c.mu.Unlock()
	if ctx == nil || (st.pollStop != nil && st.pollEvery == every) {
		return
	}
	c.stopPolling(st)
	pctx, cancel := context.WithCancel(ctx)
	st.pollStop, st.pollEvery = cancel, every
	t := c.o.Clock.NewTicker(every)
	pt := c.o.Clock.NewTicker(max(every/peeksPerPoll, minPeekEvery))
	go func() {
		defer t.Stop()
		defer pt.Stop()
		for {
			select {
			case <-pctx.Done():
				return
			case <-t.C():
				c.Enqueue(k)
			case <-pt.C():
				c.watchPressure(pctx, k, st)
			}
		}
	}()
}

// watchPressure peeks once and enqueues an early poll when a trigger asks
// for more replicas. It waits while fewer replicas serve than were decided:
// per-replica values still divide by the replicas already serving, so a
// peek during a scale-out would ask again for what is on its way (the
// scheduled polls carry on as before).
func (c *Controller) watchPressure(ctx context.Context, k string, st *objState) {
	ps := st.peek.Load()
	if ps == nil || ps.scaler == nil || c.o.Clock.Now().Before(ps.quietUntil) {
		return
	}
	if c.o.Gateway.Snapshot(ps.route).Replicas < ps.current {
		return
	}
	name, ok := ps.scaler.Pressure(ctx, ps.current)
	if !ok {
		return
	}
	c.mu.Lock()
	st.pressedBy = name
	c.mu.Unlock()
	c.Enqueue(k)
}

func (c *Controller) stopPolling(st *objState) {
	if st.pollStop != nil {
		st.pollStop()
		st.pollStop, st.pollEvery = nil, 0
	}
}
