package deployment

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/capstan-dev/capstan/internal/catalog"
	"github.com/capstan-dev/capstan/internal/cluster"
	"github.com/capstan-dev/capstan/internal/engines"
	"github.com/capstan-dev/capstan/internal/manifest"
	"github.com/capstan-dev/capstan/internal/serving"
)

// VariantName is the one production variant a manifest deployment has.
const VariantName = "AllTraffic"

// plan is what the controller needs from a manifest, in capstan's own terms.
type plan struct {
	kind, namespace, name string
	// route is the gateway route (and SageMaker endpoint, when endpointName
	// is set) name.
	route        string
	endpointName string
	// cluster is the HyperPod cluster the replicas run on.
	cluster string
	// instanceTypes in preference order; empty means any type in the cluster.
	instanceTypes []string
	req           cluster.Resources
	// gpus is the tensor-parallel degree; 0 means all GPUs of the instance
	// type the replica lands on (JumpStartModel).
	gpus      int
	modelHint string // catalog id or alias from the manifest, when it names one
	env       map[string]string
	strategy  string
	// rollout replaces the replicas when the template changes (the
	// capstan.dev/rollout-* annotations).
	rollout serving.RollingStrategy
	kvaware bool
	l1      bool
	l2URL   string
	// l1Size is kvCacheSpec.l1CacheSize in bytes (0: the default, l1Bytes).
	l1Size int64
	// tiered switches the tieredstorage tier on; l2Size is the model's
	// budget per node from l2CacheSize (0: manifest.DefaultTieredStorageBytes).
	tiered     bool
	l2Size     int64
	replicas   int
	autoscale  *manifest.AutoScalingSpec
	maxDeploy  time.Duration
	invocation string // IEC invocationEndpoint; "" for JSM
	// maxConcurrent and maxQueue are the worker's per-replica request
	// limits (0 = none); the gateway enforces them for the route as a whole.
	maxConcurrent, maxQueue int
	// warnings are the manifest's ignored fields (manifest.IgnoredFields),
	// one Warning event each per generation.
	warnings []string
	// engine is the adapter replicas run (worker.image through
	// engines.Machine.Choose), format the model folder it loads, and
	// engineWarnings what the engine changes or cannot do, one Warning
	// event each per generation.
	engine         string
	format         engines.ModelFormat
	engineWarnings []engineWarning
}

// engineWarning is a Warning event about the engine a deployment runs.
type engineWarning struct{ reason, message string }

// Reasons of engine warnings.
const (
	// ReasonEngineSimulated: the image's engine is not installed, or a
	// JumpStart model's weights are not here, and the simulator stands in.
	ReasonEngineSimulated = "EngineSimulated"
	// ReasonKVEventsUnsupported: kvaware routing asked of an engine that
	// publishes no KV events; prefixaware routes instead.
	ReasonKVEventsUnsupported = "KVEventsUnsupported"
	// ReasonKVTiersUnsupported: KV tiers asked of an engine without them.
	ReasonKVTiersUnsupported = "KVTiersUnsupported"
	// ReasonModelTooLarge: the fetched model's weight files fit none of
	// the deployment's instance types.
	ReasonModelTooLarge = "ModelTooLarge"
)

// owner is how the SageMaker registration names the manifest.
func (p *plan) owner() string { return p.kind + "/" + p.namespace + "/" + p.name }

// planFor reads obj into a plan; installed says which real engines this
// machine has.
func planFor(obj manifest.Object, installed engines.Machine) (*plan, error) {
	m := obj.GetMeta()
	p := &plan{kind: obj.GetKind(), namespace: m.Namespace, name: m.Name, env: map[string]string{}, cluster: manifest.ClusterOf(m),
		rollout: rolloutOf(manifest.RollingUpdateOf(m))}
	image := ""
	if iec, ok := obj.(*manifest.InferenceEndpointConfig); ok && iec.Spec.Worker != nil {
		image = iec.Spec.Worker.Image
	}
	if p.cluster == "" {
		p.cluster = cluster.DefaultName
	}
	var kvs *manifest.KVCacheSpec
	var ir *manifest.IntelligentRoutingSpec
	var lb *manifest.LoadBalancer
	switch o := obj.(type) {
	case *manifest.InferenceEndpointConfig:
		s := &o.Spec
		p.endpointName = s.EndpointName
		p.modelHint = s.ModelName
		p.invocation = s.InvocationEndpoint
		if s.InstanceType != "" {
			p.instanceTypes = []string{s.InstanceType}
		} else {
			p.instanceTypes = append([]string(nil), s.InstanceTypes...)
		}
		if s.Worker != nil {
			if r := s.Worker.Resources; r != nil {
				req, gpus, err := requests(r)
				if err != nil {
					return nil, err
				}
				p.req, p.gpus = req, gpus
			}
			if rl := s.Worker.RequestLimits; rl != nil {
				p.maxConcurrent = int(deref(rl.MaxConcurrentRequests, 0))
				p.maxQueue = int(deref(rl.MaxQueueSize, 0))
			}
			for _, e := range s.Worker.EnvironmentVariables {
				if len(e.ValueFrom) > 0 {
					continue // not set; manifest.IgnoredFields warns
				}
				p.env[e.Name] = e.Value
			}
		}
		p.replicas = int(deref(s.Replicas, manifest.DefaultReplicas))
		p.autoscale = s.AutoScalingSpec
		p.maxDeploy = time.Duration(deref(s.MaxDeployTimeInSeconds, manifest.DefaultMaxDeployTimeSeconds)) * time.Second
		kvs, ir, lb = s.KVCacheSpec, s.IntelligentRoutingSpec, s.LoadBalancer
	case *manifest.JumpStartModel:
		s := &o.Spec
		if s.SageMakerEndpoint != nil {
			p.endpointName = s.SageMakerEndpoint.Name
		}
		if s.Model != nil {
			p.modelHint = s.Model.ModelID
		}
		if s.Server != nil {
			p.instanceTypes = []string{s.Server.InstanceType}
			p.req.MIGProfile = s.Server.MIGProfile()
		}
		for _, e := range s.EnvironmentVariables {
			p.env[e.Name] = e.Value
		}
		p.replicas = int(deref(s.Replicas, manifest.DefaultReplicas))
		p.autoscale = s.AutoScalingSpec
		p.maxDeploy = time.Duration(deref(s.MaxDeployTimeInSeconds, manifest.DefaultMaxDeployTimeSeconds)) * time.Second
		kvs, ir, lb = s.KVCacheSpec, s.IntelligentRoutingSpec, s.LoadBalancer
	default:
		return nil, fmt.Errorf("%w: %T", ErrUnknownKind, obj)
	}
	p.route = p.endpointName
	if p.route == "" {
		p.route = p.name
	}
	if kvs != nil {
		if err := p.kvCache(kvs); err != nil {
			return nil, err
		}
	}
	// Every accepted field without effect here, from the one table that
	// describe and apply also use.
	p.warnings = manifest.IgnoredFieldMessages(obj)
	switch {
	case ir != nil && ir.Enabled != nil && *ir.Enabled:
		p.strategy = ir.RoutingStrategy
		if p.strategy == "" {
			p.strategy = manifest.RoutingPrefixAware
		}
		p.kvaware = p.strategy == manifest.RoutingKVAware
	case lb != nil && lb.RoutingAlgorithm == manifest.LBRoundRobin:
		p.strategy = manifest.RoutingRoundRobin
	default:
		p.strategy = "LEAST_OUTSTANDING_REQUESTS"
	}
	if p.kind == manifest.KindJumpStartModel {
		p.jumpStartEngine()
		return p, nil
	}
	if err := p.chooseEngine(image, installed); err != nil {
		return nil, err
	}
	return p, nil
}

// jumpStartEngine names the engine JumpStart would serve the model in (its
// default container for the hub id) and runs the simulator, saying why:
// capstan knows a JumpStart model's architecture, not its weights, which
// live in AWS's JumpStart buckets, so no real engine could load it here.
func (p *plan) jumpStartEngine() {
	image := catalog.JumpStartImage(p.modelHint)
	title := image
	if a, err := engines.ForImage(image); err == nil {
		title = a.Title
	}
	p.engine, p.format = engines.Sim, engines.FormatHF
	p.engineWarnings = append(p.engineWarnings, engineWarning{ReasonEngineSimulated, fmt.Sprintf(
		"JumpStart serves %s in %s (%s); capstan has the model's architecture but not its weights, which are in AWS's JumpStart buckets, so its simulated engine serves it: to serve real weights, deploy them with an InferenceEndpointConfig whose modelSourceConfig holds them",
		p.modelHint, title, image)})
}

// chooseEngine picks the engine for image and adapts the plan to it:
// kvaware routing needs KV events, KV tiers need an engine that has them.
func (p *plan) chooseEngine(image string, installed engines.Machine) error {
	ch, err := installed.Choose(image)
	if err != nil {
		return fmt.Errorf("spec.worker.image: %w", err)
	}
	p.engine, p.format = ch.Engine, engines.FormatHF
	if ch.Note != "" {
		p.engineWarnings = append(p.engineWarnings, engineWarning{ReasonEngineSimulated, ch.Note})
	}
	a := engines.MustByName(ch.Engine)
	p.format = a.Format
	if p.kvaware && !a.KVEvents {
		p.kvaware, p.strategy = false, manifest.RoutingPrefixAware
		p.engineWarnings = append(p.engineWarnings, engineWarning{ReasonKVEventsUnsupported,
			fmt.Sprintf("%s publishes no KV cache events: kvaware routing falls back to prefixaware", a.Title)})
	}
	if (p.l1 || p.tiered || p.l2URL != "") && !a.TieredKV {
		p.l1, p.tiered, p.l2URL, p.l1Size, p.l2Size = false, false, "", 0, 0
		p.engineWarnings = append(p.engineWarnings, engineWarning{ReasonKVTiersUnsupported,
			fmt.Sprintf("%s has no KV cache tiers below the GPU: spec.kvCacheSpec has no effect", a.Title)})
	}
	return nil
}

// kvCache reads the KV tiers of kvs (validated: a size that does not
// parse here is a defect of validation, reported as an invalid spec).
func (p *plan) kvCache(kvs *manifest.KVCacheSpec) error {
	p.l1 = kvs.L1On()
	if p.l1 && kvs.L1CacheSize != "" {
		n, err := kvs.L1CacheSize.Bytes()
		if err != nil {
			return fmt.Errorf("spec.kvCacheSpec.l1CacheSize: %w", err)
		}
		p.l1Size = n
	}
	switch kvs.L2Backend() {
	case manifest.L2BackendRedis:
		p.l2URL = kvs.L2CacheSpec.L2CacheLocalURL
	case manifest.L2BackendTieredStorage:
		p.tiered = true
		if q := kvs.L2CacheSpec.L2CacheSize; q != "" {
			n, err := q.Bytes()
			if err != nil {
				return fmt.Errorf("spec.kvCacheSpec.l2CacheSpec.l2CacheSize: %w", err)
			}
			p.l2Size = n
		}
	}
	return nil
}

func deref(p *int32, def int32) int32 {
	if p == nil {
		return def
	}
	return *p
}

// requests reads a worker's resource requests (limits when a request is
// absent, as Kubernetes defaults requests from limits) and its GPU count.
func requests(r *manifest.ResourceRequirements) (cluster.Resources, int, error) {
	get := func(name string) (float64, error) {
		q, ok := r.Requests[name]
		if !ok {
			q, ok = r.Limits[name]
		}
		if !ok {
			return 0, nil
		}
		v, err := q.Value()
		if err != nil {
			return 0, fmt.Errorf("spec.worker.resources %s: %w", name, err)
		}
		return v, nil
	}
	out := cluster.Resources{MIGProfile: manifest.MIGProfileOf(r)}
	cpu, err := get(manifest.ResourceCPU)
	if err != nil {
		return out, 0, err
	}
	mem, err := get(manifest.ResourceMemory)
	if err != nil {
		return out, 0, err
	}
	gpu, err := get(manifest.ResourceGPU)
	if err != nil {
		return out, 0, err
	}
	out.MilliCPU = int64(math.Ceil(cpu * 1000))
	out.MemoryBytes = int64(math.Ceil(mem))
	out.GPUs = int(gpu)
	return out, out.GPUs, nil
}

// request is what one replica asks of a node of instance type it: one
// slice of the plan's MIG profile (no whole GPU), or its GPUs.
func (p *plan) request(it catalog.InstanceType) cluster.Resources {
	r := p.req
	if p.kind == manifest.KindJumpStartModel && r.MIGProfile == "" {
		// A JumpStart server takes the whole instance, as on SageMaker.
		r.GPUs = it.GPUCount
	}
	return r
}

// tensorParallel is the number of GPUs a replica on it spans; a replica on
// a MIG slice spans none but runs as one rank.
func (p *plan) tensorParallel(it catalog.InstanceType) int {
	if p.req.MIGProfile != "" {
		return 1
	}
	if p.kind == manifest.KindJumpStartModel {
		return max(it.GPUCount, 1)
	}
	return max(p.gpus, 1)
}

// l1Bytes sizes the CPU KV tier: l1CacheSize, else the worker's memory
// request, else its share (by GPUs) of half the instance's memory.
func (p *plan) l1Bytes(it catalog.InstanceType) int64 {
	if p.l1Size > 0 {
		return p.l1Size
	}
	if p.req.MemoryBytes > 0 {
		return p.req.MemoryBytes
	}
	share := float64(p.tensorParallel(it)) / float64(max(it.GPUCount, 1))
	return int64(float64(int64(it.MemoryGiB)<<30) / 2 * min(share, 1))
}

// tieredBytes is the model's tieredstorage budget on a node of it:
// l2CacheSize, else the cluster's default (defaultTiered).
func (c *Controller) tieredBytes(p *plan, it catalog.InstanceType) int64 {
	if p.l2Size > 0 {
		return p.l2Size
	}
	b, _ := c.defaultTiered(p.cluster, it)
	return b
}

// defaultTiered is the tieredstorage budget of a tier without l2CacheSize
// on a node of it in cluster: the cluster's share of the node's memory when
// its tiered storage is on, else manifest.DefaultTieredStorageBytes (0
// without local storage). on says which.
func (c *Controller) defaultTiered(cluster string, it catalog.InstanceType) (bytes int64, on bool) {
	if c.o.TieredStorage != nil {
		if pct, ok := c.o.TieredStorage(cluster); ok && pct > 0 {
			return int64(it.MemoryGiB) << 30 * int64(pct) / 100, true
		}
	}
	return manifest.DefaultTieredStorageBytes(it), false
}

// template is everything that, when it changes, needs new replicas (a
// rollout); replica count, autoscaling and routing do not.
type template struct {
	InstanceTypes []string          `json:"instanceTypes"`
	Req           cluster.Resources `json:"req"`
	GPUs          int               `json:"gpus"`
	Env           map[string]string `json:"env"`
	// KVAware no longer changes the replica (every replica publishes KV
	// events) but stays, so hashes in stored records stay valid: a changed
	// hash rolls out every replica.
	KVAware  bool   `json:"kvaware"`
	L1       bool   `json:"l1"`
	L2       string `json:"l2"`
	Model    string `json:"model"`
	ModelDir string `json:"modelDir"`
	Route    string `json:"route"`
	// The KV sizes and tieredstorage came later: omitted when unset, so
	// the hashes of records written before them stay valid.
	L1Size int64 `json:"l1Size,omitempty"`
	Tiered bool  `json:"tiered,omitempty"`
	L2Size int64 `json:"l2Size,omitempty"`
	// Engine is the adapter (worker.image's) when it is not the
	// simulator: a new image that picks another engine rolls out, and the
	// hashes of simulated deployments' records stay valid.
	Engine string `json:"engine,omitempty"`
}

func (p *plan) templateHash(model, dir string) string {
	t := template{InstanceTypes: p.instanceTypes, Req: p.req, GPUs: p.gpus, Env: p.env, KVAware: p.kvaware,
		L1: p.l1, L2: p.l2URL, Model: model, ModelDir: dir, Route: p.route, L1Size: p.l1Size, Tiered: p.tiered, L2Size: p.l2Size}
	if p.engine != engines.Sim {
		t.Engine = p.engine
	}
	b, _ := json.Marshal(t) // maps marshal in key order: stable
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// kindShort abbreviates a kind in replica ids.
func kindShort(kind string) string {
	if kind == manifest.KindJumpStartModel {
		return "jsm"
	}
	return "iec"
}

// replicaID is unique per object, template revision and index, and safe as
// a log file name: "iec.default.demo.r2.0".
func replicaID(kind, namespace, name string, rev, idx int) string {
	base := kindShort(kind) + "." + namespace + "." + name
	if len(base) > 150 {
		sum := sha256.Sum256([]byte(base))
		base = base[:140] + "-" + hex.EncodeToString(sum[:4])
	}
	return fmt.Sprintf("%s.r%d.%d", base, rev, idx)
}

// sortedEnvKeys lists env keys in order, for stable specs.
func sortedEnvKeys(m map[string]string) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// rolloutOf is the rolling update the annotations ask for: a batch of new
// replicas at a time (all of them by default), each batch serving for the
// wait before the next starts. When new replicas find no room, old ones
// retire one at a time to make it.
func rolloutOf(ru manifest.RollingUpdate) serving.RollingStrategy {
	batch := serving.Size{Unit: serving.Percent, Value: 100}
	switch {
	case ru.Batch > 0 && ru.BatchPercent:
		batch.Value = ru.Batch
	case ru.Batch > 0:
		batch = serving.Size{Unit: serving.Instances, Value: ru.Batch}
	}
	return serving.RollingStrategy{Batch: batch, Wait: ru.Wait, MakeRoom: 1}
}
