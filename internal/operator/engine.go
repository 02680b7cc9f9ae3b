package operator

import (
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/capstan-dev/capstan/internal/catalog"
	"github.com/capstan-dev/capstan/internal/engines"
	"github.com/capstan-dev/capstan/internal/manifest"
	apiv1 "github.com/capstan-dev/capstan/internal/operator/apis/v1"
	"github.com/capstan-dev/capstan/internal/runtime"
)

// What the engine mapping adds to a pod (docs/operator.md, "Engines in
// pods: the vLLM mapping").
const (
	// KVEventsPort is the model container's KV events publisher
	// (apiv1.KVEventsPortName): vLLM's default endpoint tcp://*:5557
	// (KVEventsConfig).
	KVEventsPort = 5557
	// LMCacheChunkSize is LMCACHE_CHUNK_SIZE, which engines.LMCacheEnv
	// writes down in the pod as in the local runtime's vLLM replicas.
	LMCacheChunkSize = engines.LMCacheChunkSize
	// DefaultL1Bytes is the L1 size when neither l1CacheSize, a memory
	// request nor a known instance type gives one: LMCache's default
	// max_local_cpu_size of 5 GB.
	DefaultL1Bytes = 5 << 30
	// TieredStoragePath is the node directory (a hostPath) the simulated
	// engine keeps its tieredstorage tier in, shared by the replicas on a
	// node as on `capstan serve`.
	TieredStoragePath = "/var/lib/capstan/tieredstorage"
	// HyperPodTieredStoragePort is the port of HyperPod's tiered storage
	// daemon on each node, which LMCache reaches as
	// sagemaker-hyperpod://<node IP>:9200.
	HyperPodTieredStoragePort = 9200
	tieredStorageVolume       = "capstan-tieredstorage"
)

// engineInputs are the manifest fields the engine mapping reads.
type engineInputs struct {
	kv      *manifest.KVCacheSpec
	routing *manifest.IntelligentRoutingSpec
	// model names the model in the KV events topic when the engine's args
	// name none.
	model string
	// instanceType is where replicas run ("" when unknown), for the
	// default L1 and tieredstorage sizes.
	instanceType string
}

// routingOn reports whether the manifest asks for intelligent routing.
func (in engineInputs) routingOn() bool {
	return in.routing != nil && in.routing.Enabled != nil && *in.routing.Enabled
}

// kvEventsOn reports whether the router reads the engines' KV events: the
// kvaware strategy only (prefixaware hashes prompts itself, session and
// roundrobin ignore the cache).
func (in engineInputs) kvEventsOn() bool {
	return in.routingOn() && in.routing.RoutingStrategy == manifest.RoutingKVAware
}

// engineAdapter is the adapter of internal/engines (the table the local
// runtime starts every replica from) whose flags the model container gets,
// and whether the container selected it (known):
//   - capstan's simulated engine when the args run `engine sim`: the
//     capstan image (a JumpStartModel's, --model-image), which no image
//     pattern names;
//   - else the adapter the image selects, engines.ForImage, as `capstan
//     serve` picks a replica's engine;
//   - else vLLM, not known: an image the table does not know (a custom
//     vLLM build, the AWS vLLM DLC) is taken to be vLLM-based, as the
//     reference's kvCacheSpec and intelligentRoutingSpec require.
func engineAdapter(c *corev1.Container) (a *engines.Adapter, known bool) {
	if isSimEngine(c) {
		return engines.MustByName(engines.Sim), true
	}
	if a, err := engines.ForImage(c.Image); err == nil {
		return a, true
	}
	return engines.MustByName(engines.VLLM), false
}

// readinessPath is the readiness probe's path: the manifest's
// loadBalancer.healthCheckPath when it names another than the default
// (/ping, which defaulting writes into every manifest), else the engine's
// own health route (the adapter's HealthPath, 200 once the model is
// loaded, which the local runtime waits on too), else /ping for an image
// the adapter table does not know.
func readinessPath(lbPath string, a *engines.Adapter, known bool) string {
	if lbPath != "" && lbPath != manifest.DefaultHealthCheckPath {
		return lbPath
	}
	if known && a.HealthPath != "" {
		return a.HealthPath
	}
	return manifest.DefaultHealthCheckPath
}

// isSimEngine reports whether the container runs capstan's simulated engine:
// its arguments (after the command) start `engine sim`, as the capstan
// image's JumpStartModel pods do, or the command is capstan itself.
func isSimEngine(c *corev1.Container) bool {
	all := append(slices.Clone(c.Command), c.Args...)
	if len(all) > 0 && filepath.Base(all[0]) == "capstan" {
		all = all[1:]
	}
	return len(all) >= 2 && all[0] == "engine" && all[1] == "sim"
}

// configureEngine adds to the model container the flags and environment
// that make its engine, a (engineAdapter), serve kvCacheSpec and
// intelligentRoutingSpec: vLLM's flags and LMCache's environment for vLLM
// (and images the adapter table does not know), `capstan engine sim`'s
// flags for capstan's own. A flag the manifest's args already set and an
// environment variable it already names are left as the manifest has them.
// Engines without KV events or KV tiers (SGLang, TGI, llama.cpp) get
// nothing: as under `capstan serve`, kvCacheSpec has no effect on them and
// kvaware routing has no events to read, where vLLM's flags would stop them
// starting.
func configureEngine(c *corev1.Container, pod *corev1.PodSpec, a *engines.Adapter, in engineInputs) {
	if in.kv == nil && !in.routingOn() {
		return
	}
	switch a.Name {
	case engines.Sim:
		simEngine(c, pod, in)
	case engines.VLLM:
		vllmEngine(c, a, in)
	default:
		return
	}
	if in.kvEventsOn() && a.KVEvents && !slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == apiv1.KVEventsPortName }) {
		c.Ports = append(c.Ports, corev1.ContainerPort{Name: apiv1.KVEventsPortName, ContainerPort: KVEventsPort, Protocol: corev1.ProtocolTCP})
	}
}

// lmcacheOn reports whether the spec asks for any tier LMCache serves.
func lmcacheOn(kv *manifest.KVCacheSpec) bool {
	return kv != nil && (kv.L1On() || kv.L2On() || kv.CacheConfigFile != "")
}

// vllmPrefixCachingFlag turns on vLLM's prefix cache. Only the operator
// sets it (as the reference does for kvCacheSpec and routing); the local
// runtime leaves vLLM's default, which is on.
const vllmPrefixCachingFlag = "--enable-prefix-caching"

// vllmEngine patches a vLLM container's args and environment. The flags,
// the KV events config and LMCache's environment come from a, the vLLM
// adapter the local runtime starts vLLM with (engines.VLLMFlag*,
// engines.VLLMKVEventsConfig, engines.LMCacheEnv); what is the operator's
// own is which manifest field turns each on, the L1 size, HyperPod's
// tiered storage daemon, cacheConfigFile, and the topic naming the pod.
func vllmEngine(c *corev1.Container, a *engines.Adapter, in engineInputs) {
	kv := in.kv
	if kv != nil || in.routingOn() {
		addFlag(c, vllmPrefixCachingFlag, "")
	}
	if lmcacheOn(kv) && a.TieredKV {
		addFlag(c, engines.VLLMFlagKVTransferConfig, engines.VLLMLMCacheTransferConfig)
		if kv.CacheConfigFile != "" {
			// The reference: the file, when set, overrides the other fields.
			addEnv(c, corev1.EnvVar{Name: "LMCACHE_CONFIG_FILE", Value: kv.CacheConfigFile})
		} else {
			var tiers runtime.KVTiers
			if kv.L1On() {
				tiers.CPUBytes = l1Bytes(c, in)
			}
			switch kv.L2Backend() {
			case manifest.L2BackendRedis:
				tiers.RedisURL = kv.L2CacheSpec.L2CacheLocalURL
			case manifest.L2BackendTieredStorage:
				// HyperPod's tiered storage daemon on the pod's node, which
				// LMCache reaches as a remote backend (as it does Redis);
				// NODE_IP comes first so Kubernetes expands $(NODE_IP).
				addEnv(c, fieldEnv("NODE_IP", "status.hostIP"))
				tiers.RedisURL = "sagemaker-hyperpod://$(NODE_IP):" + strconv.Itoa(HyperPodTieredStoragePort)
			}
			env := engines.LMCacheEnv(tiers)
			for _, k := range slices.Sorted(maps.Keys(env)) {
				addEnv(c, corev1.EnvVar{Name: k, Value: env[k]})
			}
		}
	}
	if in.kvEventsOn() && a.KVEvents {
		addEnv(c, fieldEnv("POD_IP", "status.podIP"))
		topic := "kv@$(POD_IP)@" + servedName(c, in.model, engines.VLLMFlagServedModelName, "--model")
		addFlag(c, engines.VLLMFlagKVEventsConfig, engines.VLLMKVEventsConfig(kvEventsBindEndpoint(), topic))
	}
}

// kvEventsBindEndpoint is where the engine in a pod publishes KV events:
// every interface (vLLM binds an endpoint holding "*"), on KVEventsPort.
func kvEventsBindEndpoint() string { return "tcp://*:" + strconv.Itoa(KVEventsPort) }

func simEngine(c *corev1.Container, pod *corev1.PodSpec, in engineInputs) {
	kv := in.kv
	if kv.L1On() {
		addFlag(c, "--cpu-cache-bytes", strconv.FormatInt(l1Bytes(c, in), 10))
	}
	switch kv.L2Backend() {
	case manifest.L2BackendRedis:
		addFlag(c, "--shared-cache", kv.L2CacheSpec.L2CacheLocalURL)
	case manifest.L2BackendTieredStorage:
		if n := tieredBytes(kv, in.instanceType); n > 0 && !hasFlag(c.Args, "--tiered-storage-dir") {
			addFlag(c, "--tiered-storage-dir", TieredStoragePath)
			addFlag(c, "--tiered-storage-bytes", strconv.FormatInt(n, 10))
			hostPath := corev1.HostPathDirectoryOrCreate
			pod.Volumes = append(pod.Volumes, corev1.Volume{Name: tieredStorageVolume,
				VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: TieredStoragePath, Type: &hostPath}}})
			c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: tieredStorageVolume, MountPath: TieredStoragePath})
		}
	}
	if in.kvEventsOn() {
		addEnv(c, fieldEnv("POD_IP", "status.podIP"))
		addFlag(c, "--kv-events", kvEventsBindEndpoint())
		// The simulated engine's own topic format, kv@HOST:PORT@MODEL, with
		// the pod's address in place of the 0.0.0.0 it listens on.
		name := servedName(c, in.model, "--served-model-name", "--model")
		topic := "kv@$(POD_IP)@" + name
		if p := flagValue(c.Args, "--port"); p != "" {
			topic = "kv@$(POD_IP):" + p + "@" + name
		}
		addFlag(c, "--kv-events-topic", topic)
	}
}

// l1Bytes is a replica's L1 size, as `capstan serve` sizes it: l1CacheSize,
// else the container's memory request, else half its share (by GPUs) of
// the instance type's memory, else DefaultL1Bytes.
func l1Bytes(c *corev1.Container, in engineInputs) int64 {
	if n, err := in.kv.L1CacheSize.Bytes(); in.kv.L1CacheSize != "" && err == nil && n > 0 {
		return n
	}
	if q, ok := c.Resources.Requests[corev1.ResourceMemory]; ok && q.Value() > 0 {
		return q.Value()
	}
	it, err := catalog.Default().InstanceType(in.instanceType)
	if in.instanceType == "" || err != nil || it.MemoryGiB == 0 {
		return DefaultL1Bytes
	}
	gpus := int64(1)
	if q, ok := c.Resources.Requests[manifest.ResourceGPU]; ok && q.Value() > 0 {
		gpus = q.Value()
	}
	share := min(float64(gpus)/float64(max(it.GPUCount, 1)), 1)
	return int64(float64(int64(it.MemoryGiB)<<30) / 2 * share)
}

// tieredBytes is the model's tieredstorage budget on a node: l2CacheSize,
// else the instance type's default (0 when it has no local storage or is
// unknown).
func tieredBytes(kv *manifest.KVCacheSpec, instanceType string) int64 {
	if n, err := kv.L2CacheSpec.L2CacheSize.Bytes(); kv.L2CacheSpec.L2CacheSize != "" && err == nil {
		return n
	}
	it, err := catalog.Default().InstanceType(instanceType)
	if instanceType == "" || err != nil {
		return 0
	}
	return manifest.DefaultTieredStorageBytes(it)
}

// servedName is the model name the engine serves: the value of the first
// of flags (its served-model-name flag, then its model flag) the args set,
// else the manifest's.
func servedName(c *corev1.Container, fallback string, flags ...string) string {
	for _, f := range flags {
		if v := flagValue(c.Args, f); v != "" {
			return v
		}
	}
	return fallback
}

// hasFlag reports whether args set flag, as `--flag value`, `--flag=value`
// or vLLM's negation `--no-flag` (which the mapping must not contradict).
func hasFlag(args []string, flag string) bool {
	neg := "--no-" + strings.TrimPrefix(flag, "--")
	return slices.ContainsFunc(args, func(a string) bool { return a == flag || a == neg || strings.HasPrefix(a, flag+"=") })
}

// flagValue is flag's value in args ("" when unset).
func flagValue(args []string, flag string) string {
	for i, a := range args {
		if v, ok := strings.CutPrefix(a, flag+"="); ok {
			return v
		}
		if a == flag && i+1 < len(args) && !strings.HasPrefix(args[i+1], "--") {
			return args[i+1]
		}
	}
	return ""
}

// addFlag appends --flag=value (or a bare --flag for value "") unless the
// args set it already.
func addFlag(c *corev1.Container, flag, value string) {
	if hasFlag(c.Args, flag) {
		return
	}
	if value == "" {
		c.Args = append(c.Args, flag)
		return
	}
	c.Args = append(c.Args, flag+"="+value)
}

// addEnv appends e unless the container names it already.
func addEnv(c *corev1.Container, e corev1.EnvVar) {
	if !slices.ContainsFunc(c.Env, func(x corev1.EnvVar) bool { return x.Name == e.Name }) {
		c.Env = append(c.Env, e)
	}
}

func fieldEnv(name, path string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}}
}

// iecInstanceType is the instance type an IEC's replicas run on for sizing
// defaults: instanceType, else the first of instanceTypes ("" with only a
// nodeAffinity).
func iecInstanceType(s *manifest.InferenceEndpointConfigSpec) string {
	if s.InstanceType != "" || len(s.InstanceTypes) == 0 {
		return s.InstanceType
	}
	return s.InstanceTypes[0]
}
