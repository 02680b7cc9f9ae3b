//go:build linux

package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	sm "github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
)

// epState is what an endpoint looks like once it settles after a write.
type epState struct {
	absent bool
	config string
	count  int32
}

// absentReplicas marks a manifest that does not exist.
const absentReplicas = -1

// writes tracks every control-plane write and what may be stored after it:
// an acknowledged write replaces the possible states, an uncertain one (no
// answer: the server was killed) adds to them, a refused one changes nothing.
type writes struct {
	mu        sync.Mutex
	n         int
	models    []string         // acknowledged
	configs   map[string]int32 // acknowledged, with their instance count
	plans     []string         // acknowledged
	endpoints map[string]map[epState]bool
	deleting  map[string]bool // a DeleteEndpoint was sent
	manifests map[string]map[int32]bool
	jsmMade   int
	// acked hears of each acknowledged endpoint or manifest write (dropped
	// when nobody listens), so the killer can strike while it is in progress.
	acked chan string
}

func newWrites() *writes {
	return &writes{configs: map[string]int32{}, endpoints: map[string]map[epState]bool{},
		deleting: map[string]bool{}, manifests: map[string]map[int32]bool{}, acked: make(chan string)}
}

func (w *writes) tell(what string, o outcome) {
	if o != acked {
		return
	}
	select {
	case w.acked <- what:
	default:
	}
}

func (w *writes) name(prefix string) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.n++
	return fmt.Sprintf("%s-%d", prefix, w.n)
}

// endpoint applies the outcome of one write to the possible states of an endpoint.
func (w *writes) endpoint(ep string, o outcome, f func(epState) epState) {
	w.tell(ep, o)
	w.mu.Lock()
	defer w.mu.Unlock()
	cur := w.endpoints[ep]
	if cur == nil {
		cur = map[epState]bool{{absent: true}: true}
	}
	next := map[epState]bool{}
	switch o {
	case refused:
		// Kept: a refused create is checked to have left nothing.
		w.endpoints[ep] = cur
		return
	case uncertain:
		for s := range cur {
			next[s] = true
		}
	}
	for s := range cur {
		next[f(s)] = true
	}
	w.endpoints[ep] = next
}

func (w *writes) manifest(name string, o outcome, replicas int32) {
	w.tell(name, o)
	w.mu.Lock()
	defer w.mu.Unlock()
	cur := w.manifests[name]
	if cur == nil {
		cur = map[int32]bool{absentReplicas: true}
	}
	switch o {
	case refused:
		w.manifests[name] = cur
		return
	case acked:
		cur = map[int32]bool{}
	}
	cur[replicas] = true
	w.manifests[name] = cur
}

const (
	churnType  = "ml.g5.2xlarge" // churn endpoints
	loadType   = "ml.g5.xlarge"  // the SageMaker load endpoint
	jsmLoad    = "ml.g5.24xlarge"
	jsmChurn   = "ml.g5.8xlarge"
	maxLive    = 2 // churn endpoints alive at once
	maxJSMMade = 2 // churn manifests (the cluster has 2 ml.g5.8xlarge nodes)
)

var hfModels = []string{"meta-llama/Llama-3.1-8B-Instruct", "Qwen/Qwen2.5-7B-Instruct", "mistralai/Mistral-7B-Instruct-v0.3"}

// setup creates the two load endpoints and waits for them to serve.
func (h *harness) setup(ctx context.Context) {
	t := h.t
	for i, cfg := range []string{"load-a", "load-b"} {
		m := "load-m" + cfg[len(cfg)-1:]
		if err := h.createModel(ctx, m, hfModels[i]); err != nil {
			t.Fatal(err)
		}
		if err := h.createConfig(ctx, cfg, m, loadType, 2); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.createEndpoint(ctx, loadSM, "load-a"); err != nil {
		t.Fatal(err)
	}
	if err := h.c.applyJSM(ctx, loadJSM, jsmLoad, 2); err != nil {
		t.Fatal(err)
	}
	h.w.manifest(loadJSM, acked, 2)
	h.j.op("ApplyManifest", acked, true)
	for _, ep := range []string{loadSM, loadJSM} {
		deadline := time.Now().Add(90 * time.Second)
		for {
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			err := h.c.chat(rctx, ep, false)
			cancel()
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("load endpoint %s does not serve after 90s: %v (%s)", ep, err, h.describeLoad(ctx, ep))
			}
			sleep(ctx, 100*time.Millisecond)
		}
	}
}

// call runs one control-plane write, records it, and returns its outcome.
// describeLoad says where a load endpoint stands, for a setup failure: its
// SageMaker status and failure reason, or its manifest's state.
func (h *harness) describeLoad(ctx context.Context, ep string) string {
	if ep == loadJSM {
		j, err := h.c.getJSM(ctx, ep)
		if err != nil {
			return fmt.Sprintf("manifest: %v", err)
		}
		return fmt.Sprintf("manifest: %+v", j)
	}
	d, err := h.c.sm.DescribeEndpoint(ctx, &sm.DescribeEndpointInput{EndpointName: aws.String(ep)}, h.c.at())
	if err != nil {
		return fmt.Sprintf("DescribeEndpoint: %v", err)
	}
	return fmt.Sprintf("status %s, failure reason %q", d.EndpointStatus, aws.ToString(d.FailureReason))
}

func (h *harness) call(op string, fn func() error) (outcome, error) {
	return h.callAPI(op, true, fn)
}

// callAPI runs one control-plane call; an acknowledged write is counted.
func (h *harness) callAPI(op string, write bool, fn func() error) (outcome, error) {
	start := time.Now()
	err := fn()
	o := classify(err)
	h.j.op(op, o, write)
	if o != refused {
		// A refusal is an answer (a conflict, a full fleet), not a failure.
		h.j.request(op, start, err)
	}
	return o, err
}

func (h *harness) createModel(ctx context.Context, name, hf string) error {
	o, err := h.call("CreateModel", func() error {
		_, err := h.c.sm.CreateModel(ctx, &sm.CreateModelInput{ModelName: aws.String(name),
			PrimaryContainer: &smtypes.ContainerDefinition{Image: aws.String("capstan/sim"), Environment: map[string]string{"HF_MODEL_ID": hf}}}, h.c.at())
		return err
	})
	if o == acked {
		h.w.mu.Lock()
		h.w.models = append(h.w.models, name)
		h.w.mu.Unlock()
	}
	return err
}

func (h *harness) createConfig(ctx context.Context, name, model, instanceType string, count int32) error {
	o, err := h.call("CreateEndpointConfig", func() error {
		_, err := h.c.sm.CreateEndpointConfig(ctx, &sm.CreateEndpointConfigInput{EndpointConfigName: aws.String(name),
			ProductionVariants: []smtypes.ProductionVariant{{VariantName: aws.String("AllTraffic"), ModelName: aws.String(model),
				InstanceType: smtypes.ProductionVariantInstanceType(instanceType), InitialInstanceCount: aws.Int32(count)}}}, h.c.at())
		return err
	})
	if o == acked {
		h.w.mu.Lock()
		h.w.configs[name] = count
		h.w.mu.Unlock()
	}
	return err
}

func (h *harness) configCount(name string) int32 {
	h.w.mu.Lock()
	defer h.w.mu.Unlock()
	return h.w.configs[name]
}

func (h *harness) createEndpoint(ctx context.Context, name, cfg string) error {
	n := h.configCount(cfg)
	o, err := h.call("CreateEndpoint", func() error {
		_, err := h.c.sm.CreateEndpoint(ctx, &sm.CreateEndpointInput{EndpointName: aws.String(name), EndpointConfigName: aws.String(cfg)}, h.c.at())
		return err
	})
	h.w.endpoint(name, o, func(epState) epState { return epState{config: cfg, count: n} })
	return err
}

// pick returns a random element of xs.
func pick[T any](rng *rand.Rand, xs []T) (T, bool) {
	var zero T
	if len(xs) == 0 {
		return zero, false
	}
	return xs[rng.IntN(len(xs))], true
}

// churn lists the churn endpoints (not the load one) that may exist and
// were not sent a delete.
func (w *writes) churn() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for name, ss := range w.endpoints {
		if name == loadSM || w.deleting[name] {
			continue
		}
		for s := range ss {
			if !s.absent {
				out = append(out, name)
				break
			}
		}
	}
	sort.Strings(out)
	return out
}

func (w *writes) configsOf(instanceType string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for c := range w.configs {
		if strings.HasPrefix(c, "load-") == (instanceType == loadType) {
			out = append(out, c)
		}
	}
	sort.Strings(out)
	return out
}

// writer sends random control-plane writes until the deadline.
func (h *harness) writer(ctx context.Context, rng *rand.Rand, until time.Time) {
	for ctx.Err() == nil && time.Now().Before(until) {
		sleep(ctx, time.Duration(200+rng.IntN(600))*time.Millisecond)
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		h.write(rctx, rng)
		cancel()
	}
}

func (h *harness) write(ctx context.Context, rng *rand.Rand) {
	w := h.w
	switch rng.IntN(13) {
	case 0, 1:
		_ = h.createModel(ctx, w.name("m"), hfModels[rng.IntN(len(hfModels))])
	case 2, 3:
		w.mu.Lock()
		m, ok := pick(rng, w.models)
		w.mu.Unlock()
		if ok {
			_ = h.createConfig(ctx, w.name("c"), m, churnType, 1)
		}
	case 4, 5:
		if cfg, ok := pick(rng, w.configsOf(churnType)); ok && len(w.churn()) < maxLive {
			_ = h.createEndpoint(ctx, w.name("e"), cfg)
		}
	case 6:
		// Blue/green: the load endpoint between its two configs, or a churn one.
		ep, cfgs := loadSM, w.configsOf(loadType)
		if rng.IntN(2) == 0 {
			if e, ok := pick(rng, w.churn()); ok {
				ep, cfgs = e, w.configsOf(churnType)
			}
		}
		cfg, ok := pick(rng, cfgs)
		if !ok {
			return
		}
		n := h.configCount(cfg)
		o, _ := h.call("UpdateEndpoint", func() error {
			_, err := h.c.sm.UpdateEndpoint(ctx, &sm.UpdateEndpointInput{EndpointName: aws.String(ep), EndpointConfigName: aws.String(cfg)}, h.c.at())
			return err
		})
		w.endpoint(ep, o, func(s epState) epState {
			if s.absent {
				return s
			}
			return epState{config: cfg, count: n}
		})
	case 7, 8:
		// Rescale in place: the load endpoint keeps at least 2 instances so a
		// replica kill is covered by the gateway's retry.
		ep, n := loadSM, int32(2+rng.IntN(2))
		if rng.IntN(2) == 0 {
			if e, ok := pick(rng, w.churn()); ok {
				ep, n = e, int32(1+rng.IntN(2))
			}
		}
		o, _ := h.call("UpdateEndpointWeightsAndCapacities", func() error {
			_, err := h.c.sm.UpdateEndpointWeightsAndCapacities(ctx, &sm.UpdateEndpointWeightsAndCapacitiesInput{EndpointName: aws.String(ep),
				DesiredWeightsAndCapacities: []smtypes.DesiredWeightAndCapacity{{VariantName: aws.String("AllTraffic"), DesiredInstanceCount: aws.Int32(n)}}}, h.c.at())
			return err
		})
		w.endpoint(ep, o, func(s epState) epState {
			if s.absent {
				return s
			}
			return epState{config: s.config, count: n}
		})
	case 9:
		ep, ok := pick(rng, w.churn())
		if !ok {
			return
		}
		o, _ := h.call("DeleteEndpoint", func() error {
			_, err := h.c.sm.DeleteEndpoint(ctx, &sm.DeleteEndpointInput{EndpointName: aws.String(ep)}, h.c.at())
			return err
		})
		if o != refused {
			w.mu.Lock()
			w.deleting[ep] = true
			w.mu.Unlock()
		}
		w.endpoint(ep, o, func(epState) epState { return epState{absent: true} })
	case 10:
		h.buyPlan(ctx, w.name("plan"))
	default:
		// Manifests: change the load deployment's replicas, or create one.
		w.mu.Lock()
		create := w.jsmMade < maxJSMMade && rng.IntN(3) == 0
		if create {
			w.jsmMade++
		}
		w.mu.Unlock()
		name, typ, n := loadJSM, jsmLoad, int32(1+rng.IntN(2))
		if create {
			name, typ, n = w.name("jsm"), jsmChurn, 1
		}
		o, _ := h.call("ApplyManifest", func() error { return h.c.applyJSM(ctx, name, typ, n) })
		w.manifest(name, o, n)
	}
}

// buyPlan searches a training plan offering and buys it.
func (h *harness) buyPlan(ctx context.Context, name string) {
	var offering *string
	o, _ := h.callAPI("SearchTrainingPlanOfferings", false, func() error {
		now := time.Now()
		s, err := h.c.sm.SearchTrainingPlanOfferings(ctx, &sm.SearchTrainingPlanOfferingsInput{
			TargetResources: []smtypes.SageMakerResourceName{"endpoint"}, InstanceType: "ml.p5.48xlarge",
			InstanceCount: aws.Int32(1), DurationHours: aws.Int64(24), StartTimeAfter: aws.Time(now.Add(time.Hour)),
			EndTimeBefore: aws.Time(now.Add(90 * 24 * time.Hour))}, h.c.at())
		if err == nil && len(s.TrainingPlanOfferings) > 0 {
			offering = s.TrainingPlanOfferings[0].TrainingPlanOfferingId
		}
		return err
	})
	if o != acked || offering == nil {
		return
	}
	o, _ = h.call("CreateTrainingPlan", func() error {
		_, err := h.c.sm.CreateTrainingPlan(ctx, &sm.CreateTrainingPlanInput{TrainingPlanName: aws.String(name), TrainingPlanOfferingId: offering}, h.c.at())
		return err
	})
	if o == acked {
		h.w.mu.Lock()
		h.w.plans = append(h.w.plans, name)
		h.w.mu.Unlock()
	}
}
