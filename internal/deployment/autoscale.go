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
	changed := false
	if rec.Desired == nil {
		d := min(max(p.replicas, st.cfg.MinReplicas), st.cfg.MaxReplicas)
		rec.Desired = &d
		changed = true
	}
	c.mu.Lock()
	activate := st.activate
	st.activate = false
	c.mu.Unlock()
	if activate && *rec.Desired == 0 {
		d := max(st.cfg.MinReplicas, 1)
		rec.Desired = &d
		rec.Activated = now
		st.coldStart = now
		changed = true
		c.m.decisions.WithLabelValues(p.namespace, p.name, p.kind, string(autoscale.ReasonActivated)).Inc()
		c.m.desired.WithLabelValues(p.namespace, p.name, p.kind).Set(float64(d))
		c.event(k, manifest.EventNormal, "Activated", fmt.Sprintf("a request arrived at zero replicas; scaling to %d", d))
		c.log.Info("activated from zero", "object", k, "route", p.route, "replicas", d)
	}
	if now.Before(st.nextPoll) {
		return changed
	}
	st.nextPoll = now.Add(c.pollInterval(st))
	d, err := st.scaler.Reconcile(ctx, *rec.Desired)
	if ctx.Err() != nil {
		return changed
	}
	log := c.log.With("object", k, "route", p.route)
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

func (c *Controller) pollInterval(st *objState) time.Duration {
	if d := st.scaler.PollingInterval(); d > 0 {
		return d
	}
	return autoscale.DefaultPollingInterval
}

// startPolling (re)starts the ticker that enqueues the object every polling
// interval; it does nothing before Run.
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
	go func() {
		defer t.Stop()
		for {
			select {
			case <-pctx.Done():
				return
			case <-t.C():
				c.Enqueue(k)
			}
		}
	}()
}

func (c *Controller) stopPolling(st *objState) {
	if st.pollStop != nil {
		st.pollStop()
		st.pollStop, st.pollEvery = nil, 0
	}
}
