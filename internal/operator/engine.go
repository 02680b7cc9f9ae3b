package operator

import (
	"encoding/json"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/capstan-dev/capstan/internal/catalog"
	"github.com/capstan-dev/capstan/internal/manifest"
)

// What the engine mapping adds to a pod (docs/operator.md, "Engines in
// pods: the vLLM mapping").
const (
	// KVEventsPortName and KVEventsPort are the model container's KV events
	// publisher: vLLM's default endpoint tcp://*:5557 (KVEventsConfig).
	KVEventsPortName = "kv-events"
	KVEventsPort     = 5557
	// LMCacheChunkSize is LMCACHE_CHUNK_SIZE: LMCache's own default (256
	// tokens), set so the chunk the router and the cache agree on is
	// written down in the pod.
	LMCacheChunkSize = 256
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
// that make its engine serve kvCacheSpec and intelligentRoutingSpec: vLLM's
// flags and LMCache's environment for any image, or `capstan engine sim`'s
// flags for capstan's own. A flag the manifest's args already set and an
// environment variable it already names are left as the manifest has them.
func configureEngine(c *corev1.Container, pod *corev1.PodSpec, in engineInputs) {
	if in.kv == nil && !in.routingOn() {
		return
	}
	if isSimEngine(c) {
		simEngine(c, pod, in)
	} else {
		vllmEngine(c, in)
	}
	if in.kvEventsOn() && !slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == KVEventsPortName }) {
		c.Ports = append(c.Ports, corev1.ContainerPort{Name: KVEventsPortName, ContainerPort: KVEventsPort, Protocol: corev1.ProtocolTCP})
	}
}

// lmcacheOn reports whether the spec asks for any tier LMCache serves.
func lmcacheOn(kv *manifest.KVCacheSpec) bool {
	return kv != nil && (kv.L1On() || kv.L2On() || kv.CacheConfigFile != "")
}

func vllmEngine(c *corev1.Container, in engineInputs) {
	kv := in.kv
	if kv != nil || in.routingOn() {
		addFlag(c, "--enable-prefix-caching", "")
	}
	if lmcacheOn(kv) {
		addFlag(c, "--kv-transfer-config", `{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}`)
		if kv.CacheConfigFile != "" {
			// The reference: the file, when set, overrides the other fields.
			addEnv(c, corev1.EnvVar{Name: "LMCACHE_CONFIG_FILE", Value: kv.CacheConfigFile})
		} else {
			addEnv(c, corev1.EnvVar{Name: "LMCACHE_CHUNK_SIZE", Value: strconv.Itoa(LMCacheChunkSize)})
			addEnv(c, corev1.EnvVar{Name: "LMCACHE_LOCAL_CPU", Value: pyBool(kv.L1On())})
			if kv.L1On() {
				addEnv(c, corev1.EnvVar{Name: "LMCACHE_MAX_LOCAL_CPU_SIZE", Value: gib(l1Bytes(c, in))})
			}
			switch kv.L2Backend() {
			case manifest.L2BackendRedis:
				addEnv(c, corev1.EnvVar{Name: "LMCACHE_REMOTE_URL", Value: kv.L2CacheSpec.L2CacheLocalURL})
			case manifest.L2BackendTieredStorage:
				// HyperPod's tiered storage daemon on the pod's node.
				addEnv(c, fieldEnv("NODE_IP", "status.hostIP"))
				addEnv(c, corev1.EnvVar{Name: "LMCACHE_REMOTE_URL", Value: "sagemaker-hyperpod://$(NODE_IP):" + strconv.Itoa(HyperPodTieredStoragePort)})
			}
		}
	}
	if in.kvEventsOn() {
		addEnv(c, fieldEnv("POD_IP", "status.podIP"))
		cfg, _ := json.Marshal(struct {
			Enable    bool   `json:"enable_kv_cache_events"`
			Publisher string `json:"publisher"`
			Endpoint  string `json:"endpoint"`
			Topic     string `json:"topic"`
		}{true, "zmq", "tcp://*:" + strconv.Itoa(KVEventsPort), "kv@$(POD_IP)@" + servedName(c, in.model)})
		addFlag(c, "--kv-events-config", string(cfg))
	}
}

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
		addFlag(c, "--kv-events", "tcp://*:"+strconv.Itoa(KVEventsPort))
		// The simulated engine's own topic format, kv@HOST:PORT@MODEL, with
		// the pod's address in place of the 0.0.0.0 it listens on.
		topic := "kv@$(POD_IP)@" + servedName(c, in.model)
		if p := flagValue(c.Args, "--port"); p != "" {
			topic = "kv@$(POD_IP):" + p + "@" + servedName(c, in.model)
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

// servedName is the model name the engine serves: its
// --served-model-name, else its --model, else the manifest's.
func servedName(c *corev1.Container, fallback string) string {
	for _, f := range []string{"--served-model-name", "--model"} {
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

// pyBool is a boolean as LMCache's examples write it.
func pyBool(b bool) string {
	if b {
		return "True"
	}
	return "False"
}

// gib is n bytes in GiB to two decimals, as LMCACHE_MAX_LOCAL_CPU_SIZE
// takes a size in GB (8Gi → "8", 12.5Gi → "12.5", 8G → "7.45").
func gib(n int64) string {
	return strconv.FormatFloat(math.Round(float64(n)/(1<<30)*100)/100, 'f', -1, 64)
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
