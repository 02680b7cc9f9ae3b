package operator

import (
	apiv1 "github.com/capstan-dev/capstan/internal/operator/apis/v1"

	"maps"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// vllmIEC is an IEC running a vLLM image with its own args.
const vllmIEC = `apiVersion: inference.sagemaker.aws.amazon.com/v1
kind: InferenceEndpointConfig
metadata: {name: m}
spec:
  modelName: m
  instanceType: ml.g5.24xlarge
  modelSourceConfig: {modelSourceType: s3, s3Storage: {bucketName: b, region: us-east-1}}
  worker:
    image: lmcache/vllm-openai:latest
    args: [--model, /opt/ml/model, --served-model-name, llama, --port, "8000"]
    modelInvocationPort: {containerPort: 8000}
    modelVolumeMount: {name: w}
    resources: {requests: {nvidia.com/gpu: 1}, limits: {nvidia.com/gpu: 1}}
`

// simIEC is an IEC running capstan's image: `capstan engine sim`.
const simIEC = `apiVersion: inference.sagemaker.aws.amazon.com/v1
kind: InferenceEndpointConfig
metadata: {name: m}
spec:
  modelName: m
  instanceType: ml.g5.24xlarge
  modelSourceConfig: {modelSourceType: s3, s3Storage: {bucketName: b, region: us-east-1}}
  worker:
    image: capstan:latest
    args: [engine, sim, --model, llama-3.1-8b, --gpu, a10g, --host, 0.0.0.0, --port, "8000"]
    modelInvocationPort: {containerPort: 8000}
    modelVolumeMount: {name: w}
    resources: {requests: {nvidia.com/gpu: 1, memory: 16Gi}, limits: {nvidia.com/gpu: 1}}
`

// TestEngineMapping checks the flags and environment each kvCacheSpec and
// intelligentRoutingSpec gives a vLLM image and capstan's simulated engine
// (docs/operator.md, "Engines in pods: the vLLM mapping").
func TestEngineMapping(t *testing.T) {
	const (
		connector = `--kv-transfer-config={"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}`
		prefix    = "--enable-prefix-caching"
	)
	tests := []struct {
		name, yaml string
		// added are the args after the manifest's own, in order.
		added []string
		// env is every plain variable (valueFrom ones are "fieldRef:<path>").
		env map[string]string
		// kvPort says whether the kv-events container port is there.
		kvPort bool
		// volume is a hostPath the pod mounts ("" for none).
		volume string
	}{
		{
			name: "vLLM, no kvCacheSpec or routing: the manifest's args as given",
			yaml: vllmIEC,
			env:  map[string]string{},
		},
		{
			name:  "vLLM, L1 with l1CacheSize: LMCache connector, CPU tier in GiB",
			yaml:  vllmIEC + "  kvCacheSpec: {enableL1Cache: true, l1CacheSize: 12Gi}\n",
			added: []string{prefix, connector},
			env:   map[string]string{"LMCACHE_CHUNK_SIZE": "256", "LMCACHE_LOCAL_CPU": "True", "LMCACHE_MAX_LOCAL_CPU_SIZE": "12"},
		},
		{
			// ml.g5.24xlarge: 384 GiB, 4 GPUs; one GPU's share halved.
			name:  "vLLM, L1 without a size: half the replica's share of the node's memory",
			yaml:  vllmIEC + "  kvCacheSpec: {}\n",
			added: []string{prefix, connector},
			env:   map[string]string{"LMCACHE_CHUNK_SIZE": "256", "LMCACHE_LOCAL_CPU": "True", "LMCACHE_MAX_LOCAL_CPU_SIZE": "48"},
		},
		{
			name:  "vLLM, L1 off and redis L2: remote URL only",
			yaml:  vllmIEC + "  kvCacheSpec: {enableL1Cache: false, enableL2Cache: true, l2CacheSpec: {l2CacheBackend: redis, l2CacheLocalUrl: \"redis://redis.default.svc:6379\"}}\n",
			added: []string{prefix, connector},
			env:   map[string]string{"LMCACHE_CHUNK_SIZE": "256", "LMCACHE_LOCAL_CPU": "False", "LMCACHE_REMOTE_URL": "redis://redis.default.svc:6379", "LMCACHE_REMOTE_SERDE": "naive"},
		},
		{
			name:  "vLLM, tieredstorage L2: HyperPod's daemon on the pod's node",
			yaml:  vllmIEC + "  kvCacheSpec: {l1CacheSize: 8Gi, enableL2Cache: true, l2CacheSpec: {l2CacheBackend: TieredStorage}}\n",
			added: []string{prefix, connector},
			env: map[string]string{"LMCACHE_CHUNK_SIZE": "256", "LMCACHE_LOCAL_CPU": "True", "LMCACHE_MAX_LOCAL_CPU_SIZE": "8",
				"NODE_IP": "fieldRef:status.hostIP", "LMCACHE_REMOTE_URL": "sagemaker-hyperpod://$(NODE_IP):9200", "LMCACHE_REMOTE_SERDE": "naive"},
		},
		{
			name:  "vLLM, cacheConfigFile overrides the other fields",
			yaml:  vllmIEC + "  kvCacheSpec: {l1CacheSize: 8Gi, cacheConfigFile: /etc/lmcache/config.yaml}\n",
			added: []string{prefix, connector},
			env:   map[string]string{"LMCACHE_CONFIG_FILE": "/etc/lmcache/config.yaml"},
		},
		{
			name:  "vLLM, prefixaware routing: prefix caching, no KV events (the router hashes prompts)",
			yaml:  vllmIEC + "  intelligentRoutingSpec: {enabled: true, routingStrategy: prefixaware}\n",
			added: []string{prefix},
			env:   map[string]string{},
		},
		{
			name: "vLLM, kvaware routing: KV events over ZMQ with the pod's address in the topic",
			yaml: vllmIEC + "  intelligentRoutingSpec: {enabled: true, routingStrategy: kvaware}\n  invocationEndpoint: v1/completions\n",
			added: []string{prefix,
				`--kv-events-config={"enable_kv_cache_events":true,"endpoint":"tcp://*:5557","publisher":"zmq","topic":"kv@$(POD_IP)@llama"}`},
			env:    map[string]string{"POD_IP": "fieldRef:status.podIP"},
			kvPort: true,
		},
		{
			name: "vLLM, routing disabled: nothing",
			yaml: vllmIEC + "  intelligentRoutingSpec: {enabled: false}\n",
			env:  map[string]string{},
		},
		{
			name: "vLLM, flags and variables the manifest sets win",
			yaml: strings.Replace(vllmIEC, `"8000"]`, `"8000", --enable-prefix-caching, --kv-transfer-config, "{}"]
    environmentVariables: [{name: LMCACHE_CHUNK_SIZE, value: "64"}]`, 1) + "  kvCacheSpec: {l1CacheSize: 1Gi}\n",
			env: map[string]string{"LMCACHE_CHUNK_SIZE": "64", "LMCACHE_LOCAL_CPU": "True", "LMCACHE_MAX_LOCAL_CPU_SIZE": "1"},
		},
		{
			name:   "vLLM, --no-enable-prefix-caching in the manifest is not contradicted",
			yaml:   strings.Replace(vllmIEC, `"8000"]`, `"8000", --no-enable-prefix-caching]`, 1) + "  intelligentRoutingSpec: {enabled: true, routingStrategy: kvaware}\n  invocationEndpoint: v1/completions\n",
			added:  []string{`--kv-events-config={"enable_kv_cache_events":true,"endpoint":"tcp://*:5557","publisher":"zmq","topic":"kv@$(POD_IP)@llama"}`},
			env:    map[string]string{"POD_IP": "fieldRef:status.podIP"},
			kvPort: true,
		},
		{
			// The adapter table knows SGLang: no KV events, no tiers below
			// the GPU, so vLLM's flags (which would stop it starting) are
			// not added, as `capstan serve` drops them.
			name: "SGLang image: no KV events or tiers, nothing added",
			yaml: strings.Replace(vllmIEC, "lmcache/vllm-openai:latest", "lmsysorg/sglang:v0.5.4-cu129", 1) + "  kvCacheSpec: {l1CacheSize: 8Gi}\n  intelligentRoutingSpec: {enabled: true, routingStrategy: kvaware}\n  invocationEndpoint: v1/completions\n",
			env:  map[string]string{},
		},
		{
			name: "TGI image: nothing added",
			yaml: strings.Replace(vllmIEC, "lmcache/vllm-openai:latest", "ghcr.io/huggingface/text-generation-inference:3.3.6", 1) + "  intelligentRoutingSpec: {enabled: true, routingStrategy: kvaware}\n  invocationEndpoint: v1/completions\n",
			env:  map[string]string{},
		},
		{
			// An image the adapter table does not know is taken for vLLM.
			name: "unknown image: vLLM's flags",
			yaml: strings.Replace(vllmIEC, "lmcache/vllm-openai:latest", "registry.example/my-vllm:1", 1) + "  intelligentRoutingSpec: {enabled: true, routingStrategy: kvaware}\n  invocationEndpoint: v1/completions\n",
			added: []string{prefix,
				`--kv-events-config={"enable_kv_cache_events":true,"endpoint":"tcp://*:5557","publisher":"zmq","topic":"kv@$(POD_IP)@llama"}`},
			env:    map[string]string{"POD_IP": "fieldRef:status.podIP"},
			kvPort: true,
		},
		{
			// capstan/sim selects the simulated engine even when its args
			// do not spell out `engine sim` (the image's entrypoint does).
			name: "capstan/sim image: the simulated engine's flags",
			yaml: strings.Replace(strings.Replace(simIEC, "capstan:latest", "capstan/sim:latest", 1), "args: [engine, sim, ", "args: [", 1) +
				"  kvCacheSpec: {l1CacheSize: 1Gi}\n  intelligentRoutingSpec: {enabled: true, routingStrategy: kvaware}\n  invocationEndpoint: v1/completions\n",
			added:  []string{"--cpu-cache-bytes=1073741824", "--kv-events=tcp://*:5557", "--kv-events-topic=kv@$(POD_IP):8000@llama-3.1-8b"},
			env:    map[string]string{"POD_IP": "fieldRef:status.podIP"},
			kvPort: true,
		},
		{
			name:  "sim, L1 from the memory request, redis L2",
			yaml:  simIEC + "  kvCacheSpec: {enableL2Cache: true, l2CacheSpec: {l2CacheBackend: redis, l2CacheLocalUrl: \"redis://r:6379\"}}\n",
			added: []string{"--cpu-cache-bytes=17179869184", "--shared-cache=redis://r:6379"},
			env:   map[string]string{},
		},
		{
			name:   "sim, tieredstorage L2 of l2CacheSize in the node's hostPath",
			yaml:   simIEC + "  kvCacheSpec: {enableL1Cache: false, enableL2Cache: true, l2CacheSpec: {l2CacheBackend: tieredstorage, l2CacheSize: 4Gi}}\n",
			added:  []string{"--tiered-storage-dir=" + TieredStoragePath, "--tiered-storage-bytes=4294967296"},
			env:    map[string]string{},
			volume: TieredStoragePath,
		},
		{
			name:   "sim, kvaware routing: --kv-events with the sim's topic format",
			yaml:   simIEC + "  intelligentRoutingSpec: {enabled: true, routingStrategy: kvaware}\n  invocationEndpoint: v1/completions\n",
			added:  []string{"--kv-events=tcp://*:5557", "--kv-events-topic=kv@$(POD_IP):8000@llama-3.1-8b"},
			env:    map[string]string{"POD_IP": "fieldRef:status.podIP"},
			kvPort: true,
		},
		{
			// The capstan image runs JumpStartModels; ml.g5.12xlarge: 4 A10G,
			// 192 GiB, the replica takes every GPU: half of it.
			name: "JumpStartModel on the capstan image, L1 and routing",
			yaml: `apiVersion: inference.sagemaker.aws.amazon.com/v1
kind: JumpStartModel
metadata: {name: j}
spec:
  model: {modelId: deepseek-llm-r1-distill-qwen-1-5b}
  server: {instanceType: ml.g5.12xlarge}
  kvCacheSpec: {}
  intelligentRoutingSpec: {enabled: true, routingStrategy: kvaware}
`,
			added: []string{"--cpu-cache-bytes=103079215104", "--kv-events=tcp://*:5557",
				"--kv-events-topic=kv@$(POD_IP):8080@deepseek-llm-r1-distill-qwen-1-5b"},
			env:    map[string]string{"POD_IP": "fieldRef:status.podIP"},
			kvPort: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := Build(load(t, tt.yaml), BuildOptions{ModelImage: "capstan:latest"})
			if err != nil {
				t.Fatal(err)
			}
			c := d.Deployment.Spec.Template.Spec.Containers[0]
			own := withoutCacheSpecs(t, tt.yaml)
			if !slices.Equal(c.Args[:len(own)], own) {
				t.Fatalf("args %q do not start with the manifest's %q", c.Args, own)
			}
			if got := c.Args[len(own):]; !slices.Equal(got, tt.added) {
				t.Errorf("added args:\n got %q\nwant %q", got, tt.added)
			}
			env := map[string]string{}
			for _, e := range c.Env {
				switch {
				case e.ValueFrom != nil && e.ValueFrom.FieldRef != nil:
					env[e.Name] = "fieldRef:" + e.ValueFrom.FieldRef.FieldPath
				case e.ValueFrom == nil:
					env[e.Name] = e.Value
				}
			}
			if !maps.Equal(env, tt.env) {
				t.Errorf("env:\n got %v\nwant %v", env, tt.env)
			}
			hasKV := slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool {
				return p.Name == apiv1.KVEventsPortName && p.ContainerPort == KVEventsPort
			})
			if hasKV != tt.kvPort {
				t.Errorf("kv-events port = %v, want %v (ports %+v)", hasKV, tt.kvPort, c.Ports)
			}
			if c.Ports[0].Name != "http" {
				t.Errorf("first port %+v, want the invocation port", c.Ports[0])
			}
			var vol string
			for _, v := range d.Deployment.Spec.Template.Spec.Volumes {
				if v.HostPath != nil {
					vol = v.HostPath.Path
				}
			}
			mounted := slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == TieredStoragePath })
			if vol != tt.volume || mounted != (tt.volume != "") {
				t.Errorf("hostPath volume %q (mounted %v), want %q", vol, mounted, tt.volume)
			}
		})
	}
}

// withoutCacheSpecs is the model container's args for y without its
// kvCacheSpec and intelligentRoutingSpec.
func withoutCacheSpecs(t *testing.T, y string) []string {
	t.Helper()
	var keep []string
	for l := range strings.SplitSeq(y, "\n") {
		if !strings.HasPrefix(l, "  kvCacheSpec:") && !strings.HasPrefix(l, "  intelligentRoutingSpec:") {
			keep = append(keep, l)
		}
	}
	d, err := Build(load(t, strings.Join(keep, "\n")), BuildOptions{ModelImage: "capstan:latest"})
	if err != nil {
		t.Fatal(err)
	}
	return d.Deployment.Spec.Template.Spec.Containers[0].Args
}

// TestIsSimEngine checks which containers get capstan engine sim's flags.
func TestIsSimEngine(t *testing.T) {
	tests := []struct {
		command, args []string
		want          bool
	}{
		{nil, []string{"engine", "sim", "--model", "x"}, true},
		{[]string{"/usr/local/bin/capstan"}, []string{"engine", "sim"}, true},
		{[]string{"capstan", "engine", "sim"}, nil, true},
		{nil, []string{"--model", "engine", "sim"}, false},
		{[]string{"vllm", "serve"}, []string{"m"}, false},
		{[]string{"python3", "-m", "vllm.entrypoints.openai.api_server"}, nil, false},
	}
	for _, tt := range tests {
		if got := isSimEngine(&corev1.Container{Command: tt.command, Args: tt.args}); got != tt.want {
			t.Errorf("isSimEngine(%q %q) = %v, want %v", tt.command, tt.args, got, tt.want)
		}
	}
}
