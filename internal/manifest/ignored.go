package manifest

import "fmt"

// IgnoredField is one field of a manifest that capstan accepts (it decodes
// and validates) but that has no effect here. The deployment controller
// turns each into a Warning event, `capstan describe` lists them and
// `capstan apply` prints them; all three come from IgnoredFields.
type IgnoredField struct {
	// Path is the field as the user wrote it, e.g. spec.tlsConfig or
	// spec.worker.environmentVariables[1].valueFrom.
	Path string `json:"path"`
	// Reason says why it has no effect here.
	Reason string `json:"reason"`
}

// ReasonIgnoredField is the reason of the Warning event for an ignored field.
const ReasonIgnoredField = "IgnoredField"

// Message is the one-line warning: "spec.tlsConfig has no effect here: …".
func (f IgnoredField) Message() string { return f.Path + " has no effect here: " + f.Reason }

// IgnoredFieldRule is one row of the table: a field (Path, with [i] for
// any list index), the kinds that have it, when it counts as set (When) and
// why it does nothing.
type IgnoredFieldRule struct {
	Path   string
	Kinds  []string
	When   string // "set" or the condition, e.g. "not /ping"
	Reason string
	iec    func(*InferenceEndpointConfigSpec) []string // concrete paths set; nil = not an IEC field
	jsm    func(*JumpStartModelSpec) []string
}

var bothKinds = []string{KindInferenceEndpointConfig, KindJumpStartModel}

// when returns []string{p} if cond, else nil.
func when(cond bool, p string) []string {
	if cond {
		return []string{p}
	}
	return nil
}

// ignoredFieldRules is THE list of accepted-but-ineffective fields. Fields
// the schema requires (worker.image, worker.modelInvocationPort,
// worker.modelVolumeMount) describe the container that capstan's engine
// stands in for; they are documented, not warned, or every manifest would
// warn.
var ignoredFieldRules = []IgnoredFieldRule{
	{Path: "spec.tlsConfig", Kinds: bothKinds, When: "set",
		Reason: "capstan issues no certificates and writes none to S3; TLS is whatever fronts the capstan listener",
		iec:    func(s *InferenceEndpointConfigSpec) []string { return when(s.TLSConfig != nil, "spec.tlsConfig") },
		jsm:    func(s *JumpStartModelSpec) []string { return when(s.TLSConfig != nil, "spec.tlsConfig") }},
	{Path: "spec.dnsConfig", Kinds: bothKinds, When: "set",
		Reason: "capstan creates no Route 53 records; the deployment is reached at the capstan gateway URL",
		iec:    func(s *InferenceEndpointConfigSpec) []string { return when(s.DNSConfig != nil, "spec.dnsConfig") },
		jsm:    func(s *JumpStartModelSpec) []string { return when(s.DNSConfig != nil, "spec.dnsConfig") }},
	{Path: "spec.loadBalancer.healthCheckPath", Kinds: bothKinds, When: "not " + DefaultHealthCheckPath,
		Reason: "there is no load-balancer target group; capstan health-checks each replica's engine itself",
		iec:    func(s *InferenceEndpointConfigSpec) []string { return lbHealth(s.LoadBalancer) },
		jsm:    func(s *JumpStartModelSpec) []string { return lbHealth(s.LoadBalancer) }},
	{Path: "spec.loadBalancer.idleTimeoutSeconds", Kinds: bothKinds, When: fmt.Sprintf("not %d", DefaultLBIdleTimeoutSeconds),
		Reason: "the gateway's connection timeouts come from capstan.yaml (limits), not from the manifest",
		iec:    func(s *InferenceEndpointConfigSpec) []string { return lbIdle(s.LoadBalancer) },
		jsm:    func(s *JumpStartModelSpec) []string { return lbIdle(s.LoadBalancer) }},
	{Path: "spec.metrics", Kinds: bothKinds, When: "enabled false, or another interval, path or port than the defaults",
		Reason: "the engine always exposes its vLLM-named metrics at /metrics on the port capstan gives it; capstan does not scrape on this schedule",
		iec:    func(s *InferenceEndpointConfigSpec) []string { return metricsSet(s.Metrics) },
		jsm:    func(s *JumpStartModelSpec) []string { return metricsSet(s.Metrics) }},
	{Path: "spec.dataCapture", Kinds: bothKinds, When: "set",
		Reason: "capstan does not capture requests or responses",
		iec:    func(s *InferenceEndpointConfigSpec) []string { return when(len(s.DataCapture) > 0, "spec.dataCapture") },
		jsm:    func(s *JumpStartModelSpec) []string { return when(len(s.DataCapture) > 0, "spec.dataCapture") }},
	{Path: "spec.modelCacheConfig", Kinds: bothKinds, When: "set",
		Reason: "capstan has no image or weights cache on nodes; model folders come from the model-source cache",
		iec: func(s *InferenceEndpointConfigSpec) []string {
			return when(len(s.ModelCacheConfig) > 0, "spec.modelCacheConfig")
		},
		jsm: func(s *JumpStartModelSpec) []string {
			return when(len(s.ModelCacheConfig) > 0, "spec.modelCacheConfig")
		}},
	{Path: "spec.pdSpec", Kinds: []string{KindInferenceEndpointConfig}, When: "set",
		Reason: "disaggregated prefill/decode is not implemented; every replica does both",
		iec:    func(s *InferenceEndpointConfigSpec) []string { return when(len(s.PDSpec) > 0, "spec.pdSpec") }},
	{Path: "spec.nodeAffinity", Kinds: []string{KindInferenceEndpointConfig}, When: "set",
		Reason: "capstan does not schedule on node labels; use instanceType or instanceTypes",
		iec: func(s *InferenceEndpointConfigSpec) []string {
			return when(len(s.NodeAffinity) > 0, "spec.nodeAffinity")
		}},
	{Path: "spec.InitialReplicaCount", Kinds: []string{KindInferenceEndpointConfig}, When: "set",
		Reason: "deprecated upstream and without effect there too; use replicas and autoScalingSpec.minReplicaCount",
		iec: func(s *InferenceEndpointConfigSpec) []string {
			return when(s.InitialReplicaCount != nil, "spec.InitialReplicaCount")
		}},
	{Path: "spec.modelVersion", Kinds: []string{KindInferenceEndpointConfig}, When: "set",
		Reason: "the registered SageMaker endpoint carries no version label",
		iec:    func(s *InferenceEndpointConfigSpec) []string { return when(s.ModelVersion != "", "spec.modelVersion") }},
	{Path: "spec.tags", Kinds: []string{KindInferenceEndpointConfig}, When: "set",
		Reason: "the registered SageMaker endpoint gets no tags from the manifest",
		iec:    func(s *InferenceEndpointConfigSpec) []string { return when(len(s.Tags) > 0, "spec.tags") }},
	{Path: "spec.worker.args, spec.worker.command", Kinds: []string{KindInferenceEndpointConfig}, When: "set",
		Reason: "they are for the container image; capstan runs its simulated engine and does not pass them",
		iec: func(s *InferenceEndpointConfigSpec) []string {
			if s.Worker == nil {
				return nil
			}
			return append(when(len(s.Worker.Args) > 0, "spec.worker.args"), when(len(s.Worker.Command) > 0, "spec.worker.command")...)
		}},
	{Path: "spec.worker.workingDir", Kinds: []string{KindInferenceEndpointConfig}, When: "set",
		Reason: "the engine runs in its own replica directory",
		iec: func(s *InferenceEndpointConfigSpec) []string {
			return when(s.Worker != nil && s.Worker.WorkingDir != "", "spec.worker.workingDir")
		}},
	{Path: "spec.worker.probes", Kinds: []string{KindInferenceEndpointConfig}, When: "set",
		Reason: "capstan probes each replica's engine itself (its /health) with its own timings",
		iec: func(s *InferenceEndpointConfigSpec) []string {
			return when(s.Worker != nil && s.Worker.Probes != nil, "spec.worker.probes")
		}},
	{Path: "spec.worker.requestLimits.overflowStatusCode", Kinds: []string{KindInferenceEndpointConfig}, When: fmt.Sprintf("not %d", DefaultOverflowStatusCode),
		Reason: "the gateway answers a full queue with 429 and Retry-After, whatever the code",
		iec: func(s *InferenceEndpointConfigSpec) []string {
			w := s.Worker
			return when(w != nil && w.RequestLimits != nil && w.RequestLimits.OverflowStatusCode != nil && *w.RequestLimits.OverflowStatusCode != DefaultOverflowStatusCode,
				"spec.worker.requestLimits.overflowStatusCode")
		}},
	{Path: "spec.worker.environmentVariables[i].valueFrom", Kinds: []string{KindInferenceEndpointConfig}, When: "set",
		Reason: "capstan resolves no Kubernetes secrets or config maps; the variable is not set",
		iec: func(s *InferenceEndpointConfigSpec) []string {
			if s.Worker == nil {
				return nil
			}
			var out []string
			for i, e := range s.Worker.EnvironmentVariables {
				if len(e.ValueFrom) > 0 {
					out = append(out, fmt.Sprintf("spec.worker.environmentVariables[%d].valueFrom", i))
				}
			}
			return out
		}},
	{Path: "spec.kubernetes.initContainers, volumes, serviceAccountName, schedulerName", Kinds: []string{KindInferenceEndpointConfig}, When: "set",
		Reason: "capstan runs no pods: there are no init containers, volumes, service accounts or schedulers",
		iec: func(s *InferenceEndpointConfigSpec) []string {
			k := s.Kubernetes
			if k == nil {
				return nil
			}
			var out []string
			out = append(out, when(len(k.InitContainers) > 0, "spec.kubernetes.initContainers")...)
			out = append(out, when(len(k.Volumes) > 0, "spec.kubernetes.volumes")...)
			out = append(out, when(k.ServiceAccountName != "", "spec.kubernetes.serviceAccountName")...)
			return append(out, when(k.SchedulerName != "", "spec.kubernetes.schedulerName")...)
		}},
	{Path: "spec.modelSourceConfig.huggingFaceModel.tokenSecretRef", Kinds: []string{KindInferenceEndpointConfig}, When: "set",
		Reason: "capstan reads no Kubernetes secrets; the hub token is capstan serve's HF_TOKEN",
		iec: func(s *InferenceEndpointConfigSpec) []string {
			c := s.ModelSourceConfig
			return when(c != nil && c.HuggingFaceModel != nil && c.HuggingFaceModel.TokenSecretRef != nil,
				"spec.modelSourceConfig.huggingFaceModel.tokenSecretRef")
		}},
	{Path: "spec.modelSourceConfig.fsxStorage.dnsName", Kinds: []string{KindInferenceEndpointConfig}, When: "set",
		Reason: "capstan reads FSx sources from its fsx root by fileSystemId and mountName",
		iec: func(s *InferenceEndpointConfigSpec) []string {
			c := s.ModelSourceConfig
			return when(c != nil && c.FSxStorage != nil && c.FSxStorage.DNSName != "", "spec.modelSourceConfig.fsxStorage.dnsName")
		}},
	{Path: "spec.kvCacheSpec.cacheConfigFile", Kinds: bothKinds, When: "set",
		Reason: "capstan configures its cache tiers from the other kvCacheSpec fields",
		iec:    func(s *InferenceEndpointConfigSpec) []string { return cacheFile(s.KVCacheSpec) },
		jsm:    func(s *JumpStartModelSpec) []string { return cacheFile(s.KVCacheSpec) }},
	{Path: "spec.kvCacheSpec.l1CacheSize", Kinds: bothKinds, When: "enableL1Cache false",
		Reason: "the L1 tier is off, so it has no size",
		iec:    func(s *InferenceEndpointConfigSpec) []string { return l1SizeOff(s.KVCacheSpec) },
		jsm:    func(s *JumpStartModelSpec) []string { return l1SizeOff(s.KVCacheSpec) }},
	{Path: "spec.kvCacheSpec.l2CacheSpec.l2CacheSize", Kinds: bothKinds, When: "l2CacheBackend redis, or enableL2Cache not true",
		Reason: "it sizes the tieredstorage tier only; a redis L2 is bounded by the Redis server's own memory",
		iec:    func(s *InferenceEndpointConfigSpec) []string { return l2SizeUnused(s.KVCacheSpec) },
		jsm:    func(s *JumpStartModelSpec) []string { return l2SizeUnused(s.KVCacheSpec) }},
	{Path: "spec.intelligentRoutingSpec.autoScalingSpec", Kinds: bothKinds, When: "set",
		Reason: "the router is part of the capstan gateway, not a separate deployment to scale",
		iec:    func(s *InferenceEndpointConfigSpec) []string { return routerScaling(s.IntelligentRoutingSpec) },
		jsm:    func(s *JumpStartModelSpec) []string { return routerScaling(s.IntelligentRoutingSpec) }},
	{Path: "spec.model.acceptEula", Kinds: []string{KindJumpStartModel}, When: "true",
		Reason: "capstan's catalog models carry no EULA gate",
		jsm: func(s *JumpStartModelSpec) []string {
			return when(s.Model != nil && s.Model.AcceptEula, "spec.model.acceptEula")
		}},
	{Path: "spec.model.gatedModelDownloadRole", Kinds: []string{KindJumpStartModel}, When: "set",
		Reason: "capstan assumes no IAM roles",
		jsm: func(s *JumpStartModelSpec) []string {
			return when(s.Model != nil && s.Model.GatedModelDownloadRole != "", "spec.model.gatedModelDownloadRole")
		}},
	{Path: "spec.model.additionalConfigs", Kinds: []string{KindJumpStartModel}, When: "set",
		Reason: "JumpStart's extra configuration is not modelled; the catalog entry decides",
		jsm: func(s *JumpStartModelSpec) []string {
			return when(s.Model != nil && len(s.Model.AdditionalConfigs) > 0, "spec.model.additionalConfigs")
		}},
	{Path: "spec.server.executionRole", Kinds: []string{KindJumpStartModel}, When: "set",
		Reason: "capstan assumes no IAM roles",
		jsm: func(s *JumpStartModelSpec) []string {
			return when(s.Server != nil && s.Server.ExecutionRole != "", "spec.server.executionRole")
		}},
}

func lbHealth(lb *LoadBalancer) []string {
	return when(lb != nil && lb.HealthCheckPath != "" && lb.HealthCheckPath != DefaultHealthCheckPath, "spec.loadBalancer.healthCheckPath")
}

func lbIdle(lb *LoadBalancer) []string {
	return when(lb != nil && lb.IdleTimeoutSeconds != nil && *lb.IdleTimeoutSeconds != DefaultLBIdleTimeoutSeconds, "spec.loadBalancer.idleTimeoutSeconds")
}

func metricsSet(m *Metrics) []string {
	if m == nil {
		return nil
	}
	var out []string
	out = append(out, when(m.Enabled != nil && !*m.Enabled, "spec.metrics.enabled")...)
	out = append(out, when(m.MetricsScrapeIntervalSeconds != nil && *m.MetricsScrapeIntervalSeconds != DefaultMetricsScrapeSeconds, "spec.metrics.metricsScrapeIntervalSeconds")...)
	if mm := m.ModelMetrics; mm != nil {
		out = append(out, when(mm.Path != "" && mm.Path != DefaultMetricsPath, "spec.metrics.modelMetrics.path")...)
		out = append(out, when(mm.Port != nil && *mm.Port != DefaultMetricsPort, "spec.metrics.modelMetrics.port")...)
	}
	return out
}

func cacheFile(kv *KVCacheSpec) []string {
	return when(kv != nil && kv.CacheConfigFile != "", "spec.kvCacheSpec.cacheConfigFile")
}

func l1SizeOff(kv *KVCacheSpec) []string {
	return when(kv != nil && kv.L1CacheSize != "" && !kv.L1On(), "spec.kvCacheSpec.l1CacheSize")
}

func l2SizeUnused(kv *KVCacheSpec) []string {
	return when(kv != nil && kv.L2CacheSpec != nil && kv.L2CacheSpec.L2CacheSize != "" && kv.L2Backend() != L2BackendTieredStorage,
		"spec.kvCacheSpec.l2CacheSpec.l2CacheSize")
}

func routerScaling(ir *IntelligentRoutingSpec) []string {
	return when(ir != nil && ir.AutoScalingSpec != nil, "spec.intelligentRoutingSpec.autoScalingSpec")
}

// IgnoredFieldRules returns the table (for docs and tests).
func IgnoredFieldRules() []IgnoredFieldRule {
	return append([]IgnoredFieldRule(nil), ignoredFieldRules...)
}

// IgnoredFields lists the fields of obj (defaulted or not) that are set and
// have no effect here, in table order. Nil when there are none.
func IgnoredFields(obj Object) []IgnoredField {
	var out []IgnoredField
	for _, r := range ignoredFieldRules {
		var paths []string
		switch o := obj.(type) {
		case *InferenceEndpointConfig:
			if r.iec != nil {
				paths = r.iec(&o.Spec)
			}
		case *JumpStartModel:
			if r.jsm != nil {
				paths = r.jsm(&o.Spec)
			}
		}
		for _, p := range paths {
			out = append(out, IgnoredField{Path: p, Reason: r.Reason})
		}
	}
	return out
}

// IgnoredFieldMessages is IgnoredFields as warning lines.
func IgnoredFieldMessages(obj Object) []string {
	var out []string
	for _, f := range IgnoredFields(obj) {
		out = append(out, f.Message())
	}
	return out
}
