package operator

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/capstan-dev/capstan/internal/engines"
	"github.com/capstan-dev/capstan/internal/runtime"
)

// TestVLLMMappingAgreesWithLocalRuntime: for the same model, tiers and KV
// events, the operator's vLLM container and the local runtime's vLLM
// command (engines' vLLM adapter) carry the same flags and LMCache
// environment. What differs by design: the topic (the operator's names the
// pod), the endpoint's port (fixed in a pod, free locally), the
// tieredstorage backend (HyperPod's daemon in a pod, LMCache's local disk
// locally) and --enable-prefix-caching (the operator's only).
func TestVLLMMappingAgreesWithLocalRuntime(t *testing.T) {
	const kvaware = "  intelligentRoutingSpec: {enabled: true, routingStrategy: kvaware}\n  invocationEndpoint: v1/completions\n"
	tests := []struct {
		name string
		// spec is appended to vllmIEC.
		spec  string
		tiers runtime.KVTiers
		// kvEvents: the replica publishes KV events on tcp://*:5557.
		kvEvents bool
	}{
		{"L1", "  kvCacheSpec: {l1CacheSize: 12Gi}\n", runtime.KVTiers{CPUBytes: 12 << 30}, false},
		{"L1 of a non-whole GiB size", "  kvCacheSpec: {l1CacheSize: 8G}\n", runtime.KVTiers{CPUBytes: 8e9}, false},
		{"redis L2 only",
			"  kvCacheSpec: {enableL1Cache: false, enableL2Cache: true, l2CacheSpec: {l2CacheBackend: redis, l2CacheLocalUrl: \"redis://r:6379\"}}\n",
			runtime.KVTiers{RedisURL: "redis://r:6379"}, false},
		{"L1 and redis L2",
			"  kvCacheSpec: {l1CacheSize: 4Gi, enableL2Cache: true, l2CacheSpec: {l2CacheBackend: redis, l2CacheLocalUrl: \"redis://r:6379\"}}\n",
			runtime.KVTiers{CPUBytes: 4 << 30, RedisURL: "redis://r:6379"}, false},
		{"kvaware routing", kvaware, runtime.KVTiers{}, true},
		{"L1, redis and kvaware",
			"  kvCacheSpec: {l1CacheSize: 4Gi, enableL2Cache: true, l2CacheSpec: {l2CacheBackend: redis, l2CacheLocalUrl: \"redis://r:6379\"}}\n" + kvaware,
			runtime.KVTiers{CPUBytes: 4 << 30, RedisURL: "redis://r:6379"}, true},
	}
	vllm := engines.MustByName(engines.VLLM)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := Build(load(t, vllmIEC+tt.spec), BuildOptions{ModelImage: "capstan:latest"})
			if err != nil {
				t.Fatal(err)
			}
			c := d.Deployment.Spec.Template.Spec.Containers[0]
			// The local runtime's replica of the same model: served as
			// "llama" from the folder the manifest's --model names.
			spec := runtime.ReplicaSpec{ServedModelName: "llama", KVTiers: tt.tiers}
			if tt.kvEvents {
				spec.KVEventsEndpoint = kvEventsBindEndpoint()
			}
			l := engines.Launch{Spec: spec, Host: "0.0.0.0", Port: 8000, ModelPath: "/opt/ml/model"}
			local, localEnv := vllm.Args(l), vllm.Env(l)

			for _, f := range []string{engines.VLLMFlagServedModelName, engines.VLLMFlagKVTransferConfig} {
				if got, want := flagValue(c.Args, f), flagValue(local, f); got != want {
					t.Errorf("%s: operator %q, local runtime %q\n operator args %q\n local args %q", f, got, want, c.Args, local)
				}
			}

			got, want := flagValue(c.Args, engines.VLLMFlagKVEventsConfig), flagValue(local, engines.VLLMFlagKVEventsConfig)
			if (got != "") != tt.kvEvents || (want != "") != tt.kvEvents {
				t.Fatalf("kv events config: operator %q, local runtime %q, want set %v", got, want, tt.kvEvents)
			}
			if tt.kvEvents {
				if got != engines.VLLMKVEventsConfig(kvEventsBindEndpoint(), "kv@$(POD_IP)@llama") {
					t.Errorf("operator kv events config %s is not engines.VLLMKVEventsConfig's", got)
				}
				var g, w map[string]any
				if err := json.Unmarshal([]byte(got), &g); err != nil {
					t.Fatal(err)
				}
				if err := json.Unmarshal([]byte(want), &w); err != nil {
					t.Fatal(err)
				}
				delete(g, "topic")
				delete(w, "topic")
				if !maps.Equal(g, w) {
					t.Errorf("kv events config apart from the topic: operator %v, local runtime %v", g, w)
				}
			}

			lmcache := func(env map[string]string) map[string]string {
				out := map[string]string{}
				for k, v := range env {
					if strings.HasPrefix(k, "LMCACHE_") {
						out[k] = v
					}
				}
				return out
			}
			opEnv := map[string]string{}
			for _, e := range c.Env {
				if e.ValueFrom == nil {
					opEnv[e.Name] = e.Value
				}
			}
			if g, w := lmcache(opEnv), lmcache(localEnv); !maps.Equal(g, w) {
				t.Errorf("LMCache env: operator %v, local runtime %v", g, w)
			}
			// GPU selection is the device plugin's in a pod, never
			// CUDA_VISIBLE_DEVICES.
			if _, ok := opEnv["CUDA_VISIBLE_DEVICES"]; ok {
				t.Errorf("operator sets CUDA_VISIBLE_DEVICES: %v", opEnv)
			}
			if p := c.ReadinessProbe.HTTPGet.Path; p != vllm.HealthPath {
				t.Errorf("readiness path %s, the adapter's %s", p, vllm.HealthPath)
			}
		})
	}
}

// TestTieredStorageEnvOrder: NODE_IP comes before the LMCACHE_REMOTE_URL
// that names it, as Kubernetes expands $(VAR) only from earlier variables.
func TestTieredStorageEnvOrder(t *testing.T) {
	d, err := Build(load(t, vllmIEC+"  kvCacheSpec: {enableL2Cache: true, l2CacheSpec: {l2CacheBackend: tieredstorage}}\n"), BuildOptions{ModelImage: "capstan:latest"})
	if err != nil {
		t.Fatal(err)
	}
	env := d.Deployment.Spec.Template.Spec.Containers[0].Env
	node := slices.IndexFunc(env, func(e corev1.EnvVar) bool { return e.Name == "NODE_IP" })
	url := slices.IndexFunc(env, func(e corev1.EnvVar) bool { return e.Name == "LMCACHE_REMOTE_URL" })
	if node < 0 || url < 0 || node > url {
		t.Fatalf("env %v: NODE_IP at %d, LMCACHE_REMOTE_URL at %d", env, node, url)
	}
}

// TestReadinessPath: without a loadBalancer.healthCheckPath other than the
// default the readiness probe asks the engine's own health route (the adapter's HealthPath), and
// SageMaker's /ping for an image the adapter table does not know.
func TestReadinessPath(t *testing.T) {
	const jsm = `apiVersion: inference.sagemaker.aws.amazon.com/v1
kind: JumpStartModel
metadata: {name: j}
spec:
  model: {modelId: deepseek-llm-r1-distill-qwen-1-5b}
  server: {instanceType: ml.g5.12xlarge}
`
	tests := []struct{ name, yaml, want string }{
		{"vLLM image", vllmIEC, engines.MustByName(engines.VLLM).HealthPath},
		{"SGLang image", strings.Replace(vllmIEC, "lmcache/vllm-openai:latest", "lmsysorg/sglang:latest", 1), engines.MustByName(engines.SGLang).HealthPath},
		{"capstan engine sim", simIEC, engines.MustByName(engines.Sim).HealthPath},
		{"JumpStartModel", jsm, engines.MustByName(engines.Sim).HealthPath},
		{"unknown image", iecBase, "/ping"},
		{"the manifest's path wins", vllmIEC + "  loadBalancer: {healthCheckPath: /v1/models}\n", "/v1/models"},
		{"the default path is the engine's", vllmIEC + "  loadBalancer: {healthCheckPath: /ping}\n", engines.MustByName(engines.VLLM).HealthPath},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := Build(load(t, tt.yaml), BuildOptions{ModelImage: "capstan:latest"})
			if err != nil {
				t.Fatal(err)
			}
			if p := d.Deployment.Spec.Template.Spec.Containers[0].ReadinessProbe.HTTPGet.Path; p != tt.want {
				t.Errorf("readiness path %s, want %s", p, tt.want)
			}
		})
	}
}

// TestJumpStartArgsAreTheSimAdapters: a JumpStartModel's pod runs the
// command line the local runtime starts the simulated engine with.
func TestJumpStartArgsAreTheSimAdapters(t *testing.T) {
	for _, tt := range []struct {
		server string
		spec   runtime.ReplicaSpec
	}{
		// ml.g5.12xlarge: 4 A10G, all the replica's.
		{"{instanceType: ml.g5.12xlarge}", runtime.ReplicaSpec{GPU: "a10g", TensorParallel: 4}},
		{"{instanceType: ml.p4d.24xlarge, acceleratorPartitionType: mig-1g.5gb}", runtime.ReplicaSpec{GPU: "a100-40gb", MIGProfile: "1g.5gb"}},
	} {
		d, err := Build(load(t, `apiVersion: inference.sagemaker.aws.amazon.com/v1
kind: JumpStartModel
metadata: {name: j}
spec:
  model: {modelId: deepseek-llm-r1-distill-qwen-1-5b}
  server: `+tt.server+"\n"), BuildOptions{ModelImage: "capstan:latest"})
		if err != nil {
			t.Fatal(err)
		}
		spec := tt.spec
		spec.Model = "deepseek-llm-r1-distill-qwen-1-5b"
		want := engines.MustByName(engines.Sim).Args(engines.Launch{Spec: spec, Host: "0.0.0.0", Port: JumpStartPort})
		if got := d.Deployment.Spec.Template.Spec.Containers[0].Args; !slices.Equal(got, want) {
			t.Errorf("%s: args\n got %q\nwant %q", tt.server, got, want)
		}
	}
}
