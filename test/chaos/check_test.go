//go:build linux

package chaos

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	sm "github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	"github.com/aws/smithy-go"
)

// settle waits up to bound for every endpoint to be InService or Failed and
// every deployment DeploymentComplete or DeploymentFailed, and returns how
// many are still in between.
func (h *harness) settle(ctx context.Context, bound time.Duration) int {
	start := time.Now()
	deadline := start.Add(bound)
	for {
		moving, err := h.moving(ctx)
		if err == nil && len(moving) == 0 {
			h.t.Logf("settled in %v", time.Since(start).Round(time.Millisecond))
			return 0
		}
		if time.Now().After(deadline) {
			if err != nil {
				h.t.Errorf("settle: cannot list: %v", err)
				return max(1, len(moving))
			}
			for _, m := range moving {
				h.t.Logf("stuck after %v: %s", bound, m)
			}
			return len(moving)
		}
		sleep(ctx, 250*time.Millisecond)
	}
}

// moving lists the endpoints and deployments that are not in a steady state.
func (h *harness) moving(ctx context.Context) ([]string, error) {
	var out []string
	var next *string
	for {
		l, err := h.c.sm.ListEndpoints(ctx, &sm.ListEndpointsInput{MaxResults: aws.Int32(100), NextToken: next}, h.c.at())
		if err != nil {
			return nil, err
		}
		for _, e := range l.Endpoints {
			if e.EndpointStatus != smtypes.EndpointStatusInService && e.EndpointStatus != smtypes.EndpointStatusFailed {
				out = append(out, fmt.Sprintf("endpoint %s is %s", aws.ToString(e.EndpointName), e.EndpointStatus))
			}
		}
		if next = l.NextToken; next == nil {
			break
		}
	}
	ms, err := h.c.listManifests(ctx)
	if err != nil {
		return nil, err
	}
	for _, m := range ms {
		if m.Status.State != "DeploymentComplete" && m.Status.State != "DeploymentFailed" {
			out = append(out, fmt.Sprintf("deployment %s is %q", m.Metadata.Name, m.Status.State))
		}
	}
	return out, nil
}

// notFound reports whether err is the API saying the resource does not exist.
func notFound(err error) bool {
	var ae smithy.APIError
	return errors.As(err, &ae) && (strings.Contains(ae.ErrorMessage(), "Could not find") || strings.Contains(ae.ErrorMessage(), "does not exist"))
}

// retried runs a read, again on a transport error (not on an API answer).
func retried(ctx context.Context, fn func() error) error {
	var err error
	for range 5 {
		if err = fn(); err == nil || classify(err) != uncertain || ctx.Err() != nil {
			return err
		}
		sleep(ctx, 200*time.Millisecond)
	}
	return err
}

// checkWrites reads back every acknowledged write and returns how many are
// lost: missing, or settled to a state no acknowledged write left.
func (h *harness) checkWrites(ctx context.Context) int {
	w := h.w
	w.mu.Lock()
	models, plans := append([]string(nil), w.models...), append([]string(nil), w.plans...)
	configs := make([]string, 0, len(w.configs))
	for c := range w.configs {
		configs = append(configs, c)
	}
	endpoints := map[string]map[epState]bool{}
	for k, v := range w.endpoints {
		endpoints[k] = v
	}
	manifests := map[string]map[int32]bool{}
	for k, v := range w.manifests {
		manifests[k] = v
	}
	w.mu.Unlock()
	sort.Strings(configs)

	lost := 0
	missing := func(what string, err error) {
		if err != nil {
			lost++
			h.t.Logf("lost: %s: %v", what, err)
		}
	}
	for _, m := range models {
		missing("model "+m, retried(ctx, func() error {
			_, err := h.c.sm.DescribeModel(ctx, &sm.DescribeModelInput{ModelName: aws.String(m)}, h.c.at())
			return err
		}))
	}
	for _, c := range configs {
		missing("endpoint config "+c, retried(ctx, func() error {
			_, err := h.c.sm.DescribeEndpointConfig(ctx, &sm.DescribeEndpointConfigInput{EndpointConfigName: aws.String(c)}, h.c.at())
			return err
		}))
	}
	for _, p := range plans {
		missing("training plan "+p, retried(ctx, func() error {
			_, err := h.c.sm.DescribeTrainingPlan(ctx, &sm.DescribeTrainingPlanInput{TrainingPlanName: aws.String(p)}, h.c.at())
			return err
		}))
	}
	for name, possible := range endpoints {
		var d *sm.DescribeEndpointOutput
		err := retried(ctx, func() error {
			var err error
			d, err = h.c.sm.DescribeEndpoint(ctx, &sm.DescribeEndpointInput{EndpointName: aws.String(name)}, h.c.at())
			return err
		})
		var got epState
		switch {
		case notFound(err):
			got = epState{absent: true}
		case err != nil:
			missing("endpoint "+name, err)
			continue
		case d.EndpointStatus == smtypes.EndpointStatusInService && len(d.ProductionVariants) > 0:
			got = epState{config: aws.ToString(d.EndpointConfigName), count: aws.ToInt32(d.ProductionVariants[0].CurrentInstanceCount)}
		default:
			// Failed (or not settled): only its existence can be compared.
			h.t.Logf("endpoint %s is %s: %s", name, d.EndpointStatus, aws.ToString(d.FailureReason))
			exists := false
			for s := range possible {
				exists = exists || !s.absent
			}
			if !exists {
				missing("endpoint "+name, errors.New("exists after an acknowledged delete"))
			}
			continue
		}
		if !possible[got] {
			missing("endpoint "+name, fmt.Errorf("settled as %+v; the acknowledged writes allow %v", got, keys(possible)))
		}
	}
	for name, possible := range manifests {
		var o *jsm
		err := retried(ctx, func() error {
			var err error
			o, err = h.c.getJSM(ctx, name)
			return err
		})
		if err != nil {
			missing("manifest "+name, err)
			continue
		}
		got := int32(absentReplicas)
		if o != nil && o.Spec.Replicas != nil {
			got = *o.Spec.Replicas
		}
		if !possible[got] {
			missing("manifest "+name, fmt.Errorf("stored replicas %d; the acknowledged applies allow %v (-1: absent)", got, keys(possible)))
		}
	}
	return lost
}

func keys[K comparable](m map[K]bool) []K {
	out := make([]K, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// strayEngines compares the live server's engine processes with the
// instances its settled endpoints report: an engine no endpoint accounts for
// (a replica of a deleted endpoint or a retired generation left running) is
// an orphan too. The count is read again for a while, since a scale-in
// reports its count before the drained replica's process has exited.
func (h *harness) strayEngines(ctx context.Context) int {
	deadline := time.Now().Add(15 * time.Second)
	for {
		want, err := h.instances(ctx)
		if err != nil {
			h.t.Errorf("count instances: %v", err)
			return 0
		}
		pid, got := h.srv.pid(), 0
		for _, e := range engines(h.srv.dataDir) {
			if e.ppid == pid {
				got++
			}
		}
		if got <= want {
			return 0
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			h.t.Logf("the server runs %d engine processes; its endpoints account for %d instances", got, want)
			return got - want
		}
		sleep(ctx, 250*time.Millisecond)
	}
}

// instances sums CurrentInstanceCount over every endpoint's variants.
func (h *harness) instances(ctx context.Context) (int, error) {
	n := 0
	var next *string
	for {
		l, err := h.c.sm.ListEndpoints(ctx, &sm.ListEndpointsInput{MaxResults: aws.Int32(100), NextToken: next}, h.c.at())
		if err != nil {
			return 0, err
		}
		for _, e := range l.Endpoints {
			d, err := h.c.sm.DescribeEndpoint(ctx, &sm.DescribeEndpointInput{EndpointName: e.EndpointName}, h.c.at())
			if err != nil {
				return 0, err
			}
			for _, v := range d.ProductionVariants {
				n += int(aws.ToInt32(v.CurrentInstanceCount))
			}
		}
		if next = l.NextToken; next == nil {
			return n, nil
		}
	}
}
