package deployment

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/capstan-dev/capstan/internal/endpoint"
	"github.com/capstan-dev/capstan/internal/manifest"
	"github.com/capstan-dev/capstan/internal/runtime"
)

// SageMakerEndpointRegistration states (hyperpod-inference-crds.md §2.4).
const (
	smCreationInProgress = "CreationInProgress"
	smCreationCompleted  = "CreationCompleted"
	smCreationFailed     = "CreationFailed"
	smUpdateInProgress   = "UpdateInProgress"
	smUpdateCompleted    = "UpdateCompleted"
	smUpdateFailed       = "UpdateFailed"
)

// counts summarises the replicas of one deployment.
type counts struct {
	desired, placed, ready, curReady, pending, failed, old int
	pendingReason, failMessage                             string
}

func (c *Controller) count(rec *record, st *objState, desired int) counts {
	n := counts{desired: desired}
	for _, r := range rec.Replicas {
		if r.Revision != rec.Revision {
			n.old++
		}
		if msg := st.startErr[r.ID]; msg != "" {
			n.failed++
			n.failMessage = msg
		}
		if _, ok := st.instance[r.ID]; !ok {
			if reason := st.pending[r.ID]; reason != "" {
				n.pending++
				n.pendingReason = reason
			}
			continue
		}
		rep, err := c.rt.Get(r.ID)
		if err != nil || rep.State == runtime.StateStopped {
			continue
		}
		n.placed++
		switch {
		case rep.State == runtime.StateHealthy && rep.Addr != "":
			n.ready++
			if r.Revision == rec.Revision {
				n.curReady++
			}
		case rep.State == runtime.StateFailed:
			n.failed++
			n.failMessage = fmt.Sprintf("replica %s failed: %s", r.ID, rep.Message)
		case rep.State == runtime.StateStarting && st.crashed[r.ID] != "":
			// Restarting after a crash: still failed until it is healthy.
			n.failed++
			n.failMessage = fmt.Sprintf("replica %s failed: %s (restarting)", r.ID, st.crashed[r.ID])
		case rep.State == runtime.StateStarting && c.o.Clock.Now().Sub(rep.Since) > c.o.StartTimeout:
			n.failed++
			n.failMessage = fmt.Sprintf("replica %s not healthy within %s: %s", r.ID, c.o.StartTimeout, rep.Message)
		}
	}
	return n
}

// writeStatus computes the object's status from what the controller knows
// and writes it (and the SageMaker registration) when it changed.
func (c *Controller) writeStatus(ctx context.Context, k string, rec *record, st *objState, p *plan, fail *failure) error {
	obj := rec.obj()
	meta := obj.GetMeta()
	prev := *obj.GetStatus()
	now := c.o.Clock.Now().UTC().Truncate(time.Second)
	desired := 0
	if p != nil {
		desired = c.desired(rec, p)
	}
	n := c.count(rec, st, desired)

	next := prev
	next.Conditions = append([]manifest.Condition(nil), prev.Conditions...)
	next.ObservedGeneration = meta.Generation
	next.Replicas, next.ReadyReplicas = int32(n.placed), int32(n.ready)

	var state manifest.State
	readyReason, readyMsg := manifest.ReasonDeploying, fmt.Sprintf("%d/%d replicas ready", n.ready, n.desired)
	readyStatus := manifest.ConditionFalse
	complete := fail == nil && n.curReady >= n.desired && n.old == 0 && len(rec.Replicas) == n.desired
	switch {
	case fail != nil:
		state, readyReason, readyMsg = manifest.StateDeploymentFailed, fail.reason, fail.message
	case n.failed > 0 && n.ready == 0:
		state, readyReason, readyMsg = manifest.StateDeploymentFailed, manifest.ReasonReplicaFailed, n.failMessage
	case complete:
		state, readyStatus, readyReason = manifest.StateDeploymentComplete, manifest.ConditionTrue, manifest.ReasonDeployed
		if n.desired == 0 {
			readyReason, readyMsg = manifest.ReasonScaledToZero, "scaled to zero replicas; the next request starts one"
		}
	case p != nil && !rec.DeployStart.IsZero() && c.o.Clock.Now().Sub(rec.DeployStart) > p.maxDeploy:
		state, readyReason = manifest.StateDeploymentFailed, manifest.ReasonDeployTimeout
		readyMsg = fmt.Sprintf("not ready within maxDeployTimeInSeconds (%s): %s", p.maxDeploy, readyMsg)
		if n.pending > 0 {
			readyMsg += "; " + n.pendingReason
		}
	case n.pending > 0 && n.ready < n.desired:
		state, readyReason, readyMsg = manifest.StateDeploymentInProgress, manifest.ReasonInsufficientCapacity,
			fmt.Sprintf("%d replica(s) pending: %s", n.pending, n.pendingReason)
		if n.placed == 0 {
			state = manifest.StateDeploymentPending
		}
	case n.placed > 0:
		state = manifest.StateDeploymentInProgress
	default:
		state = manifest.StateDeploymentPending
	}
	if complete {
		rec.DeployStart = time.Time{}
	}
	next.State = state
	gen := meta.Generation
	next.Conditions = setCondition(next.Conditions, manifest.ConditionReady, readyStatus, readyReason, readyMsg, gen, now)
	if state == manifest.StateDeploymentInProgress || state == manifest.StateDeploymentPending {
		next.Conditions = setCondition(next.Conditions, manifest.ConditionProgressing, manifest.ConditionTrue, manifest.ReasonDeploying, readyMsg, gen, now)
	} else {
		next.Conditions = setCondition(next.Conditions, manifest.ConditionProgressing, manifest.ConditionFalse, readyReason, "", gen, now)
	}
	switch {
	case fail != nil || state == manifest.StateDeploymentFailed:
		next.Conditions = setCondition(next.Conditions, manifest.ConditionDegraded, manifest.ConditionTrue, readyReason, readyMsg, gen, now)
	case n.failed > 0:
		next.Conditions = setCondition(next.Conditions, manifest.ConditionDegraded, manifest.ConditionTrue, manifest.ReasonReplicaFailed, n.failMessage, gen, now)
	case n.pending > 0:
		next.Conditions = setCondition(next.Conditions, manifest.ConditionDegraded, manifest.ConditionTrue, manifest.ReasonInsufficientCapacity, n.pendingReason, gen, now)
	default:
		next.Conditions = setCondition(next.Conditions, manifest.ConditionDegraded, manifest.ConditionFalse, manifest.ReasonAsExpected, "", gen, now)
	}

	// lastUpdated moves only when the rest of the deployment status does,
	// so an unchanged deployment is not written (nor its resourceVersion
	// bumped, which watchers would see) every reconcile.
	ds := manifest.DeploymentStatus{Name: meta.Name, DeploymentObjectOverallState: string(state), Reason: readyReason, Message: readyMsg}
	if prev.DeploymentStatus != nil {
		old := *prev.DeploymentStatus
		old.LastUpdated = nil
		if old == ds {
			ds.LastUpdated = prev.DeploymentStatus.LastUpdated
		}
	}
	if ds.LastUpdated == nil {
		ds.LastUpdated = &now
	}
	next.DeploymentStatus = &ds

	var smState string
	if p != nil {
		next.Endpoints = &manifest.EndpointsStatus{URL: c.url(p)}
		if p.endpointName != "" && c.o.Endpoints != nil {
			smState = sageMakerState(prev.Endpoints, state, st.nameErr != "")
			es := &manifest.SageMakerEndpointStatus{State: smState}
			if st.nameErr == "" {
				es.EndpointArn = fmt.Sprintf("arn:aws:sagemaker:%s:%s:endpoint/%s", c.o.Region, c.o.AccountID, strings.ToLower(p.endpointName))
			}
			next.Endpoints.SageMaker = es
		}
		c.m.replicas.WithLabelValues(p.namespace, p.name, p.kind, "desired").Set(float64(n.desired))
		c.m.replicas.WithLabelValues(p.namespace, p.name, p.kind, "current").Set(float64(n.placed))
		c.m.replicas.WithLabelValues(p.namespace, p.name, p.kind, "ready").Set(float64(n.ready))
		c.m.replicas.WithLabelValues(p.namespace, p.name, p.kind, "pending").Set(float64(n.pending))
	}

	if !reflect.DeepEqual(statusJSON(prev), statusJSON(next)) {
		if prev.State != next.State {
			typ := manifest.EventNormal
			if next.State == manifest.StateDeploymentFailed {
				typ = manifest.EventWarning
			}
			c.event(k, typ, string(next.State), readyMsg)
			c.log.Info("deployment state", "object", k, "state", next.State, "reason", readyReason, "message", readyMsg)
		}
		*obj.GetStatus() = next
		if err := c.save(k, rec); err != nil {
			return err
		}
	}
	if p != nil && st.registered && st.nameErr == "" {
		return c.register(ctx, p, rec, st, state, readyMsg)
	}
	return nil
}

func statusJSON(s manifest.Status) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// register keeps the SageMaker registration in step with the status.
func (c *Controller) register(ctx context.Context, p *plan, rec *record, st *objState, state manifest.State, msg string) error {
	status, reason := endpoint.StatusCreating, ""
	done := st.lastPut != nil && st.lastPut.Status != endpoint.StatusCreating
	switch state {
	case manifest.StateDeploymentComplete:
		status = endpoint.StatusInService
	case manifest.StateDeploymentFailed:
		status, reason = endpoint.StatusFailed, msg
	default:
		if done {
			status = endpoint.StatusUpdating
		}
	}
	m := c.managed(p, rec, st, status, reason)
	if st.lastPut != nil && reflect.DeepEqual(*st.lastPut, m) {
		return nil
	}
	if err := c.o.Endpoints.PutManaged(ctx, m); err != nil {
		return fmt.Errorf("register endpoint %s: %w", p.endpointName, err)
	}
	st.lastPut = &m
	return nil
}

// sageMakerState maps the deployment state onto the registration's enum;
// once created, later changes are updates.
func sageMakerState(prev *manifest.EndpointsStatus, state manifest.State, nameInUse bool) string {
	if nameInUse {
		return smCreationFailed
	}
	was := ""
	if prev != nil && prev.SageMaker != nil {
		was = prev.SageMaker.State
	}
	created := was == smCreationCompleted || was == smUpdateInProgress || was == smUpdateCompleted || was == smUpdateFailed
	switch state {
	case manifest.StateDeploymentComplete:
		if created && was != smCreationCompleted {
			return smUpdateCompleted
		}
		return smCreationCompleted
	case manifest.StateDeploymentFailed:
		if created {
			return smUpdateFailed
		}
		return smCreationFailed
	default:
		if created {
			return smUpdateInProgress
		}
		return smCreationInProgress
	}
}

// url is where clients invoke the deployment through the gateway.
func (c *Controller) url(p *plan) string {
	base := strings.TrimRight(c.o.GatewayURL, "/")
	if p.invocation != "" && p.invocation != manifest.DefaultInvocationEndpoint {
		return base + "/" + strings.TrimLeft(p.invocation, "/")
	}
	if p.kind == manifest.KindInferenceEndpointConfig && p.invocation == manifest.DefaultInvocationEndpoint {
		return base + "/endpoints/" + p.route + "/invocations"
	}
	return base + "/v1/chat/completions"
}

// setCondition sets one condition, keeping its transition time unless its
// status changes.
func setCondition(conds []manifest.Condition, typ string, status manifest.ConditionStatus, reason, msg string, gen int64, now time.Time) []manifest.Condition {
	for i := range conds {
		if conds[i].Type != typ {
			continue
		}
		if conds[i].Status != status {
			conds[i].LastTransitionTime = now
		}
		conds[i].Status, conds[i].Reason, conds[i].Message, conds[i].ObservedGeneration = status, reason, msg, gen
		return conds
	}
	return append(conds, manifest.Condition{Type: typ, Status: status, Reason: reason, Message: msg, ObservedGeneration: gen, LastTransitionTime: now})
}
