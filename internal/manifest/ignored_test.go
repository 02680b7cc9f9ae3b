package manifest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const ignoredIEC = `apiVersion: inference.sagemaker.aws.amazon.com/v1
kind: InferenceEndpointConfig
metadata: {name: all-ignored}
spec:
  modelName: Llama-3.1-8B-Instruct
  modelVersion: 1.0.0
  instanceType: ml.g5.24xlarge
  InitialReplicaCount: 2
  modelSourceConfig:
    modelSourceType: huggingface
    huggingFaceModel: {modelId: meta-llama/Llama-3.1-8B-Instruct, tokenSecretRef: {name: hf, key: token}}
  worker:
    image: vllm/vllm-openai:latest
    modelInvocationPort: {containerPort: 8000}
    modelVolumeMount: {name: model-weights}
    resources: {requests: {nvidia.com/gpu: "1"}, limits: {nvidia.com/gpu: "1"}}
    args: ["--max-model-len", "8192"]
    command: ["python3"]
    workingDir: /srv
    probes: {readinessProbe: {httpGet: {path: /health, port: 8000}}}
    requestLimits: {maxConcurrentRequests: 4, overflowStatusCode: 503}
    environmentVariables:
      - {name: PLAIN, value: "1"}
      - {name: SECRET, valueFrom: {secretKeyRef: {name: s, key: k}}}
  kubernetes: {serviceAccountName: sa, schedulerName: custom}
  loadBalancer: {healthCheckPath: /healthz, idleTimeoutSeconds: 120}
  metrics: {enabled: false}
  tlsConfig:
    customCertificateConfig: {acmArn: "arn:aws:acm:us-east-1:123456789012:certificate/0a1b2c3d-0000-1111-2222-333344445555", domainName: models.example.com}
  dnsConfig: {hostedZoneId: Z0123456789ABC}
  kvCacheSpec: {enableL2Cache: true, l2CacheSpec: {l2CacheBackend: tieredstorage}, cacheConfigFile: /etc/lmcache.yaml}
  intelligentRoutingSpec: {enabled: true, autoScalingSpec: {maxReplicaCount: 2}}
  tags: [{name: team, value: ml}]
`

const ignoredJSM = `apiVersion: inference.sagemaker.aws.amazon.com/v1
kind: JumpStartModel
metadata: {name: js}
spec:
  model: {modelId: deepseek-llm-r1-distill-qwen-1-5b, acceptEula: true, gatedModelDownloadRole: "arn:aws:iam::123456789012:role/dl"}
  server: {instanceType: ml.g5.8xlarge, executionRole: "arn:aws:iam::123456789012:role/exec"}
  tlsConfig: {tlsCertificateOutputS3Uri: "s3://certs/out"}
  metrics: {metricsScrapeIntervalSeconds: 30}
`

func TestIgnoredFields(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
		want      []string
	}{
		{"iec", ignoredIEC, []string{
			"spec.tlsConfig", "spec.dnsConfig", "spec.loadBalancer.healthCheckPath", "spec.loadBalancer.idleTimeoutSeconds",
			"spec.metrics.enabled", "spec.nodeAffinity?", "spec.InitialReplicaCount", "spec.modelVersion", "spec.tags",
			"spec.worker.args", "spec.worker.command", "spec.worker.workingDir", "spec.worker.probes",
			"spec.worker.requestLimits.overflowStatusCode", "spec.worker.environmentVariables[1].valueFrom",
			"spec.kubernetes.serviceAccountName", "spec.kubernetes.schedulerName",
			"spec.modelSourceConfig.huggingFaceModel.tokenSecretRef", "spec.kvCacheSpec.cacheConfigFile",
			"spec.intelligentRoutingSpec.autoScalingSpec"}},
		{"jsm", ignoredJSM, []string{"spec.tlsConfig", "spec.metrics.metricsScrapeIntervalSeconds",
			"spec.model.acceptEula", "spec.model.gatedModelDownloadRole", "spec.server.executionRole"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs, err := Load([]byte(tc.doc))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, f := range IgnoredFields(objs[0]) {
				got = append(got, f.Path)
				if f.Reason == "" || !strings.HasPrefix(f.Message(), f.Path+" has no effect here: ") {
					t.Errorf("field %+v: message %q", f, f.Message())
				}
			}
			var want []string
			for _, w := range tc.want {
				if !strings.HasSuffix(w, "?") { // nodeAffinity is exclusive with instanceType; not set here
					want = append(want, w)
				}
			}
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("ignored fields\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		})
	}
}

// TestIgnoredKVCacheFields: tieredstorage is a real L2 backend (no
// warning); the capstan sizes warn only where they size nothing.
func TestIgnoredKVCacheFields(t *testing.T) {
	jsm := ignoredJSM[:strings.Index(ignoredJSM, "spec:")] + "spec:\n  model: {modelId: deepseek-llm-r1-distill-qwen-1-5b}\n  server: {instanceType: ml.g5.8xlarge}\n  kvCacheSpec: "
	for _, tc := range []struct {
		name, kv string
		want     []string
	}{
		{"tieredstorage", "{enableL2Cache: true, l2CacheSpec: {l2CacheBackend: tieredstorage}}", nil},
		{"tieredstorage any case, sized", "{l1CacheSize: 8Gi, enableL2Cache: true, l2CacheSpec: {l2CacheBackend: TieredStorage, l2CacheSize: 20Gi}}", nil},
		{"redis sized", `{enableL2Cache: true, l2CacheSpec: {l2CacheBackend: redis, l2CacheLocalUrl: "redis://127.0.0.1:6379", l2CacheSize: 20Gi}}`,
			[]string{"spec.kvCacheSpec.l2CacheSpec.l2CacheSize"}},
		{"tieredstorage sized, L2 off", "{enableL2Cache: false, l2CacheSpec: {l2CacheBackend: tieredstorage, l2CacheSize: 20Gi}}",
			[]string{"spec.kvCacheSpec.l2CacheSpec.l2CacheSize"}},
		{"L1 off, sized", "{enableL1Cache: false, l1CacheSize: 8Gi}", []string{"spec.kvCacheSpec.l1CacheSize"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs, err := Load([]byte(jsm + tc.kv + "\n"))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, f := range IgnoredFields(objs[0]) {
				got = append(got, f.Path)
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("ignored %v, want %v", got, tc.want)
			}
		})
	}
}

// TestIgnoredFieldsOfDefaultsAreNone: the published examples' ignored fields
// are logged for a reader; a defaulted minimal manifest warns about nothing.
func TestIgnoredFieldsOfDefaultsAreNone(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.yaml"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		objs, err := Load(b)
		if err != nil {
			continue // some testdata are invalid on purpose
		}
		for _, o := range objs {
			for _, fld := range IgnoredFields(o) {
				t.Logf("%s: %s", f, fld.Message())
			}
		}
	}
	objs, err := Load([]byte(ignoredJSM[:strings.Index(ignoredJSM, "spec:")] + "spec:\n  model: {modelId: deepseek-llm-r1-distill-qwen-1-5b}\n  server: {instanceType: ml.g5.8xlarge}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := IgnoredFields(objs[0]); len(got) != 0 {
		t.Fatalf("a minimal defaulted JSM warns: %+v", got)
	}
}

// TestIgnoredFieldRulesDocumented: every rule has a reason and kinds, and
// docs/manifests.md lists each in its "Fields accepted without effect" table.
func TestIgnoredFieldRulesDocumented(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "manifests.md"))
	if err != nil {
		t.Fatal(err)
	}
	i := strings.Index(string(doc), "Fields accepted without effect")
	if i < 0 {
		t.Fatal(`docs/manifests.md has no "Fields accepted without effect" section`)
	}
	for _, r := range IgnoredFieldRules() {
		if r.Reason == "" || len(r.Kinds) == 0 || r.When == "" {
			t.Errorf("rule %+v incomplete", r.Path)
		}
		if !strings.Contains(string(doc[i:]), "`"+r.Path+"`") {
			t.Errorf("docs/manifests.md does not list `%s`", r.Path)
		}
	}
}
