package manifest

import (
	"encoding/json"
	"errors"
	"flag"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite golden files")

const minimalIEC = `apiVersion: inference.sagemaker.aws.amazon.com/v1
kind: InferenceEndpointConfig
metadata: {name: m1}
spec:
  modelName: m1
  instanceType: ml.g5.12xlarge
  modelSourceConfig: {modelSourceType: s3, s3Storage: {bucketName: b, region: us-east-1}}
  worker:
    image: img
    modelInvocationPort: {containerPort: 8000}
    modelVolumeMount: {name: w}
    resources: {requests: {cpu: "4", memory: 16Gi}, limits: {nvidia.com/gpu: 1}}
`

const minimalJSM = `apiVersion: inference.sagemaker.aws.amazon.com/v1
kind: JumpStartModel
metadata: {name: j1}
spec:
  model: {modelId: deepseek-llm-r1-distill-qwen-1-5b}
  server: {instanceType: ml.g5.xlarge}
`

func decodeOneT[T Object](t *testing.T, src string) T {
	t.Helper()
	objs, err := Decode([]byte(src))
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	if len(objs) != 1 {
		t.Fatalf("Decode: got %d objects, want 1", len(objs))
	}
	o, ok := objs[0].(T)
	if !ok {
		t.Fatalf("Decode: got %T", objs[0])
	}
	return o
}

func paths(err error) []string {
	var out []string
	for _, fe := range FieldErrors(err) {
		out = append(out, fe.Path)
	}
	return out
}

// wantOnly asserts that err holds exactly one FieldError, at path, whose
// message contains msg.
func wantOnly(t *testing.T, err error, path, msg string) {
	t.Helper()
	fes := FieldErrors(err)
	if len(fes) != 1 {
		t.Fatalf("want exactly one error at %s, got %d: %v", path, len(fes), err)
	}
	if fes[0].Path != path || !strings.Contains(fes[0].Message, msg) {
		t.Fatalf("got %q, want path %s with message containing %q", fes[0].Error(), path, msg)
	}
}

func TestExamples(t *testing.T) {
	tests := []struct {
		file  string
		kind  string
		name  string
		check func(t *testing.T, o Object)
	}{
		{file: "examples-jsm-mig.yaml", kind: KindJumpStartModel, name: "deepseek",
			check: func(t *testing.T, o Object) {
				j := o.(*JumpStartModel)
				if j.Spec.Server.InstanceType != "ml.p4d.24xlarge" || j.Spec.SageMakerEndpoint.Name != "deepseek" {
					t.Errorf("decoded server/endpoint wrong: %+v %+v", j.Spec.Server, j.Spec.SageMakerEndpoint)
				}
				if got := j.Spec.Server.MIGProfile(); got != "7g.40gb" || !j.Spec.Server.PartitionValidation() {
					t.Errorf("MIG profile %q, validation %v; want 7g.40gb, on", got, j.Spec.Server.PartitionValidation())
				}
			}},
		{file: "examples-iec-mig.yaml", kind: KindInferenceEndpointConfig, name: "qwen-mig",
			check: func(t *testing.T, o Object) {
				w := o.(*InferenceEndpointConfig).Spec.Worker
				if got := w.Resources.Requests["cpu"]; got != "5600m" {
					t.Errorf("cpu request = %q", got)
				}
				if got := w.Resources.Requests["nvidia.com/mig-4g.71gb"]; got != "1" {
					t.Errorf("numeric quantity decoded as %q, want \"1\"", got)
				}
				if got := MIGProfileOf(w.Resources); got != "4g.71gb" {
					t.Errorf("MIGProfileOf = %q, want 4g.71gb", got)
				}
			}},
		{file: "examples-iec-kv-routing.yaml", kind: KindInferenceEndpointConfig, name: "demo",
			check: func(t *testing.T, o Object) {
				s := o.(*InferenceEndpointConfig).Spec
				if *s.Replicas != 2 || *s.AutoScalingSpec.MinReplicaCount != 0 || *s.AutoScalingSpec.MaxReplicaCount != 4 {
					t.Errorf("replicas/autoscaling wrong: %d %+v", *s.Replicas, s.AutoScalingSpec)
				}
				if got := s.AutoScalingSpec.PrometheusTrigger.ServerAddress; got != "http://127.0.0.1:9090" {
					t.Errorf("serverAddress = %q", got)
				}
				if s.KVCacheSpec.L2CacheSpec.L2CacheBackend != "redis" || s.IntelligentRoutingSpec.RoutingStrategy != RoutingPrefixAware {
					t.Errorf("kv/routing wrong: %+v %+v", s.KVCacheSpec, s.IntelligentRoutingSpec)
				}
			}},
		{file: "reference-iec-l1-l2-routing.yaml", kind: KindInferenceEndpointConfig, name: "demo"},
		{file: "reference-jsm-mig-scale-to-zero.yaml", kind: KindJumpStartModel, name: "deepseek"},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			objs, err := Decode(data)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if len(objs) != 1 || objs[0].GetKind() != tt.kind || objs[0].GetMeta().Name != tt.name {
				t.Fatalf("got %d objects, first %s/%s", len(objs), objs[0].GetKind(), objs[0].GetMeta().Name)
			}
			o := objs[0]
			o.Default()
			if tt.check != nil {
				tt.check(t, o)
			}
			if err := o.Validate(); err != nil {
				t.Fatalf("Validate: %v", err)
			}
		})
	}
}

// TestGoldenDefaulted pins the defaulted wire form of an example, which is
// what `get -o yaml` will show.
func TestGoldenDefaulted(t *testing.T) {
	for _, f := range []string{"examples-iec-kv-routing.yaml", "examples-jsm-mig.yaml"} {
		t.Run(f, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", f))
			if err != nil {
				t.Fatal(err)
			}
			objs, err := Decode(data)
			if err != nil {
				t.Fatal(err)
			}
			objs[0].Default()
			got, err := yaml.Marshal(objs[0])
			if err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", "golden", strings.TrimSuffix(f, ".yaml")+".defaulted.yaml")
			if *update {
				if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update)", err)
			}
			if string(got) != string(want) {
				t.Errorf("defaulted form differs from %s:\n%s", golden, got)
			}
			// And the defaulted form decodes back to the same object.
			back, err := Decode(got)
			if err != nil {
				t.Fatalf("re-decode: %v", err)
			}
			if !reflect.DeepEqual(back[0], objs[0]) {
				t.Errorf("round trip changed the object:\n%+v\n%+v", back[0], objs[0])
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	iec := decodeOneT[*InferenceEndpointConfig](t, minimalIEC)
	iec.Default()
	jsm := decodeOneT[*JumpStartModel](t, minimalJSM)
	jsm.Default()
	as := &AutoScalingSpec{CloudWatchTriggerList: []CloudWatchTrigger{{}, {}}, PrometheusTrigger: &PrometheusTrigger{}}
	as.Default("dep")
	tests := []struct {
		name      string
		got, want any
	}{
		{"metadata.namespace", iec.Metadata.Namespace, "default"},
		{"iec replicas", *iec.Spec.Replicas, int32(1)},
		{"iec maxDeployTimeInSeconds", *iec.Spec.MaxDeployTimeInSeconds, int32(3600)},
		{"iec invocationEndpoint", iec.Spec.InvocationEndpoint, "invocations"},
		{"worker port name", iec.Spec.Worker.ModelInvocationPort.Name, "http"},
		{"worker mountPath", iec.Spec.Worker.ModelVolumeMount.MountPath, "/opt/ml/model"},
		{"loadBalancer healthCheckPath", iec.Spec.LoadBalancer.HealthCheckPath, "/ping"},
		{"loadBalancer routingAlgorithm", iec.Spec.LoadBalancer.RoutingAlgorithm, "least_outstanding_requests"},
		{"loadBalancer idleTimeoutSeconds", *iec.Spec.LoadBalancer.IdleTimeoutSeconds, int32(60)},
		{"metrics enabled", *iec.Spec.Metrics.Enabled, true},
		{"metrics scrape interval", *iec.Spec.Metrics.MetricsScrapeIntervalSeconds, int32(15)},
		{"metrics path", iec.Spec.Metrics.ModelMetrics.Path, "/metrics"},
		{"metrics port", *iec.Spec.Metrics.ModelMetrics.Port, int32(8080)},
		{"iec autoscaling absent stays absent", iec.Spec.AutoScalingSpec == nil, true},
		{"iec routing absent stays absent", iec.Spec.IntelligentRoutingSpec == nil, true},
		{"jsm namespace", jsm.Metadata.Namespace, "default"},
		{"jsm replicas", *jsm.Spec.Replicas, int32(1)},
		{"jsm maxDeployTimeInSeconds", *jsm.Spec.MaxDeployTimeInSeconds, int32(3600)},
		{"jsm modelHubName", jsm.Spec.Model.ModelHubName, "SageMakerPublicHub"},
		{"jsm acceptEula", jsm.Spec.Model.AcceptEula, false},
		{"jsm acceleratorPartitionValidation", *jsm.Spec.Server.Validations.AcceleratorPartitionValidation, true},
		{"jsm sageMakerEndpoint name", jsm.Spec.SageMakerEndpoint.Name, ""},
		{"autoscaling min", *as.MinReplicaCount, int32(1)},
		{"autoscaling max", *as.MaxReplicaCount, int32(5)},
		{"autoscaling polling", *as.PollingInterval, int32(30)},
		{"autoscaling cooldown", *as.CooldownPeriod, int32(300)},
		{"autoscaling initialCooldown", *as.InitialCooldownPeriod, int32(300)},
		{"autoscaling scaleDown", *as.ScaleDownStabilizationTime, int32(300)},
		{"autoscaling scaleUp", *as.ScaleUpStabilizationTime, int32(0)},
		{"cloudwatch name (list, unique)", as.CloudWatchTriggerList[1].Name, "dep-scaled-object-cloudwatch-trigger-1"},
		{"cloudwatch period", *as.CloudWatchTriggerList[0].MetricCollectionPeriod, int32(300)},
		{"cloudwatch start", *as.CloudWatchTriggerList[0].MetricCollectionStartTime, int32(300)},
		{"cloudwatch stat", as.CloudWatchTriggerList[0].MetricStat, "Average"},
		{"cloudwatch type", as.CloudWatchTriggerList[0].MetricType, "Average"},
		{"cloudwatch cached", *as.CloudWatchTriggerList[0].UseCachedMetrics, true},
		{"cloudwatch activation", *as.CloudWatchTriggerList[0].ActivationTargetValue, 0.0},
		{"cloudwatch minValue", *as.CloudWatchTriggerList[0].MinValue, 0.0},
		{"prometheus name", as.PrometheusTrigger.Name, "dep-scaled-object-prometheus-trigger"},
		{"prometheus type", as.PrometheusTrigger.MetricType, "Average"},
		{"prometheus cached", *as.PrometheusTrigger.UseCachedMetrics, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !reflect.DeepEqual(tt.got, tt.want) {
				t.Errorf("got %v, want %v", tt.got, tt.want)
			}
		})
	}
	t.Run("minimal manifests are valid", func(t *testing.T) {
		if err := iec.Validate(); err != nil {
			t.Errorf("IEC: %v", err)
		}
		if err := jsm.Validate(); err != nil {
			t.Errorf("JSM: %v", err)
		}
	})
	t.Run("explicit values are kept", func(t *testing.T) {
		o := decodeOneT[*InferenceEndpointConfig](t, minimalIEC+"  replicas: 0\n  autoScalingSpec: {minReplicaCount: 0}\n  kvCacheSpec: {enableL1Cache: false}\n  intelligentRoutingSpec: {enabled: true}\n")
		o.Default()
		o.Default() // idempotent
		if *o.Spec.Replicas != 0 || *o.Spec.AutoScalingSpec.MinReplicaCount != 0 || *o.Spec.KVCacheSpec.EnableL1Cache {
			t.Errorf("explicit zero/false overwritten: %d %d %v", *o.Spec.Replicas, *o.Spec.AutoScalingSpec.MinReplicaCount, *o.Spec.KVCacheSpec.EnableL1Cache)
		}
		if *o.Spec.KVCacheSpec.EnableL2Cache || o.Spec.IntelligentRoutingSpec.RoutingStrategy != RoutingPrefixAware {
			t.Errorf("block defaults not applied: %+v %+v", o.Spec.KVCacheSpec, o.Spec.IntelligentRoutingSpec)
		}
		if err := o.Validate(); err != nil {
			t.Error(err)
		}
	})
}

func TestValidateIEC(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(s *InferenceEndpointConfig)
		path   string
		msg    string
	}{
		{"metadata.name required", func(o *InferenceEndpointConfig) { o.Metadata.Name = "" }, "metadata.name", "required"},
		{"metadata.name DNS label", func(o *InferenceEndpointConfig) { o.Metadata.Name = "Bad_Name" }, "metadata.name", "DNS-1123"},
		{"metadata.namespace DNS label", func(o *InferenceEndpointConfig) { o.Metadata.Namespace = "NS" }, "metadata.namespace", "DNS-1123"},
		{"modelName required", func(o *InferenceEndpointConfig) { o.Spec.ModelName = "" }, "spec.modelName", "required"},
		{"modelName pattern", func(o *InferenceEndpointConfig) { o.Spec.ModelName = "-ab" }, "spec.modelName", "63"},
		{"modelName length", func(o *InferenceEndpointConfig) { o.Spec.ModelName = strings.Repeat("a", 64) }, "spec.modelName", "63"},
		{"endpointName pattern", func(o *InferenceEndpointConfig) { o.Spec.EndpointName = "-x" }, "spec.endpointName", "63"},
		{"instanceType ml prefix", func(o *InferenceEndpointConfig) { o.Spec.InstanceType = "p5.48xlarge" }, "spec.instanceType", "ml.*"},
		{"instanceType catalog", func(o *InferenceEndpointConfig) { o.Spec.InstanceType = "ml.z9.huge" }, "spec.instanceType", "unknown instance type"},
		{"instanceTypes catalog", func(o *InferenceEndpointConfig) {
			o.Spec.InstanceType = ""
			o.Spec.InstanceTypes = []string{"ml.g5.12xlarge", "ml.nope"}
		}, "spec.instanceTypes[1]", "unknown instance type"},
		{"instanceType exclusive with instanceTypes", func(o *InferenceEndpointConfig) { o.Spec.InstanceTypes = []string{"ml.g5.12xlarge"} }, "spec.instanceTypes", "instanceType"},
		{"nodeAffinity exclusive", func(o *InferenceEndpointConfig) { o.Spec.NodeAffinity = []byte(`{}`) }, "spec.nodeAffinity", "must not"},
		{"replicas >= 0", func(o *InferenceEndpointConfig) { o.Spec.Replicas = ptr[int32](-1) }, "spec.replicas", ">= 0"},
		{"maxDeployTimeInSeconds >= 1", func(o *InferenceEndpointConfig) { o.Spec.MaxDeployTimeInSeconds = ptr[int32](0) }, "spec.maxDeployTimeInSeconds", ">= 1"},
		{"modelSourceConfig required", func(o *InferenceEndpointConfig) { o.Spec.ModelSourceConfig = nil }, "spec.modelSourceConfig", "required"},
		{"modelSourceType required", func(o *InferenceEndpointConfig) { o.Spec.ModelSourceConfig.ModelSourceType = "" }, "spec.modelSourceConfig.modelSourceType", "required"},
		{"modelSourceType enum", func(o *InferenceEndpointConfig) { o.Spec.ModelSourceConfig.ModelSourceType = "gcs" }, "spec.modelSourceConfig.modelSourceType", "unsupported"},
		{"s3Storage required", func(o *InferenceEndpointConfig) { o.Spec.ModelSourceConfig.S3Storage = nil }, "spec.modelSourceConfig.s3Storage", "required"},
		{"s3 bucketName required", func(o *InferenceEndpointConfig) { o.Spec.ModelSourceConfig.S3Storage.BucketName = "" }, "spec.modelSourceConfig.s3Storage.bucketName", "required"},
		{"s3 region required", func(o *InferenceEndpointConfig) { o.Spec.ModelSourceConfig.S3Storage.Region = "" }, "spec.modelSourceConfig.s3Storage.region", "required"},
		{"fsx fileSystemId required", func(o *InferenceEndpointConfig) {
			o.Spec.ModelSourceConfig = &ModelSourceConfig{ModelSourceType: SourceFSx, FSxStorage: &FSxStorage{}}
		}, "spec.modelSourceConfig.fsxStorage.fileSystemId", "required"},
		{"fsx with s3 block", func(o *InferenceEndpointConfig) {
			o.Spec.ModelSourceConfig.ModelSourceType = SourceFSx
			o.Spec.ModelSourceConfig.FSxStorage = &FSxStorage{FileSystemID: "fs-1"}
		}, "spec.modelSourceConfig.s3Storage", "must not be set"},
		{"huggingface modelId required", func(o *InferenceEndpointConfig) {
			o.Spec.ModelSourceConfig = &ModelSourceConfig{ModelSourceType: SourceHuggingFace, HuggingFaceModel: &HuggingFaceModel{}}
		}, "spec.modelSourceConfig.huggingFaceModel.modelId", "required"},
		{"huggingface modelId org/model", func(o *InferenceEndpointConfig) {
			o.Spec.ModelSourceConfig = &ModelSourceConfig{ModelSourceType: SourceHuggingFace, HuggingFaceModel: &HuggingFaceModel{ModelID: "llama"}}
		}, "spec.modelSourceConfig.huggingFaceModel.modelId", "<org>/<model>"},
		{"huggingface commitSHA", func(o *InferenceEndpointConfig) {
			o.Spec.ModelSourceConfig = &ModelSourceConfig{ModelSourceType: SourceHuggingFace, HuggingFaceModel: &HuggingFaceModel{ModelID: "Qwen/Qwen2.5-7B-Instruct", CommitSHA: "main"}}
		}, "spec.modelSourceConfig.huggingFaceModel.commitSHA", "40-character"},
		{"kubernetesVolume needs the volume", func(o *InferenceEndpointConfig) {
			o.Spec.ModelSourceConfig = &ModelSourceConfig{ModelSourceType: SourceKubernetesVolume}
			o.Spec.Kubernetes = &KubernetesSpec{Volumes: []map[string]any{{"name": "other"}}}
		}, "spec.kubernetes.volumes", `named "w"`},
		{"worker required", func(o *InferenceEndpointConfig) { o.Spec.Worker = nil }, "spec.worker", "required"},
		{"worker image required", func(o *InferenceEndpointConfig) { o.Spec.Worker.Image = "" }, "spec.worker.image", "required"},
		{"worker modelInvocationPort required", func(o *InferenceEndpointConfig) { o.Spec.Worker.ModelInvocationPort = nil }, "spec.worker.modelInvocationPort", "required"},
		{"containerPort bound", func(o *InferenceEndpointConfig) { o.Spec.Worker.ModelInvocationPort.ContainerPort = 70000 }, "spec.worker.modelInvocationPort.containerPort", "1-65535"},
		{"port name enum", func(o *InferenceEndpointConfig) { o.Spec.Worker.ModelInvocationPort.Name = "https" }, "spec.worker.modelInvocationPort.name", "http, grpc"},
		{"modelVolumeMount required", func(o *InferenceEndpointConfig) { o.Spec.Worker.ModelVolumeMount = nil }, "spec.worker.modelVolumeMount", "required"},
		{"modelVolumeMount name required", func(o *InferenceEndpointConfig) { o.Spec.Worker.ModelVolumeMount.Name = "" }, "spec.worker.modelVolumeMount.name", "required"},
		{"resources required", func(o *InferenceEndpointConfig) { o.Spec.Worker.Resources = nil }, "spec.worker.resources", "required"},
		{"resources bad quantity", func(o *InferenceEndpointConfig) { o.Spec.Worker.Resources.Requests["memory"] = "lots" }, "spec.worker.resources.requests[memory]", "not a quantity"},
		{"resources whole GPUs", func(o *InferenceEndpointConfig) { o.Spec.Worker.Resources.Limits[ResourceGPU] = "500m" }, "spec.worker.resources.limits[nvidia.com/gpu]", "whole number"},
		{"resources request above limit", func(o *InferenceEndpointConfig) { o.Spec.Worker.Resources.Limits["cpu"] = "2" }, "spec.worker.resources.requests[cpu]", "exceed the limit"},
		{"resources GPUs fit instance", func(o *InferenceEndpointConfig) { o.Spec.Worker.Resources.Limits[ResourceGPU] = "5" }, "spec.worker.resources.limits[nvidia.com/gpu]", "4 GPUs"},
		{"resources memory fits instance", func(o *InferenceEndpointConfig) { o.Spec.Worker.Resources.Requests["memory"] = "1Ti" }, "spec.worker.resources.requests[memory]", "192 GiB"},
		{"requestLimits overflowStatusCode", func(o *InferenceEndpointConfig) {
			o.Spec.Worker.RequestLimits = &RequestLimits{OverflowStatusCode: ptr[int32](200)}
		}, "spec.worker.requestLimits.overflowStatusCode", "400-599"},
		{"requestLimits maxQueueSize", func(o *InferenceEndpointConfig) {
			o.Spec.Worker.RequestLimits = &RequestLimits{MaxQueueSize: ptr[int32](-1)}
		}, "spec.worker.requestLimits.maxQueueSize", ">= 0"},
		{"env name required", func(o *InferenceEndpointConfig) { o.Spec.Worker.EnvironmentVariables = []EnvVar{{Value: "x"}} }, "spec.worker.environmentVariables[0].name", "required"},
		{"routingStrategy enum", func(o *InferenceEndpointConfig) {
			o.Spec.IntelligentRoutingSpec = &IntelligentRoutingSpec{RoutingStrategy: "random"}
		}, "spec.intelligentRoutingSpec.routingStrategy", "prefixaware, kvaware, session, roundrobin"},
		{"kvaware needs completions", func(o *InferenceEndpointConfig) {
			o.Spec.InvocationEndpoint = "v1/chat/completions"
			o.Spec.IntelligentRoutingSpec = &IntelligentRoutingSpec{Enabled: ptr(true), RoutingStrategy: RoutingKVAware}
		}, "spec.invocationEndpoint", "kvaware"},
		{"kvCache L2 needs l2CacheSpec", func(o *InferenceEndpointConfig) { o.Spec.KVCacheSpec = &KVCacheSpec{EnableL2Cache: ptr(true)} }, "spec.kvCacheSpec.l2CacheSpec", "required"},
		{"kvCache backend enum", func(o *InferenceEndpointConfig) {
			o.Spec.KVCacheSpec = &KVCacheSpec{L2CacheSpec: &L2CacheSpec{L2CacheBackend: "memcached"}}
		}, "spec.kvCacheSpec.l2CacheSpec.l2CacheBackend", "redis, tieredstorage"},
		{"kvCache backend required", func(o *InferenceEndpointConfig) {
			o.Spec.KVCacheSpec = &KVCacheSpec{L2CacheSpec: &L2CacheSpec{}}
		}, "spec.kvCacheSpec.l2CacheSpec.l2CacheBackend", "required"},
		{"kvCache redis needs URL", func(o *InferenceEndpointConfig) {
			o.Spec.KVCacheSpec = &KVCacheSpec{L2CacheSpec: &L2CacheSpec{L2CacheBackend: "Redis"}}
		}, "spec.kvCacheSpec.l2CacheSpec.l2CacheLocalUrl", "required"},
		{"kvCache redis URL scheme", func(o *InferenceEndpointConfig) {
			o.Spec.KVCacheSpec = &KVCacheSpec{L2CacheSpec: &L2CacheSpec{L2CacheBackend: "redis", L2CacheLocalURL: "http://x:6379"}}
		}, "spec.kvCacheSpec.l2CacheSpec.l2CacheLocalUrl", "redis://"},
		{"l1CacheSize unparseable", func(o *InferenceEndpointConfig) { o.Spec.KVCacheSpec = &KVCacheSpec{L1CacheSize: "8GB"} }, "spec.kvCacheSpec.l1CacheSize", "not a size in bytes"},
		{"l1CacheSize zero", func(o *InferenceEndpointConfig) { o.Spec.KVCacheSpec = &KVCacheSpec{L1CacheSize: "0"} }, "spec.kvCacheSpec.l1CacheSize", "must be positive"},
		{"l1CacheSize negative", func(o *InferenceEndpointConfig) { o.Spec.KVCacheSpec = &KVCacheSpec{L1CacheSize: "-1Gi"} }, "spec.kvCacheSpec.l1CacheSize", "must be positive"},
		{"l1CacheSize fraction of a byte", func(o *InferenceEndpointConfig) { o.Spec.KVCacheSpec = &KVCacheSpec{L1CacheSize: "0.5"} }, "spec.kvCacheSpec.l1CacheSize", "whole number of bytes"},
		{"l1CacheSize over the instance's memory", func(o *InferenceEndpointConfig) { o.Spec.KVCacheSpec = &KVCacheSpec{L1CacheSize: "193Gi"} }, "spec.kvCacheSpec.l1CacheSize", "192 GiB of memory of ml.g5.12xlarge"},
		{"l2CacheSize unparseable", func(o *InferenceEndpointConfig) {
			o.Spec.KVCacheSpec = &KVCacheSpec{EnableL2Cache: ptr(true), L2CacheSpec: &L2CacheSpec{L2CacheBackend: L2BackendTieredStorage, L2CacheSize: "lots"}}
		}, "spec.kvCacheSpec.l2CacheSpec.l2CacheSize", "not a size in bytes"},
		{"l2CacheSize zero", func(o *InferenceEndpointConfig) {
			o.Spec.KVCacheSpec = &KVCacheSpec{EnableL2Cache: ptr(true), L2CacheSpec: &L2CacheSpec{L2CacheBackend: L2BackendTieredStorage, L2CacheSize: "0Gi"}}
		}, "spec.kvCacheSpec.l2CacheSpec.l2CacheSize", "must be positive"},
		{"l2CacheSize too large for int64", func(o *InferenceEndpointConfig) {
			o.Spec.KVCacheSpec = &KVCacheSpec{EnableL2Cache: ptr(true), L2CacheSpec: &L2CacheSpec{L2CacheBackend: L2BackendTieredStorage, L2CacheSize: "9Ei"}}
		}, "spec.kvCacheSpec.l2CacheSpec.l2CacheSize", "too large"},
		{"l2CacheSize over the local storage", func(o *InferenceEndpointConfig) {
			o.Spec.KVCacheSpec = &KVCacheSpec{EnableL2Cache: ptr(true), L2CacheSpec: &L2CacheSpec{L2CacheBackend: "TieredStorage", L2CacheSize: "3801G"}}
		}, "spec.kvCacheSpec.l2CacheSpec.l2CacheSize", "3800 GB of local instance storage of ml.g5.12xlarge"},
		{"l2CacheSize over the local storage of one of the types", func(o *InferenceEndpointConfig) {
			o.Spec.InstanceType, o.Spec.InstanceTypes = "", []string{"ml.g5.12xlarge", "ml.g5.8xlarge"}
			o.Spec.KVCacheSpec = &KVCacheSpec{EnableL2Cache: ptr(true), L2CacheSpec: &L2CacheSpec{L2CacheBackend: L2BackendTieredStorage, L2CacheSize: "1Ti"}}
		}, "spec.kvCacheSpec.l2CacheSpec.l2CacheSize", "900 GB of local instance storage of ml.g5.8xlarge"},
		{"tieredstorage on an instance without local storage", func(o *InferenceEndpointConfig) {
			o.Spec.InstanceType = "ml.m5.xlarge"
			o.Spec.Worker.Resources = &ResourceRequirements{Requests: map[string]Quantity{"cpu": "2"}}
			o.Spec.KVCacheSpec = &KVCacheSpec{EnableL2Cache: ptr(true), L2CacheSpec: &L2CacheSpec{L2CacheBackend: L2BackendTieredStorage}}
		}, "spec.kvCacheSpec.l2CacheSpec.l2CacheBackend", "ml.m5.xlarge has none"},
		{"loadBalancer healthCheckPath", func(o *InferenceEndpointConfig) { o.Spec.LoadBalancer = &LoadBalancer{HealthCheckPath: "ping"} }, "spec.loadBalancer.healthCheckPath", "start with /"},
		{"loadBalancer routingAlgorithm", func(o *InferenceEndpointConfig) { o.Spec.LoadBalancer = &LoadBalancer{RoutingAlgorithm: "random"} }, "spec.loadBalancer.routingAlgorithm", "unsupported"},
		{"loadBalancer idleTimeout", func(o *InferenceEndpointConfig) {
			o.Spec.LoadBalancer = &LoadBalancer{IdleTimeoutSeconds: ptr[int32](4001)}
		}, "spec.loadBalancer.idleTimeoutSeconds", "1-4000"},
		{"metrics scrape interval low", func(o *InferenceEndpointConfig) {
			o.Spec.Metrics = &Metrics{MetricsScrapeIntervalSeconds: ptr[int32](4)}
		}, "spec.metrics.metricsScrapeIntervalSeconds", "5-300"},
		{"metrics scrape interval high", func(o *InferenceEndpointConfig) {
			o.Spec.Metrics = &Metrics{MetricsScrapeIntervalSeconds: ptr[int32](301)}
		}, "spec.metrics.metricsScrapeIntervalSeconds", "5-300"},
		{"metrics port", func(o *InferenceEndpointConfig) {
			o.Spec.Metrics = &Metrics{ModelMetrics: &ModelMetrics{Port: ptr[int32](80)}}
		}, "spec.metrics.modelMetrics.port", "1024-65535"},
		{"tls s3 uri", func(o *InferenceEndpointConfig) {
			o.Spec.TLSConfig = &TLSConfig{TLSCertificateOutputS3URI: "https://b"}
		}, "spec.tlsConfig.tlsCertificateOutputS3Uri", "s3://"},
		{"tls acmArn required", func(o *InferenceEndpointConfig) {
			o.Spec.TLSConfig = &TLSConfig{CustomCertificateConfig: &CustomCertificateConfig{DomainName: "a.example.com"}}
		}, "spec.tlsConfig.customCertificateConfig.acmArn", "required"},
		{"tls domain no wildcard", func(o *InferenceEndpointConfig) {
			o.Spec.TLSConfig = &TLSConfig{CustomCertificateConfig: &CustomCertificateConfig{ACMArn: "arn:aws:acm:us-east-1:123456789012:certificate/abc-1", DomainName: "*.example.com"}}
		}, "spec.tlsConfig.customCertificateConfig.domainName", "wildcard"},
		{"dns hostedZoneId pattern", func(o *InferenceEndpointConfig) {
			o.Spec.TLSConfig = &TLSConfig{CustomCertificateConfig: &CustomCertificateConfig{ACMArn: "arn:aws:acm:us-east-1:123456789012:certificate/abc-1", DomainName: "a.example.com"}}
			o.Spec.DNSConfig = &DNSConfig{HostedZoneID: "abc"}
		}, "spec.dnsConfig.hostedZoneId", "Z[A-Z0-9]"},
		{"dns needs custom certificate", func(o *InferenceEndpointConfig) { o.Spec.DNSConfig = &DNSConfig{HostedZoneID: "Z123"} }, "spec.dnsConfig", "customCertificateConfig"},
		{"serviceAccountName", func(o *InferenceEndpointConfig) { o.Spec.Kubernetes = &KubernetesSpec{ServiceAccountName: "Bad"} }, "spec.kubernetes.serviceAccountName", "DNS-1123"},
		{"tag name required", func(o *InferenceEndpointConfig) { o.Spec.Tags = []Tag{{Value: "v"}} }, "spec.tags[0].name", "required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := decodeOneT[*InferenceEndpointConfig](t, minimalIEC)
			tt.mutate(o)
			o.Default()
			wantOnly(t, o.Validate(), tt.path, tt.msg)
		})
	}
}

func TestValidateJSM(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(o *JumpStartModel)
		path   string
		msg    string
	}{
		{"model required", func(o *JumpStartModel) { o.Spec.Model = nil }, "spec.model", "required"},
		{"modelId required", func(o *JumpStartModel) { o.Spec.Model.ModelID = "" }, "spec.model.modelId", "required"},
		{"modelId from catalog", func(o *JumpStartModel) { o.Spec.Model.ModelID = "no-such-model" }, "spec.model.modelId", "unknown JumpStart model id"},
		{"modelId pattern", func(o *JumpStartModel) { o.Spec.Model.ModelID = "org/model" }, "spec.model.modelId", "63"},
		{"modelVersion semver", func(o *JumpStartModel) { o.Spec.Model.ModelVersion = "v2" }, "spec.model.modelVersion", "2.0.4"},
		{"gatedModelDownloadRole ARN", func(o *JumpStartModel) { o.Spec.Model.GatedModelDownloadRole = "role" }, "spec.model.gatedModelDownloadRole", "IAM role"},
		{"additionalConfigs at most 10", func(o *JumpStartModel) {
			o.Spec.Model.AdditionalConfigs = slices.Repeat([]NameValue{{Name: "a", Value: "b"}}, 11)
		}, "spec.model.additionalConfigs", "at most 10"},
		{"server required", func(o *JumpStartModel) { o.Spec.Server = nil }, "spec.server", "required"},
		{"server instanceType required", func(o *JumpStartModel) { o.Spec.Server.InstanceType = "" }, "spec.server.instanceType", "required"},
		{"model fits the instance", func(o *JumpStartModel) { o.Spec.Model.ModelID = "llama-3.1-70b" }, "spec.server.instanceType", "GPU memory"},
		{"server instanceType catalog", func(o *JumpStartModel) { o.Spec.Server.InstanceType = "ml.nope" }, "spec.server.instanceType", "unknown instance type"},
		{"acceleratorPartitionType bad pattern", func(o *JumpStartModel) { o.Spec.Server.AcceleratorPartitionType = "1g.10gb" }, "spec.server.acceleratorPartitionType", "mig-<g>g.<mem>gb"},
		{"executionRole ARN", func(o *JumpStartModel) { o.Spec.Server.ExecutionRole = "arn:aws:s3:::x" }, "spec.server.executionRole", "IAM role"},
		{"sageMakerEndpoint name pattern", func(o *JumpStartModel) { o.Spec.SageMakerEndpoint = &SageMakerEndpoint{Name: "a b"} }, "spec.sageMakerEndpoint.name", "63"},
		{"environmentVariables value required", func(o *JumpStartModel) { o.Spec.EnvironmentVariables = []NameValue{{Name: "A"}} }, "spec.environmentVariables[0].value", "required"},
		{"environmentVariables at most 100", func(o *JumpStartModel) {
			o.Spec.EnvironmentVariables = slices.Repeat([]NameValue{{Name: "a", Value: "b"}}, 101)
		}, "spec.environmentVariables", "at most 100"},
		{"autoscaling min >= 0", func(o *JumpStartModel) { o.Spec.AutoScalingSpec = &AutoScalingSpec{MinReplicaCount: ptr[int32](-1)} }, "spec.autoScalingSpec.minReplicaCount", ">= 0"},
		{"autoscaling max >= min", func(o *JumpStartModel) {
			o.Spec.AutoScalingSpec = &AutoScalingSpec{MinReplicaCount: ptr[int32](3), MaxReplicaCount: ptr[int32](2)}
		}, "spec.autoScalingSpec.maxReplicaCount", "minReplicaCount"},
		{"autoscaling polling >= 1", func(o *JumpStartModel) { o.Spec.AutoScalingSpec = &AutoScalingSpec{PollingInterval: ptr[int32](0)} }, "spec.autoScalingSpec.pollingInterval", ">= 1"},
		{"autoscaling cooldown >= 0", func(o *JumpStartModel) { o.Spec.AutoScalingSpec = &AutoScalingSpec{CooldownPeriod: ptr[int32](-5)} }, "spec.autoScalingSpec.cooldownPeriod", ">= 0"},
		{"autoscaling initialCooldown >= 0", func(o *JumpStartModel) {
			o.Spec.AutoScalingSpec = &AutoScalingSpec{InitialCooldownPeriod: ptr[int32](-5)}
		}, "spec.autoScalingSpec.initialCooldownPeriod", ">= 0"},
		{"autoscaling scaleDown window", func(o *JumpStartModel) {
			o.Spec.AutoScalingSpec = &AutoScalingSpec{ScaleDownStabilizationTime: ptr[int32](3601)}
		}, "spec.autoScalingSpec.scaleDownStabilizationTime", "0-3600"},
		{"autoscaling scaleUp window", func(o *JumpStartModel) {
			o.Spec.AutoScalingSpec = &AutoScalingSpec{ScaleUpStabilizationTime: ptr[int32](-1)}
		}, "spec.autoScalingSpec.scaleUpStabilizationTime", "0-3600"},
		{"cloudwatch namespace required", func(o *JumpStartModel) {
			o.Spec.AutoScalingSpec = &AutoScalingSpec{CloudWatchTrigger: &CloudWatchTrigger{MetricName: "Invocations", TargetValue: ptr(1.0)}}
		}, "spec.autoScalingSpec.cloudWatchTrigger.namespace", "required"},
		{"cloudwatch targetValue required", func(o *JumpStartModel) {
			o.Spec.AutoScalingSpec = &AutoScalingSpec{CloudWatchTrigger: &CloudWatchTrigger{Namespace: "AWS/SageMaker", MetricName: "Invocations"}}
		}, "spec.autoScalingSpec.cloudWatchTrigger.targetValue", "required"},
		{"cloudwatch period values", func(o *JumpStartModel) {
			o.Spec.AutoScalingSpec = &AutoScalingSpec{CloudWatchTriggerList: []CloudWatchTrigger{{Namespace: "AWS/SageMaker", MetricName: "Invocations", TargetValue: ptr(1.0), MetricCollectionPeriod: ptr[int32](45)}}}
		}, "spec.autoScalingSpec.cloudWatchTriggerList[0].metricCollectionPeriod", "multiple of 60"},
		{"cloudwatch start >= period", func(o *JumpStartModel) {
			o.Spec.AutoScalingSpec = &AutoScalingSpec{CloudWatchTrigger: &CloudWatchTrigger{Namespace: "AWS/SageMaker", MetricName: "Invocations", TargetValue: ptr(1.0), MetricCollectionPeriod: ptr[int32](120), MetricCollectionStartTime: ptr[int32](60)}}
		}, "spec.autoScalingSpec.cloudWatchTrigger.metricCollectionStartTime", ">= metricCollectionPeriod"},
		{"cloudwatch metricType enum", func(o *JumpStartModel) {
			o.Spec.AutoScalingSpec = &AutoScalingSpec{CloudWatchTrigger: &CloudWatchTrigger{Namespace: "AWS/SageMaker", MetricName: "Invocations", TargetValue: ptr(1.0), MetricType: "Max"}}
		}, "spec.autoScalingSpec.cloudWatchTrigger.metricType", "Average, Value"},
		{"prometheus serverAddress URL", func(o *JumpStartModel) {
			o.Spec.AutoScalingSpec = &AutoScalingSpec{PrometheusTrigger: &PrometheusTrigger{ServerAddress: "localhost:9090", Query: "up", TargetValue: ptr(1.0)}}
		}, "spec.autoScalingSpec.prometheusTrigger.serverAddress", "http(s) URL"},
		{"prometheus query required", func(o *JumpStartModel) {
			o.Spec.AutoScalingSpec = &AutoScalingSpec{PrometheusTrigger: &PrometheusTrigger{ServerAddress: "http://p:9090", TargetValue: ptr(1.0)}}
		}, "spec.autoScalingSpec.prometheusTrigger.query", "required"},
		{"prometheus targetValue > 0", func(o *JumpStartModel) {
			o.Spec.AutoScalingSpec = &AutoScalingSpec{PrometheusTriggerList: []PrometheusTrigger{{ServerAddress: "http://p:9090", Query: "up", TargetValue: ptr(0.0)}}}
		}, "spec.autoScalingSpec.prometheusTriggerList[0].targetValue", "> 0"},
		{"l1CacheSize over the instance's memory", func(o *JumpStartModel) { o.Spec.KVCacheSpec = &KVCacheSpec{L1CacheSize: "17Gi"} }, "spec.kvCacheSpec.l1CacheSize", "16 GiB of memory of ml.g5.xlarge"},
		{"l2CacheSize over the local storage", func(o *JumpStartModel) {
			o.Spec.KVCacheSpec = &KVCacheSpec{EnableL2Cache: ptr(true), L2CacheSpec: &L2CacheSpec{L2CacheBackend: L2BackendTieredStorage, L2CacheSize: "251G"}}
		}, "spec.kvCacheSpec.l2CacheSpec.l2CacheSize", "250 GB of local instance storage of ml.g5.xlarge"},
		{"router autoscaling validated", func(o *JumpStartModel) {
			o.Spec.IntelligentRoutingSpec = &IntelligentRoutingSpec{AutoScalingSpec: &AutoScalingSpec{MaxReplicaCount: ptr[int32](0), MinReplicaCount: ptr[int32](0)}}
		}, "spec.intelligentRoutingSpec.autoScalingSpec.maxReplicaCount", ">= 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := decodeOneT[*JumpStartModel](t, minimalJSM)
			tt.mutate(o)
			o.Default()
			wantOnly(t, o.Validate(), tt.path, tt.msg)
		})
	}
	t.Run("every error is reported", func(t *testing.T) {
		o := decodeOneT[*JumpStartModel](t, minimalJSM)
		o.Spec.Model.ModelID = ""
		o.Spec.Server.InstanceType = ""
		o.Spec.Replicas = ptr[int32](-1)
		o.Default()
		err := o.Validate()
		want := []string{"spec.model.modelId", "spec.server.instanceType", "spec.replicas"}
		if got := paths(err); !slices.Equal(got, want) {
			t.Fatalf("got %v, want %v", got, want)
		}
		var l ErrorList
		if !errors.As(err, &l) || !strings.Contains(err.Error(), "spec.server.instanceType: required") {
			t.Errorf("error text %q", err)
		}
	})
}

func TestDecodeErrors(t *testing.T) {
	tests := []struct {
		name string
		src  string
		path string
		msg  string
	}{
		{"unknown top-level field", minimalJSM + "extra: 1\n", "extra", "unknown field"},
		{"unknown spec field", minimalJSM + "  bogus: 1\n", "spec.bogus", "unknown field"},
		{"unknown field at depth", strings.Replace(minimalIEC, "{containerPort: 8000}", "{containerPort: 8000, protocol: TCP}", 1),
			"spec.worker.modelInvocationPort.protocol", "unknown field"},
		{"unknown field in list item", minimalIEC + "  tags: [{name: a, value: b, colour: red}]\n", "spec.tags[0].colour", "unknown field"},
		{"unknown field in trigger", minimalJSM + "  autoScalingSpec: {prometheusTrigger: {serverAddres: x}}\n",
			"spec.autoScalingSpec.prometheusTrigger.serverAddres", "unknown field"},
		{"stale JSM field", strings.Replace(minimalJSM, "{instanceType: ml.g5.xlarge}", "{instanceType: ml.g5.xlarge, maxAutoScaleReplicas: 3}", 1),
			"spec.server.maxAutoScaleReplicas", "unknown field"},
		{"wrong case hints", strings.Replace(minimalJSM, "modelId:", "modelID:", 1), "spec.model.modelID", `did you mean "modelId"`},
		{"IEC field in JSM", minimalJSM + "  worker: {image: x}\n", "spec.worker", "unknown field"},
		{"string expected", strings.Replace(minimalIEC, "image: img", "image: 7", 1), "spec.worker.image", "must be a string"},
		{"integer expected", minimalIEC + "  replicas: two\n", "spec.replicas", "must be an integer"},
		{"fraction for integer", minimalIEC + "  replicas: 1.5\n", "spec.replicas", "must be an integer"},
		{"int32 overflow", minimalIEC + "  replicas: 3000000000\n", "spec.replicas", "out of range"},
		{"bool expected", minimalIEC + "  metrics: {enabled: maybe}\n", "spec.metrics.enabled", "true or false"},
		{"list expected", minimalIEC + "  instanceTypes: ml.g5.xlarge\n", "spec.instanceTypes", "must be a list"},
		{"object expected", minimalIEC + "  kvCacheSpec: 3\n", "spec.kvCacheSpec", "must be an object"},
		{"quantity type", strings.Replace(minimalIEC, `cpu: "4"`, "cpu: [4]", 1), "spec.worker.resources.requests[cpu]", "quantity"},
		{"status timestamp", minimalJSM + "status: {conditions: [{type: Ready, status: \"True\", reason: x, lastTransitionTime: yesterday}]}\n",
			"status.conditions[0].lastTransitionTime", "RFC 3339"},
		{"apiVersion wrong", strings.Replace(minimalJSM, "/v1\n", "/v1alpha1\n", 1), "apiVersion", "unsupported"},
		{"apiVersion missing", strings.Replace(minimalJSM, "apiVersion: inference.sagemaker.aws.amazon.com/v1\n", "", 1), "apiVersion", "required"},
		{"kind unknown", strings.Replace(minimalJSM, "kind: JumpStartModel", "kind: ModelDeployment", 1), "kind", "unsupported kind"},
		{"kind missing", strings.Replace(minimalJSM, "kind: JumpStartModel\n", "", 1), "kind", "required"},
		{"duplicate key", minimalJSM + "  replicas: 1\n  replicas: 2\n", "", "invalid YAML"},
		{"not a mapping", "- a\n- b\n", "", "must be a mapping"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs, err := Decode([]byte(tt.src))
			if err == nil {
				t.Fatalf("Decode accepted it: %+v", objs[0])
			}
			var de *DocumentError
			if !errors.As(err, &de) || de.Index != 0 {
				t.Fatalf("want a DocumentError for document 0, got %v", err)
			}
			wantOnly(t, err, tt.path, tt.msg)
		})
	}
}

func TestDecodeMultiDocument(t *testing.T) {
	t.Run("all documents in order, empty ones skipped", func(t *testing.T) {
		src := "# leading comment\n---\n" + minimalIEC + "---\n# nothing here\n---\n" + minimalJSM + "...\n"
		objs, err := Decode([]byte(src))
		if err != nil {
			t.Fatal(err)
		}
		if len(objs) != 2 || objs[0].GetKind() != KindInferenceEndpointConfig || objs[1].GetKind() != KindJumpStartModel {
			t.Fatalf("got %d objects", len(objs))
		}
	})
	t.Run("errors carry document index, line, kind and name", func(t *testing.T) {
		bad := strings.Replace(minimalJSM, "model:", "modle:", 1)
		src := minimalIEC + "---\n" + bad + "---\n" + minimalIEC + "  oops: 1\n"
		_, err := Decode([]byte(src))
		if err == nil {
			t.Fatal("accepted")
		}
		ierr, ok := err.(interface{ Unwrap() []error })
		if !ok || len(ierr.Unwrap()) != 2 {
			t.Fatalf("want two document errors, got %v", err)
		}
		var des []*DocumentError
		for _, e := range ierr.Unwrap() {
			var de *DocumentError
			if !errors.As(e, &de) {
				t.Fatalf("not a DocumentError: %v", e)
			}
			des = append(des, de)
		}
		iecLines := strings.Count(minimalIEC, "\n")
		jsmLines := strings.Count(bad, "\n")
		if des[0].Index != 1 || des[0].Line != iecLines+2 || des[0].Kind != KindJumpStartModel || des[0].Name != "j1" {
			t.Errorf("first: %+v", des[0])
		}
		if des[1].Index != 2 || des[1].Line != iecLines+jsmLines+3 {
			t.Errorf("second: %+v", des[1])
		}
		want := "document 1 (line " // then the line, kind/name and the path
		if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "JumpStartModel/j1: spec.modle: unknown field") {
			t.Errorf("message %q", err)
		}
		if got := paths(err); !slices.Equal(got, []string{"spec.modle", "spec.oops"}) {
			t.Errorf("paths %v", got)
		}
	})
	t.Run("content on the marker line", func(t *testing.T) {
		objs, err := Decode([]byte(minimalJSM + `--- {apiVersion: inference.sagemaker.aws.amazon.com/v1, kind: JumpStartModel, metadata: {name: j2}, spec: {}}` + "\n"))
		if err != nil || len(objs) != 2 || objs[1].GetMeta().Name != "j2" {
			t.Fatalf("got %v, %v", objs, err)
		}
	})
	t.Run("size limit", func(t *testing.T) {
		_, err := Decode(make([]byte, MaxManifestBytes+1))
		if err == nil || !strings.Contains(err.Error(), "limit") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("document count limit", func(t *testing.T) {
		_, err := Decode([]byte(strings.Repeat(minimalJSM+"---\n", MaxDocuments+1)))
		if err == nil || !strings.Contains(err.Error(), "documents") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("Load defaults and validates every document", func(t *testing.T) {
		objs, err := Load([]byte(minimalIEC + "---\n" + minimalJSM))
		if err != nil || len(objs) != 2 || *objs[1].(*JumpStartModel).Spec.Replicas != 1 {
			t.Fatalf("Load: %v", err)
		}
		_, err = Load([]byte(minimalIEC + "---\n" + strings.Replace(minimalJSM, "ml.g5.xlarge", "ml.g5.nope", 1)))
		var de *DocumentError
		if !errors.As(err, &de) || de.Index != 1 || de.Name != "j1" {
			t.Fatalf("Load error %v", err)
		}
		wantOnly(t, err, "spec.server.instanceType", "unknown instance type")
	})
}

func TestValidateUpdate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(o *InferenceEndpointConfig)
		path   string // "" = allowed
	}{
		{"replicas may change", func(o *InferenceEndpointConfig) { o.Spec.Replicas = ptr[int32](3) }, ""},
		{"name is fixed", func(o *InferenceEndpointConfig) { o.Metadata.Name = "other" }, "metadata.name"},
		{"routing cannot be added", func(o *InferenceEndpointConfig) {
			o.Spec.IntelligentRoutingSpec = &IntelligentRoutingSpec{Enabled: ptr(true)}
		}, "spec.intelligentRoutingSpec"},
		{"env cannot change", func(o *InferenceEndpointConfig) {
			o.Spec.Worker.EnvironmentVariables = []EnvVar{{Name: "A", Value: "1"}}
		}, "spec.worker.environmentVariables"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prev := decodeOneT[*InferenceEndpointConfig](t, minimalIEC)
			next := decodeOneT[*InferenceEndpointConfig](t, minimalIEC)
			prev.Default()
			tt.mutate(next)
			next.Default()
			err := ValidateUpdate(prev, next)
			if tt.path == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			wantOnly(t, err, tt.path, "")
		})
	}
	t.Run("routing enabled is immutable", func(t *testing.T) {
		src := minimalJSM + "  intelligentRoutingSpec: {enabled: true}\n"
		prev, next := decodeOneT[*JumpStartModel](t, src), decodeOneT[*JumpStartModel](t, src)
		*next.Spec.IntelligentRoutingSpec.Enabled = false
		wantOnly(t, ValidateUpdate(prev, next), "spec.intelligentRoutingSpec.enabled", "cannot change")
	})
}

func TestQuantityValue(t *testing.T) {
	tests := []struct {
		in   Quantity
		want float64
		bad  bool
	}{
		{in: "6", want: 6}, {in: "5600m", want: 5.6}, {in: "30Gi", want: 30 << 30}, {in: "1Ki", want: 1024},
		{in: "1.5", want: 1.5}, {in: "2k", want: 2000}, {in: "1e3", want: 1000}, {in: "1E3", want: 1000}, {in: "1Ei", want: 1 << 60},
		{in: "", bad: true}, {in: "lots", bad: true}, {in: "1 Gi", bad: true}, {in: "1Gb", bad: true},
	}
	for _, tt := range tests {
		t.Run(string(tt.in), func(t *testing.T) {
			got, err := tt.in.Value()
			if tt.bad {
				if err == nil {
					t.Fatalf("accepted %q as %v", tt.in, got)
				}
				return
			}
			if err != nil || math.Abs(got-tt.want) > 1e-9*tt.want {
				t.Fatalf("got %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

func TestStatusRoundTrip(t *testing.T) {
	src := minimalJSM + `status:
  state: DeploymentComplete
  replicas: 2
  selector: app=j1
  observedGeneration: 3
  conditions:
  - {type: Ready, status: "True", reason: Deployed, lastTransitionTime: "2026-12-02T18:00:00Z", observedGeneration: 3}
  endpoints: {url: "http://127.0.0.1:8080/endpoints/j1/invocations", sagemaker: {state: CreationCompleted}}
`
	o := decodeOneT[*JumpStartModel](t, src)
	st := o.GetStatus()
	if st.State != StateDeploymentComplete || !st.State.Valid() || st.Replicas != 2 || st.Conditions[0].Reason != ReasonDeployed || st.Endpoints.URL == "" {
		t.Fatalf("status decoded wrong: %+v", st)
	}
	if State("Running").Valid() {
		t.Error("Running accepted as a state")
	}
	o.Default()
	if err := o.Validate(); err != nil {
		t.Fatalf("status must not affect validation: %v", err)
	}
}

func BenchmarkLoad(b *testing.B) {
	data, err := os.ReadFile(filepath.Join("testdata", "examples-iec-kv-routing.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := Load(data); err != nil {
			b.Fatal(err)
		}
	}
}

// A quantity reads back in the form it was written, a number as a number
// and a string as a string, as the API server keeps an int-or-string:
// kubectl apply compares the two.
func TestQuantityFormRoundTrips(t *testing.T) {
	in := `{"requests":{"cpu":"6","memory":"30Gi","nvidia.com/gpu":1},"limits":{"nvidia.com/gpu":"1","nvidia.com/mig-4g.71gb":1}}`
	var r ResourceRequirements
	if err := json.Unmarshal([]byte(in), &r); err != nil {
		t.Fatal(err)
	}
	if r.Requests["nvidia.com/gpu"] != "1" || r.Limits["nvidia.com/gpu"] != "1" {
		t.Fatalf("decoded %+v", r)
	}
	out, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var got, want map[string]any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(in), &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("round trip:\n got %s\nwant %s", out, in)
	}
	// A value set in code under a key read as a number stays valid JSON.
	r.Requests["nvidia.com/gpu"] = "2Gi"
	if out, err := json.Marshal(r); err != nil || !strings.Contains(string(out), `"nvidia.com/gpu":"2Gi"`) {
		t.Fatalf("after a change: %s, %v", out, err)
	}
}
