package operator

import (
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/capstan-dev/capstan/internal/manifest"
)

// observed is what the operator saw of a manifest's children.
type observed struct {
	generation int64
	desired    int32
	selector   map[string]string
	deployment *appsv1.Deployment // nil: not created yet
	// failure, when set, is why the children could not be made (an invalid
	// spec, a name taken by an object the operator does not own).
	failure       string
	failureReason string
}

// statusFor computes the manifest's status from its Deployment, as the
// reference describes: state and conditions mirror the Deployment; the
// scale subresource reads replicas and selector. now stamps transitions;
// prev keeps a condition's time when its status does not change.
func statusFor(prev manifest.Status, o observed, now time.Time) manifest.Status {
	st := manifest.Status{
		ObservedGeneration: o.generation,
		Selector:           labels.SelectorFromSet(o.selector).String(),
		Endpoints:          prev.Endpoints,
		MetricsStatus:      prev.MetricsStatus,
	}
	var (
		state                manifest.State
		reason, message      string
		ready, progressing   manifest.ConditionStatus
		degraded             = manifest.ConditionFalse
		degradedReason       = manifest.ReasonAsExpected
		deployName           string
		readyReason, progRsn string
	)
	d := o.deployment
	switch {
	case o.failure != "":
		state, reason, message = manifest.StateDeploymentFailed, o.failureReason, o.failure
		ready, progressing, degraded, degradedReason = manifest.ConditionFalse, manifest.ConditionFalse, manifest.ConditionTrue, o.failureReason
		readyReason, progRsn = o.failureReason, o.failureReason
		if d != nil {
			deployName = d.Name
			st.Replicas, st.ReadyReplicas = d.Status.Replicas, d.Status.ReadyReplicas
		}
	case d == nil:
		state, reason, message = manifest.StateDeploymentPending, manifest.ReasonDeploying, "the Deployment is not created yet"
		ready, progressing = manifest.ConditionFalse, manifest.ConditionTrue
		readyReason, progRsn = manifest.ReasonDeploying, manifest.ReasonDeploying
	default:
		deployName = d.Name
		st.Replicas, st.ReadyReplicas = d.Status.Replicas, d.Status.ReadyReplicas
		current := d.Status.ObservedGeneration >= d.Generation
		done := current && d.Status.UpdatedReplicas == o.desired && d.Status.ReadyReplicas == o.desired &&
			d.Status.AvailableReplicas == o.desired && d.Status.Replicas == o.desired
		switch {
		case deadlineExceeded(d):
			state, reason = manifest.StateDeploymentFailed, manifest.ReasonDeployTimeout
			message = fmt.Sprintf("%d of %d replicas ready after maxDeployTimeInSeconds", d.Status.ReadyReplicas, o.desired)
			ready, progressing, degraded, degradedReason = manifest.ConditionFalse, manifest.ConditionFalse, manifest.ConditionTrue, manifest.ReasonDeployTimeout
			readyReason, progRsn = manifest.ReasonDeployTimeout, manifest.ReasonDeployTimeout
		case done && o.desired == 0:
			state, reason, message = manifest.StateDeploymentComplete, manifest.ReasonScaledToZero, "scaled to zero replicas"
			ready, progressing = manifest.ConditionTrue, manifest.ConditionFalse
			readyReason, progRsn = manifest.ReasonScaledToZero, manifest.ReasonScaledToZero
		case done:
			state, reason = manifest.StateDeploymentComplete, manifest.ReasonDeployed
			message = fmt.Sprintf("%d of %d replicas ready", d.Status.ReadyReplicas, o.desired)
			ready, progressing = manifest.ConditionTrue, manifest.ConditionFalse
			readyReason, progRsn = manifest.ReasonDeployed, manifest.ReasonDeployed
		default:
			state, reason = manifest.StateDeploymentInProgress, manifest.ReasonDeploying
			message = fmt.Sprintf("%d of %d replicas ready, %d updated", d.Status.ReadyReplicas, o.desired, d.Status.UpdatedReplicas)
			ready, progressing = manifest.ConditionFalse, manifest.ConditionTrue
			readyReason, progRsn = manifest.ReasonDeploying, manifest.ReasonDeploying
		}
	}
	st.State = state
	st.Conditions = []manifest.Condition{
		condition(prev, manifest.ConditionReady, ready, readyReason, message, o.generation, now),
		condition(prev, manifest.ConditionProgressing, progressing, progRsn, message, o.generation, now),
		condition(prev, manifest.ConditionDegraded, degraded, degradedReason, "", o.generation, now),
	}
	if degraded == manifest.ConditionTrue {
		st.Conditions[2].Message = message
	}
	last := now
	if prev.DeploymentStatus != nil && prev.DeploymentStatus.LastUpdated != nil &&
		prev.DeploymentStatus.DeploymentObjectOverallState == string(state) && prev.DeploymentStatus.Message == message {
		last = *prev.DeploymentStatus.LastUpdated
	}
	st.DeploymentStatus = &manifest.DeploymentStatus{
		Name: deployName, LastUpdated: &last, DeploymentObjectOverallState: string(state), Reason: reason, Message: message,
	}
	return st
}

func deadlineExceeded(d *appsv1.Deployment) bool {
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentProgressing && c.Status == corev1.ConditionFalse && c.Reason == "ProgressDeadlineExceeded" {
			return true
		}
	}
	return false
}

// condition keeps prev's transition time when the status is unchanged, as
// metav1.Condition users expect.
func condition(prev manifest.Status, typ string, s manifest.ConditionStatus, reason, msg string, gen int64, now time.Time) manifest.Condition {
	c := manifest.Condition{Type: typ, Status: s, Reason: reason, Message: msg, ObservedGeneration: gen, LastTransitionTime: now.UTC().Truncate(time.Second)}
	for _, p := range prev.Conditions {
		if p.Type == typ && p.Status == s {
			c.LastTransitionTime = p.LastTransitionTime
		}
	}
	return c
}
