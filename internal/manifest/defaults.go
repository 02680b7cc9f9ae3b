package manifest

import "strconv"

// Reference defaults (HyperPod inference operator CRDs, chart 2.2.2/2.3.0).
const (
	DefaultNamespace              = "default"
	DefaultReplicas               = 1
	DefaultMaxDeployTimeSeconds   = 3600
	DefaultInvocationEndpoint     = "invocations"
	DefaultHealthCheckPath        = "/ping"
	DefaultLBIdleTimeoutSeconds   = 60
	DefaultMetricsScrapeSeconds   = 15
	DefaultMetricsPath            = "/metrics"
	DefaultMetricsPort            = 8080
	DefaultPortName               = "http"
	DefaultModelMountPath         = "/opt/ml/model"
	DefaultOverflowStatusCode     = 429
	DefaultModelHubName           = "SageMakerPublicHub"
	DefaultMinReplicaCount        = 1
	DefaultMaxReplicaCount        = 5
	DefaultPollingInterval        = 30
	DefaultCooldownPeriod         = 300
	DefaultInitialCooldownPeriod  = 300
	DefaultScaleDownStabilization = 300
	DefaultScaleUpStabilization   = 0
	DefaultMetricCollectionPeriod = 300
	DefaultMetricCollectionStart  = 300
	DefaultMetricStat             = "Average"
)

func ptr[T any](v T) *T { return &v }

func setDefault[T any](p **T, v T) {
	if *p == nil {
		*p = ptr(v)
	}
}

func setString(p *string, v string) {
	if *p == "" {
		*p = v
	}
}

func defaultMeta(m *ObjectMeta) { setString(&m.Namespace, DefaultNamespace) }

// Default fills unset IEC fields with the reference defaults.
func (o *InferenceEndpointConfig) Default() {
	defaultMeta(&o.Metadata)
	s := &o.Spec
	setDefault(&s.Replicas, DefaultReplicas)
	setString(&s.InvocationEndpoint, DefaultInvocationEndpoint)
	setDefault(&s.MaxDeployTimeInSeconds, DefaultMaxDeployTimeSeconds)
	if w := s.Worker; w != nil {
		if w.ModelInvocationPort != nil {
			setString(&w.ModelInvocationPort.Name, DefaultPortName)
		}
		if w.ModelVolumeMount != nil {
			setString(&w.ModelVolumeMount.MountPath, DefaultModelMountPath)
		}
		if w.RequestLimits != nil {
			setDefault(&w.RequestLimits.OverflowStatusCode, DefaultOverflowStatusCode)
		}
	}
	defaultCommon(o.Metadata.Name, &s.LoadBalancer, &s.Metrics, s.AutoScalingSpec, s.KVCacheSpec, s.IntelligentRoutingSpec)
}

// Default fills unset JSM fields with the reference defaults.
func (o *JumpStartModel) Default() {
	defaultMeta(&o.Metadata)
	s := &o.Spec
	setDefault(&s.Replicas, DefaultReplicas)
	setDefault(&s.MaxDeployTimeInSeconds, DefaultMaxDeployTimeSeconds)
	if s.Model != nil {
		setString(&s.Model.ModelHubName, DefaultModelHubName)
	}
	if s.Server != nil {
		if s.Server.Validations == nil {
			s.Server.Validations = &ServerValidations{}
		}
		setDefault(&s.Server.Validations.AcceleratorPartitionValidation, true)
	}
	if s.SageMakerEndpoint == nil {
		s.SageMakerEndpoint = &SageMakerEndpoint{}
	}
	defaultCommon(o.Metadata.Name, &s.LoadBalancer, &s.Metrics, s.AutoScalingSpec, s.KVCacheSpec, s.IntelligentRoutingSpec)
}

// defaultCommon defaults the blocks both kinds share. Load balancer and
// metrics always exist once defaulted (their defaults apply to every
// deployment); autoscaling, KV cache and routing stay absent when absent,
// because their presence is what switches them on.
func defaultCommon(name string, lb **LoadBalancer, m **Metrics, as *AutoScalingSpec, kv *KVCacheSpec, ir *IntelligentRoutingSpec) {
	if *lb == nil {
		*lb = &LoadBalancer{}
	}
	setString(&(*lb).HealthCheckPath, DefaultHealthCheckPath)
	setString(&(*lb).RoutingAlgorithm, LBLeastOutstandingRequests)
	setDefault(&(*lb).IdleTimeoutSeconds, DefaultLBIdleTimeoutSeconds)

	if *m == nil {
		*m = &Metrics{}
	}
	setDefault(&(*m).Enabled, true)
	setDefault(&(*m).MetricsScrapeIntervalSeconds, DefaultMetricsScrapeSeconds)
	if (*m).ModelMetrics == nil {
		(*m).ModelMetrics = &ModelMetrics{}
	}
	setString(&(*m).ModelMetrics.Path, DefaultMetricsPath)
	setDefault(&(*m).ModelMetrics.Port, DefaultMetricsPort)

	as.Default(name)
	if kv != nil {
		setDefault(&kv.EnableL1Cache, true)
		setDefault(&kv.EnableL2Cache, false)
	}
	if ir != nil {
		setDefault(&ir.Enabled, false)
		setString(&ir.RoutingStrategy, RoutingPrefixAware)
		ir.AutoScalingSpec.Default(name + "-router")
	}
}

// Default fills the autoscaling defaults; name (the deployment's) is used
// for trigger names left empty. Safe on a nil receiver.
func (a *AutoScalingSpec) Default(name string) {
	if a == nil {
		return
	}
	setDefault(&a.MinReplicaCount, DefaultMinReplicaCount)
	setDefault(&a.MaxReplicaCount, DefaultMaxReplicaCount)
	setDefault(&a.PollingInterval, DefaultPollingInterval)
	setDefault(&a.CooldownPeriod, DefaultCooldownPeriod)
	setDefault(&a.InitialCooldownPeriod, DefaultInitialCooldownPeriod)
	setDefault(&a.ScaleDownStabilizationTime, DefaultScaleDownStabilization)
	setDefault(&a.ScaleUpStabilizationTime, DefaultScaleUpStabilization)
	// List entries get an index suffix so that defaulted names stay unique.
	cw := func(t *CloudWatchTrigger, suffix string) {
		setString(&t.Name, name+"-scaled-object-cloudwatch-trigger"+suffix)
		setDefault(&t.ActivationTargetValue, 0)
		setDefault(&t.MinValue, 0)
		setDefault(&t.MetricCollectionStartTime, DefaultMetricCollectionStart)
		setDefault(&t.MetricCollectionPeriod, DefaultMetricCollectionPeriod)
		setString(&t.MetricStat, DefaultMetricStat)
		setString(&t.MetricType, MetricTypeAverage)
		setDefault(&t.UseCachedMetrics, true)
	}
	prom := func(t *PrometheusTrigger, suffix string) {
		setString(&t.Name, name+"-scaled-object-prometheus-trigger"+suffix)
		setDefault(&t.ActivationTargetValue, 0)
		setString(&t.MetricType, MetricTypeAverage)
		setDefault(&t.UseCachedMetrics, true)
	}
	if a.CloudWatchTrigger != nil {
		cw(a.CloudWatchTrigger, "")
	}
	for i := range a.CloudWatchTriggerList {
		cw(&a.CloudWatchTriggerList[i], "-"+strconv.Itoa(i))
	}
	if a.PrometheusTrigger != nil {
		prom(a.PrometheusTrigger, "")
	}
	for i := range a.PrometheusTriggerList {
		prom(&a.PrometheusTriggerList[i], "-"+strconv.Itoa(i))
	}
}

// CloudWatchTriggers are the CloudWatch triggers in force: the list when it
// has any, else the single trigger (the reference's rule). Safe on nil.
func (a *AutoScalingSpec) CloudWatchTriggers() []CloudWatchTrigger {
	switch {
	case a == nil:
		return nil
	case len(a.CloudWatchTriggerList) > 0 || a.CloudWatchTrigger == nil:
		return a.CloudWatchTriggerList
	}
	return []CloudWatchTrigger{*a.CloudWatchTrigger}
}

// PrometheusTriggers are the Prometheus triggers in force, by the same rule.
func (a *AutoScalingSpec) PrometheusTriggers() []PrometheusTrigger {
	switch {
	case a == nil:
		return nil
	case len(a.PrometheusTriggerList) > 0 || a.PrometheusTrigger == nil:
		return a.PrometheusTriggerList
	}
	return []PrometheusTrigger{*a.PrometheusTrigger}
}

// TriggerName is a trigger's name, or the one Default gives a list entry
// left unnamed (kind "cloudwatch" or "prometheus", i its index).
func TriggerName(given, deployment, kind string, i int) string {
	if given != "" {
		return given
	}
	return deployment + "-scaled-object-" + kind + "-trigger-" + strconv.Itoa(i)
}
