package manifest

import (
	"fmt"
	"maps"
	"math"
	"net/url"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/capstan-dev/capstan/internal/catalog"
)

// Caps on the numbers a manifest may carry: capstan's own, beyond the
// reference's bounds (which are only int32 and >= 0), so that no manifest
// can size a loop, a list of replicas or a timer past what a host runs.
const (
	// MaxReplicas bounds spec.replicas and autoScalingSpec's
	// minReplicaCount and maxReplicaCount. It equals the SageMaker API's
	// cap on a variant's instances (endpoint.MaxInstancesPerVariant), since
	// a deployment registers a SageMaker endpoint; each replica is a process
	// on the capstan host, so 1000 is far above what one host runs.
	MaxReplicas = 1000
	// MaxDeployTimeSeconds bounds maxDeployTimeInSeconds (default 3600): a
	// day.
	MaxDeployTimeSeconds = 86400
	// MaxScalingSeconds bounds autoScalingSpec's pollingInterval,
	// cooldownPeriod and initialCooldownPeriod, and a CloudWatch trigger's
	// metricCollectionPeriod and metricCollectionStartTime: a day.
	MaxScalingSeconds = 86400
	// MaxRequestLimit bounds worker.requestLimits' maxConcurrentRequests and
	// maxQueueSize per replica (the route's limits are these times the
	// replicas, which stays far inside an int).
	MaxRequestLimit = 1_000_000
)

// Server-side limits on counts, beyond the reference's own bounds.
const (
	maxListItems   = 100 // env vars, tags, triggers, volumes, labels…
	maxArgs        = 256
	maxStringBytes = 4096 // any single free-form value (image, query, args…)
)

var (
	// The CRD's name pattern ^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62} is not
	// anchored at the end, so upstream accepts "Llama-3.1-8B-Instruct" (as
	// the published examples do). capstan keeps that, bounded to 63
	// characters, but refuses characters that cannot appear in a SageMaker
	// or Kubernetes name (spaces, slashes, colons).
	reModelName   = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9._-]{0,62}$`)
	reDNSLabel    = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	reDNSSub      = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
	reResource    = regexp.MustCompile(`^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[a-zA-Z0-9]([-a-zA-Z0-9_.]*[a-zA-Z0-9])?$`)
	reQuantity    = regexp.MustCompile(`^([+-]?[0-9]+(\.[0-9]*)?|[+-]?\.[0-9]+)(([KMGTPE]i)|[numkMGTPE]|[eE][+-]?[0-9]+)?$`)
	reHFModelID   = regexp.MustCompile(`^[A-Za-z0-9][\w.-]*/[\w.-]+$`)
	reCommitSHA   = regexp.MustCompile(`^[0-9a-fA-F]{40}$`)
	reSemver      = regexp.MustCompile(`^\d{1,4}\.\d{1,4}\.\d{1,4}$`)
	reIAMRole     = regexp.MustCompile(`^arn:aws[a-z-]*:iam::\d{12}:role/[\w+=,.@/-]+$`)
	reACMArn      = regexp.MustCompile(`^arn:aws[a-z-]*:acm:[a-z0-9-]+:\d{12}:certificate/[\w-]+$`)
	reHostedZone  = regexp.MustCompile(`^Z[A-Z0-9]+$`)
	reMetricStat  = regexp.MustCompile(`^(Average|Sum|Minimum|Maximum|SampleCount|p\d{1,2}(\.\d+)?)$`)
	reMIGPartType = regexp.MustCompile(`^mig-\d+g\.\d+gb$`)
)

var quantitySuffix = map[string]float64{
	"": 1, "n": 1e-9, "u": 1e-6, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18,
	"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40, "Pi": 1 << 50, "Ei": 1 << 60,
}

// Value parses q into base units (cores, bytes, devices).
func (q Quantity) Value() (float64, error) {
	s := string(q)
	if !reQuantity.MatchString(s) {
		return 0, fmt.Errorf("%q is not a quantity (e.g. 2, 500m, 30Gi)", s)
	}
	m := reQuantity.FindStringSubmatch(s)
	num, suf := m[1], m[3]
	if strings.HasPrefix(suf, "e") || strings.HasPrefix(suf, "E") && len(suf) > 1 && suf != "Ei" {
		num, suf = num+suf, "" // a decimal exponent, not a suffix
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a quantity: %w", s, err)
	}
	v := f * quantitySuffix[suf]
	if math.IsInf(v, 0) {
		return 0, fmt.Errorf("%q is too large a quantity", s)
	}
	return v, nil
}

// Validate checks the IEC against the reference rules and the catalog.
func (o *InferenceEndpointConfig) Validate() error {
	var errs ErrorList
	validateMeta(&o.Metadata, &errs)
	s := &o.Spec
	sp := path("spec")
	validateModelName(s.ModelName, sp.child("modelName"), true, &errs)
	validateModelName(s.EndpointName, sp.child("endpointName"), false, &errs)

	// instanceType, instanceTypes and nodeAffinity are mutually exclusive.
	var instances []catalog.InstanceType
	set := 0
	if s.InstanceType != "" {
		set++
		if it, ok := validateInstanceType(s.InstanceType, sp.child("instanceType"), &errs); ok {
			instances = append(instances, it)
		}
	}
	if len(s.InstanceTypes) > 0 {
		set++
		if set > 1 {
			errs.add(sp.child("instanceTypes"), "must not be set together with instanceType")
		}
		if len(s.InstanceTypes) > maxListItems {
			errs.add(sp.child("instanceTypes"), "at most %d entries", maxListItems)
		}
		for i, n := range s.InstanceTypes {
			if it, ok := validateInstanceType(n, sp.child("instanceTypes").index(i), &errs); ok {
				instances = append(instances, it)
			}
		}
	}
	if len(s.NodeAffinity) > 0 && string(s.NodeAffinity) != "null" && set > 0 {
		errs.add(sp.child("nodeAffinity"), "must not be set together with instanceType or instanceTypes")
	}
	validateReplicas(s.Replicas, s.MaxDeployTimeInSeconds, sp, &errs)
	if len(s.InvocationEndpoint) > maxStringBytes {
		errs.add(sp.child("invocationEndpoint"), "longer than %d bytes", maxStringBytes)
	}
	if s.ModelSourceConfig == nil {
		errs.add(sp.child("modelSourceConfig"), "required")
	} else {
		validateSource(s, sp.child("modelSourceConfig"), &errs)
	}
	if s.Worker == nil {
		errs.add(sp.child("worker"), "required")
	} else {
		validateWorker(s.Worker, instances, sp.child("worker"), &errs)
	}
	if ir := s.IntelligentRoutingSpec; ir != nil && ir.Enabled != nil && *ir.Enabled && ir.RoutingStrategy == RoutingKVAware {
		// Reference: kvaware supports only the completions endpoint.
		if ep := strings.TrimPrefix(s.InvocationEndpoint, "/"); ep != "completions" && ep != "v1/completions" {
			errs.add(sp.child("invocationEndpoint"), "routingStrategy kvaware supports only the completions endpoint (v1/completions), not %q", s.InvocationEndpoint)
		}
	}
	validateCommon(commonSpec{s.AutoScalingSpec, s.KVCacheSpec, s.IntelligentRoutingSpec, s.LoadBalancer, s.Metrics, s.TLSConfig, s.DNSConfig, instances}, sp, &errs)
	if k := s.Kubernetes; k != nil {
		kp := sp.child("kubernetes")
		if k.ServiceAccountName != "" && (len(k.ServiceAccountName) > 253 || !reDNSSub.MatchString(k.ServiceAccountName)) {
			errs.add(kp.child("serviceAccountName"), "must be a DNS-1123 subdomain of at most 253 characters")
		}
		if len(k.Volumes) > maxListItems {
			errs.add(kp.child("volumes"), "at most %d entries", maxListItems)
		}
		for i, v := range k.Volumes {
			if n, _ := v["name"].(string); n == "" {
				errs.add(kp.child("volumes").index(i).child("name"), "required")
			}
		}
		if len(k.InitContainers) > maxListItems {
			errs.add(kp.child("initContainers"), "at most %d entries", maxListItems)
		}
	}
	if len(s.Tags) > maxListItems {
		errs.add(sp.child("tags"), "at most %d entries", maxListItems)
	}
	for i, t := range s.Tags {
		if t.Name == "" {
			errs.add(sp.child("tags").index(i).child("name"), "required")
		}
	}
	return errs.err()
}

// Validate checks the JSM against the reference rules and the catalog.
func (o *JumpStartModel) Validate() error {
	var errs ErrorList
	validateMeta(&o.Metadata, &errs)
	s := &o.Spec
	sp := path("spec")
	var model *catalog.Model
	if m := s.Model; m == nil {
		errs.add(sp.child("model"), "required")
	} else {
		mp := sp.child("model")
		switch {
		case m.ModelID == "":
			errs.add(mp.child("modelId"), "required")
		case !reModelName.MatchString(m.ModelID):
			errs.add(mp.child("modelId"), "%q must be at most 63 letters, digits, '.', '_' and '-', starting with a letter or digit", m.ModelID)
		default:
			if cm, err := catalog.Default().JumpStartModel(m.ModelID); err != nil {
				errs.add(mp.child("modelId"), "%v", err)
			} else {
				model = &cm
			}
		}
		if m.ModelHubName != "" && !reModelName.MatchString(m.ModelHubName) {
			errs.add(mp.child("modelHubName"), "%q must be a hub name (letters, digits, hyphens; at most 63)", m.ModelHubName)
		}
		if m.ModelVersion != "" && (!reSemver.MatchString(m.ModelVersion) || len(m.ModelVersion) < 5 || len(m.ModelVersion) > 14) {
			errs.add(mp.child("modelVersion"), "%q must be a version like 2.0.4", m.ModelVersion)
		}
		if m.GatedModelDownloadRole != "" && !reIAMRole.MatchString(m.GatedModelDownloadRole) {
			errs.add(mp.child("gatedModelDownloadRole"), "%q must be an IAM role ARN", m.GatedModelDownloadRole)
		}
		validateNameValues(m.AdditionalConfigs, mp.child("additionalConfigs"), 10, &errs)
	}
	var instances []catalog.InstanceType
	if sv := s.Server; sv == nil {
		errs.add(sp.child("server"), "required")
	} else {
		svp := sp.child("server")
		var instance *catalog.InstanceType
		if sv.InstanceType == "" {
			errs.add(svp.child("instanceType"), "required")
		} else if it, ok := validateInstanceType(sv.InstanceType, svp.child("instanceType"), &errs); ok {
			instance = &it
			instances = append(instances, it)
		}
		if it := instance; it != nil && model != nil {
			// capstan's own check (upstream checks the model's supported
			// instance types): the weights must at least fit in the
			// instance's GPU memory.
			if total, err := catalog.Default().DeviceMemoryBytes(*it); err == nil && model.WeightBytes() > total {
				kind := "GPU memory"
				if it.IsCPU() {
					kind = "memory usable by the model server (CPU instance)"
				}
				errs.add(svp.child("instanceType"), "model %s needs %.1f GB for its weights; %s has %.1f GB of %s",
					model.ID, float64(model.WeightBytes())/1e9, it.Name, float64(total)/1e9, kind)
			}
		}
		if pt := sv.AcceleratorPartitionType; pt != "" {
			pp := svp.child("acceleratorPartitionType")
			switch {
			case !reMIGPartType.MatchString(pt):
				errs.add(pp, "%q must look like mig-<g>g.<mem>gb (e.g. mig-1g.10gb)", pt)
			case instance != nil:
				// Always checked, as the HyperPod SDK does; the flag below
				// only turns the model fit check off.
				g, prof, err := migProfileFor(*instance, pt)
				switch {
				case err != nil:
					errs.add(pp, "%v", err)
				case model != nil && sv.PartitionValidation():
					if err := MIGFit(*model, g, prof); err != nil {
						errs.add(pp, "%v", err)
					}
				}
			}
		}
		if sv.ExecutionRole != "" && !reIAMRole.MatchString(sv.ExecutionRole) {
			errs.add(svp.child("executionRole"), "%q must be an IAM role ARN", sv.ExecutionRole)
		}
	}
	if e := s.SageMakerEndpoint; e != nil {
		validateModelName(e.Name, sp.child("sageMakerEndpoint").child("name"), false, &errs)
	}
	validateReplicas(s.Replicas, s.MaxDeployTimeInSeconds, sp, &errs)
	validateJSMEnv(s.EnvironmentVariables, sp.child("environmentVariables"), &errs)
	validateCommon(commonSpec{s.AutoScalingSpec, s.KVCacheSpec, s.IntelligentRoutingSpec, s.LoadBalancer, s.Metrics, s.TLSConfig, s.DNSConfig, instances}, sp, &errs)
	return errs.err()
}

func validateMeta(m *ObjectMeta, errs *ErrorList) {
	mp := path("metadata")
	switch {
	case m.Name == "":
		errs.add(mp.child("name"), "required")
	case len(m.Name) > 63 || !reDNSLabel.MatchString(m.Name):
		// A label, not a subdomain: the name becomes replica, service and
		// router names.
		errs.add(mp.child("name"), "%q must be a DNS-1123 label: at most 63 lower-case letters, digits and '-', starting and ending with a letter or digit", m.Name)
	}
	if m.Namespace != "" && (len(m.Namespace) > 63 || !reDNSLabel.MatchString(m.Namespace)) {
		errs.add(mp.child("namespace"), "%q must be a DNS-1123 label", m.Namespace)
	}
	if len(m.Labels) > maxListItems {
		errs.add(mp.child("labels"), "at most %d entries", maxListItems)
	}
	if len(m.Annotations) > maxListItems {
		errs.add(mp.child("annotations"), "at most %d entries", maxListItems)
	}
	if c, ok := m.Annotations[AnnotationCluster]; ok && (c == "" || len(c) > 63 || !reClusterName.MatchString(c)) {
		errs.add(mp.child("annotations").child(AnnotationCluster), "%q must be a HyperPod cluster name: 1 to 63 letters, digits and '-', starting and ending with a letter or digit", c)
	}
	validateRollout(m, mp, errs)
}

// AnnotationCluster names the HyperPod cluster an object runs on; without
// it, the default cluster (cluster.DefaultName).
const AnnotationCluster = "capstan.dev/cluster"

var reClusterName = regexp.MustCompile(`^[a-zA-Z0-9](-*[a-zA-Z0-9])*$`)

// ClusterOf is the cluster m names, "" when it names none.
func ClusterOf(m *ObjectMeta) string { return m.Annotations[AnnotationCluster] }

func validateModelName(v string, p path, required bool, errs *ErrorList) {
	switch {
	case v == "" && required:
		errs.add(p, "required")
	case v != "" && !reModelName.MatchString(v):
		errs.add(p, "%q must be at most 63 letters, digits, '.', '_' and '-', starting with a letter or digit", v)
	}
}

func validateInstanceType(name string, p path, errs *ErrorList) (catalog.InstanceType, bool) {
	if !strings.HasPrefix(name, "ml.") {
		errs.add(p, "%q must be an ml.* instance type", name)
		return catalog.InstanceType{}, false
	}
	it, err := catalog.Default().InstanceType(name)
	if err != nil {
		errs.add(p, "%v", err)
		return catalog.InstanceType{}, false
	}
	return it, true
}

func validateReplicas(replicas, maxDeploy *int32, sp path, errs *ErrorList) {
	intRange(replicas, 0, MaxReplicas, sp.child("replicas"), errs)
	intRange(maxDeploy, 1, MaxDeployTimeSeconds, sp.child("maxDeployTimeInSeconds"), errs)
}

// intRange checks an optional int32 against [lo, hi].
func intRange(v *int32, lo, hi int32, p path, errs *ErrorList) {
	switch {
	case v == nil:
	case *v < lo:
		errs.add(p, "must be >= %d, got %d", lo, *v)
	case *v > hi:
		errs.add(p, "must be <= %d (capstan's limit), got %d", hi, *v)
	}
}

// finite reports whether f is neither NaN nor infinite.
func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

func validateNameValues(l []NameValue, p path, limit int, errs *ErrorList) {
	if len(l) > limit {
		errs.add(p, "at most %d entries, got %d", limit, len(l))
	}
	for i, nv := range l {
		if nv.Name == "" {
			errs.add(p.index(i).child("name"), "required")
		}
		if nv.Value == "" {
			errs.add(p.index(i).child("value"), "required")
		}
	}
}

func validateSource(s *InferenceEndpointConfigSpec, p path, errs *ErrorList) {
	c := s.ModelSourceConfig
	types := []string{SourceS3, SourceFSx, SourceHuggingFace, SourceKubernetesVolume}
	if c.ModelSourceType == "" {
		errs.add(p.child("modelSourceType"), "required; one of %s", strings.Join(types, ", "))
		return
	}
	if !slices.Contains(types, c.ModelSourceType) {
		errs.add(p.child("modelSourceType"), "unsupported value %q; one of %s", c.ModelSourceType, strings.Join(types, ", "))
		return
	}
	// Exactly the storage block that matches the type.
	blocks := map[string]bool{"s3Storage": c.S3Storage != nil, "fsxStorage": c.FSxStorage != nil, "huggingFaceModel": c.HuggingFaceModel != nil}
	want := map[string]string{SourceS3: "s3Storage", SourceFSx: "fsxStorage", SourceHuggingFace: "huggingFaceModel"}[c.ModelSourceType]
	for _, b := range []string{"s3Storage", "fsxStorage", "huggingFaceModel"} {
		switch {
		case b == want && !blocks[b]:
			errs.add(p.child(b), "required when modelSourceType is %s", c.ModelSourceType)
		case b != want && blocks[b]:
			errs.add(p.child(b), "must not be set when modelSourceType is %s", c.ModelSourceType)
		}
	}
	if st := c.S3Storage; st != nil {
		if st.BucketName == "" {
			errs.add(p.child("s3Storage").child("bucketName"), "required")
		}
		if st.Region == "" {
			errs.add(p.child("s3Storage").child("region"), "required")
		}
	}
	if st := c.FSxStorage; st != nil && st.FileSystemID == "" {
		errs.add(p.child("fsxStorage").child("fileSystemId"), "required")
	}
	if hf := c.HuggingFaceModel; hf != nil {
		hp := p.child("huggingFaceModel")
		switch {
		case hf.ModelID == "":
			errs.add(hp.child("modelId"), "required")
		case !reHFModelID.MatchString(hf.ModelID):
			errs.add(hp.child("modelId"), "%q must be <org>/<model>", hf.ModelID)
		}
		if hf.CommitSHA != "" && !reCommitSHA.MatchString(hf.CommitSHA) {
			errs.add(hp.child("commitSHA"), "%q must be a 40-character hex commit SHA", hf.CommitSHA)
		}
		if r := hf.TokenSecretRef; r != nil {
			if r.Name == "" {
				errs.add(hp.child("tokenSecretRef").child("name"), "required")
			}
			if r.Key == "" {
				errs.add(hp.child("tokenSecretRef").child("key"), "required")
			}
		}
	}
	if c.ModelSourceType == SourceKubernetesVolume && s.Worker != nil && s.Worker.ModelVolumeMount != nil {
		name := s.Worker.ModelVolumeMount.Name
		found := false
		if s.Kubernetes != nil {
			for _, v := range s.Kubernetes.Volumes {
				if v["name"] == name {
					found = true
				}
			}
		}
		if !found {
			errs.add(path("spec.kubernetes.volumes"), "modelSourceType kubernetesVolume needs a volume named %q (spec.worker.modelVolumeMount.name)", name)
		}
	}
}

func validateWorker(w *Worker, instances []catalog.InstanceType, p path, errs *ErrorList) {
	if w.Image == "" {
		errs.add(p.child("image"), "required")
	} else if len(w.Image) > maxStringBytes || strings.ContainsAny(w.Image, " \t\n") {
		errs.add(p.child("image"), "%q is not an image reference", w.Image)
	}
	if mp := w.ModelInvocationPort; mp == nil {
		errs.add(p.child("modelInvocationPort"), "required")
	} else {
		if mp.ContainerPort < 1 || mp.ContainerPort > 65535 {
			errs.add(p.child("modelInvocationPort").child("containerPort"), "must be 1-65535, got %d", mp.ContainerPort)
		}
		if mp.Name != "" && mp.Name != "http" && mp.Name != "grpc" {
			errs.add(p.child("modelInvocationPort").child("name"), "unsupported value %q; one of http, grpc", mp.Name)
		}
	}
	if vm := w.ModelVolumeMount; vm == nil {
		errs.add(p.child("modelVolumeMount"), "required")
	} else {
		if vm.Name == "" {
			errs.add(p.child("modelVolumeMount").child("name"), "required")
		}
		if vm.MountPath != "" && !strings.HasPrefix(vm.MountPath, "/") {
			errs.add(p.child("modelVolumeMount").child("mountPath"), "%q must be an absolute path", vm.MountPath)
		}
	}
	if w.Resources == nil || (len(w.Resources.Requests) == 0 && len(w.Resources.Limits) == 0) {
		errs.add(p.child("resources"), "required: give requests and/or limits (cpu, memory, nvidia.com/gpu)")
	} else {
		validateResources(w.Resources, instances, p.child("resources"), errs)
	}
	validateWorkerEnv(w.EnvironmentVariables, p.child("environmentVariables"), errs)
	for _, l := range []struct {
		name string
		v    []string
	}{{"args", w.Args}, {"command", w.Command}} {
		if len(l.v) > maxArgs {
			errs.add(p.child(l.name), "at most %d entries", maxArgs)
		}
		for i, a := range l.v {
			if len(a) > maxStringBytes {
				errs.add(p.child(l.name).index(i), "longer than %d bytes", maxStringBytes)
			}
		}
	}
	if rl := w.RequestLimits; rl != nil {
		rp := p.child("requestLimits")
		if v := rl.MaxConcurrentRequests; v != nil && (*v < 0 || *v > MaxRequestLimit) {
			errs.add(rp.child("maxConcurrentRequests"), "must be 1-%d, or 0 for unlimited; got %d", MaxRequestLimit, *v)
		}
		intRange(rl.MaxQueueSize, 0, MaxRequestLimit, rp.child("maxQueueSize"), errs)
		if c := rl.OverflowStatusCode; c != nil && (*c < 400 || *c > 599) {
			errs.add(rp.child("overflowStatusCode"), "must be 400-599, got %d", *c)
		}
	}
}

func validateResources(r *ResourceRequirements, instances []catalog.InstanceType, p path, errs *ErrorList) {
	values := map[string]map[string]float64{}
	for _, side := range []struct {
		name string
		m    map[string]Quantity
	}{{"requests", r.Requests}, {"limits", r.Limits}} {
		values[side.name] = map[string]float64{}
		keys := make([]string, 0, len(side.m))
		for k := range side.m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			kp := p.child(side.name).key(k)
			mig := strings.HasPrefix(k, ResourceMIGPrefix)
			if mig && !reMIGPartType.MatchString(strings.TrimPrefix(k, "nvidia.com/")) {
				errs.add(kp, "%q is not a MIG resource; want nvidia.com/mig-<g>g.<mem>gb (e.g. nvidia.com/mig-1g.10gb)", k)
				continue
			}
			if !reResource.MatchString(k) {
				errs.add(kp, "%q is not a resource name", k)
				continue
			}
			v, err := side.m[k].Value()
			if err != nil {
				errs.add(kp, "%v", err)
				continue
			}
			if v < 0 {
				errs.add(kp, "must not be negative")
				continue
			}
			if k == ResourceGPU && v != math.Trunc(v) {
				errs.add(kp, "must be a whole number of GPUs, got %s", side.m[k])
				continue
			}
			if mig && v != 1 {
				errs.add(kp, "must be 1, got %s: a replica runs on one MIG slice (more replicas take more slices)", side.m[k])
				continue
			}
			values[side.name][k] = v
		}
	}
	validateMIGResources(r, values, instances, p, errs)
	for _, k := range slices.Sorted(maps.Keys(values["requests"])) {
		req := values["requests"][k]
		if lim, ok := values["limits"][k]; ok && req > lim {
			errs.add(p.child("requests").key(k), "must not exceed the limit (%s > %s)", r.Requests[k], r.Limits[k])
		} else if ok && k == ResourceGPU && req != lim {
			errs.add(p.child("requests").key(k), "must equal the limit for %s", ResourceGPU)
		} else if !ok && strings.HasPrefix(k, ResourceMIGPrefix) && !hasKey(r, "limits", k) {
			// Kubernetes does not overcommit extended resources: a request
			// needs the same limit (a limit alone sets the request).
			errs.add(p.child("limits").key(k), "required: must equal the request (%s)", r.Requests[k])
		}
	}
	// The replica must fit on every instance type it may be placed on.
	for _, it := range instances {
		for _, side := range []string{"requests", "limits"} {
			v := values[side]
			if g, ok := v[ResourceGPU]; ok && g > float64(it.GPUCount) {
				errs.add(p.child(side).key(ResourceGPU), "%v GPUs do not fit on %s (%d GPUs)", g, it.Name, it.GPUCount)
			}
			if c, ok := v[ResourceCPU]; ok && c > float64(it.VCPU) {
				errs.add(p.child(side).key(ResourceCPU), "%s CPUs do not fit on %s (%d vCPUs)", r.quantity(side, ResourceCPU), it.Name, it.VCPU)
			}
			if m, ok := v[ResourceMemory]; ok && m > float64(it.MemoryGiB)*(1<<30) {
				errs.add(p.child(side).key(ResourceMemory), "%s does not fit on %s (%d GiB)", r.quantity(side, ResourceMemory), it.Name, it.MemoryGiB)
			}
		}
	}
}

// validateMIGResources checks a worker's MIG slice as a whole: one profile,
// not with whole GPUs, and offered by the GPU of every instance type the
// replica may land on. values holds the quantities that parsed.
func validateMIGResources(r *ResourceRequirements, values map[string]map[string]float64, instances []catalog.InstanceType, p path, errs *ErrorList) {
	var profiles []string
	at := map[string]path{} // where each profile is reported: its request, else its limit
	for _, side := range []string{"limits", "requests"} {
		for k := range values[side] {
			if !strings.HasPrefix(k, ResourceMIGPrefix) {
				continue
			}
			if _, seen := at[k]; !seen {
				profiles = append(profiles, k)
			}
			at[k] = p.child(side).key(k)
		}
	}
	if len(profiles) == 0 {
		return
	}
	slices.Sort(profiles)
	if len(profiles) > 1 {
		errs.add(p, "asks for slices of %s; a replica runs on one slice of one MIG profile", strings.Join(profiles, " and "))
		return
	}
	k := profiles[0]
	for _, side := range []string{"requests", "limits"} {
		if hasKey(r, side, ResourceGPU) {
			errs.add(p.child(side).key(ResourceGPU), "must not be set with %s: a replica runs on whole GPUs or on one MIG slice, not both", k)
		}
	}
	for _, it := range instances {
		if _, _, err := migProfileFor(it, strings.TrimPrefix(k, "nvidia.com/")); err != nil {
			errs.add(at[k], "%v", err)
		}
	}
}

func hasKey(r *ResourceRequirements, side, name string) bool {
	m := r.Requests
	if side == "limits" {
		m = r.Limits
	}
	_, ok := m[name]
	return ok
}

func (r *ResourceRequirements) quantity(side, name string) Quantity {
	if side == "requests" {
		return r.Requests[name]
	}
	return r.Limits[name]
}

type commonSpec struct {
	as  *AutoScalingSpec
	kv  *KVCacheSpec
	ir  *IntelligentRoutingSpec
	lb  *LoadBalancer
	m   *Metrics
	tls *TLSConfig
	dns *DNSConfig
	// instances are the instance types the replicas may land on.
	instances []catalog.InstanceType
}

func validateCommon(c commonSpec, sp path, errs *ErrorList) {
	validateAutoScaling(c.as, sp.child("autoScalingSpec"), errs)
	if c.kv != nil {
		validateKVCache(c.kv, c.instances, sp.child("kvCacheSpec"), errs)
	}
	if ir := c.ir; ir != nil {
		ip := sp.child("intelligentRoutingSpec")
		strategies := []string{RoutingPrefixAware, RoutingKVAware, RoutingSession, RoutingRoundRobin}
		if ir.RoutingStrategy != "" && !slices.Contains(strategies, ir.RoutingStrategy) {
			errs.add(ip.child("routingStrategy"), "unsupported value %q; one of %s", ir.RoutingStrategy, strings.Join(strategies, ", "))
		}
		validateAutoScaling(ir.AutoScalingSpec, ip.child("autoScalingSpec"), errs)
	}
	if lb := c.lb; lb != nil {
		lp := sp.child("loadBalancer")
		if lb.HealthCheckPath != "" && !strings.HasPrefix(lb.HealthCheckPath, "/") {
			errs.add(lp.child("healthCheckPath"), "%q must start with /", lb.HealthCheckPath)
		}
		if a := lb.RoutingAlgorithm; a != "" && a != LBLeastOutstandingRequests && a != LBRoundRobin {
			errs.add(lp.child("routingAlgorithm"), "unsupported value %q; one of %s, %s", a, LBLeastOutstandingRequests, LBRoundRobin)
		}
		if t := lb.IdleTimeoutSeconds; t != nil && (*t < 1 || *t > 4000) {
			errs.add(lp.child("idleTimeoutSeconds"), "must be 1-4000, got %d", *t)
		}
	}
	if m := c.m; m != nil {
		mp := sp.child("metrics")
		if v := m.MetricsScrapeIntervalSeconds; v != nil && (*v < 5 || *v > 300) {
			errs.add(mp.child("metricsScrapeIntervalSeconds"), "must be 5-300, got %d", *v)
		}
		if mm := m.ModelMetrics; mm != nil {
			if mm.Port != nil && (*mm.Port < 1024 || *mm.Port > 65535) {
				errs.add(mp.child("modelMetrics").child("port"), "must be 1024-65535, got %d", *mm.Port)
			}
			if mm.Path != "" && !strings.HasPrefix(mm.Path, "/") {
				errs.add(mp.child("modelMetrics").child("path"), "%q must start with /", mm.Path)
			}
		}
	}
	if t := c.tls; t != nil {
		tp := sp.child("tlsConfig")
		if u := t.TLSCertificateOutputS3URI; u != "" && (!strings.HasPrefix(u, "s3://") || len(u) == len("s3://")) {
			errs.add(tp.child("tlsCertificateOutputS3Uri"), "%q must be an s3:// URI", u)
		}
		if cc := t.CustomCertificateConfig; cc != nil {
			cp := tp.child("customCertificateConfig")
			switch {
			case cc.ACMArn == "":
				errs.add(cp.child("acmArn"), "required")
			case !reACMArn.MatchString(cc.ACMArn):
				errs.add(cp.child("acmArn"), "%q must be an ACM certificate ARN", cc.ACMArn)
			}
			switch {
			case cc.DomainName == "":
				errs.add(cp.child("domainName"), "required")
			case len(cc.DomainName) > 253 || !reDNSSub.MatchString(cc.DomainName):
				errs.add(cp.child("domainName"), "%q must be a lower-case domain name without wildcards, at most 253 characters", cc.DomainName)
			}
		}
	}
	if d := c.dns; d != nil {
		dp := sp.child("dnsConfig")
		switch {
		case d.HostedZoneID == "":
			errs.add(dp.child("hostedZoneId"), "required")
		case !reHostedZone.MatchString(d.HostedZoneID):
			errs.add(dp.child("hostedZoneId"), "%q must match ^Z[A-Z0-9]+$", d.HostedZoneID)
		}
		if c.tls == nil || c.tls.CustomCertificateConfig == nil {
			errs.add(dp, "needs spec.tlsConfig.customCertificateConfig")
		}
	}
}

func validateAutoScaling(a *AutoScalingSpec, p path, errs *ErrorList) {
	if a == nil {
		return
	}
	intRange(a.MinReplicaCount, 0, MaxReplicas, p.child("minReplicaCount"), errs)
	intRange(a.MaxReplicaCount, 1, MaxReplicas, p.child("maxReplicaCount"), errs)
	if a.MinReplicaCount != nil && a.MaxReplicaCount != nil && *a.MinReplicaCount <= MaxReplicas && *a.MaxReplicaCount < *a.MinReplicaCount {
		errs.add(p.child("maxReplicaCount"), "must be >= minReplicaCount (%d), got %d", *a.MinReplicaCount, *a.MaxReplicaCount)
	}
	intRange(a.PollingInterval, 1, MaxScalingSeconds, p.child("pollingInterval"), errs)
	intRange(a.CooldownPeriod, 0, MaxScalingSeconds, p.child("cooldownPeriod"), errs)
	intRange(a.InitialCooldownPeriod, 0, MaxScalingSeconds, p.child("initialCooldownPeriod"), errs)
	// HPA caps stabilisation windows at one hour.
	for _, w := range []struct {
		name string
		v    *int32
	}{{"scaleDownStabilizationTime", a.ScaleDownStabilizationTime}, {"scaleUpStabilizationTime", a.ScaleUpStabilizationTime}} {
		name, v := w.name, w.v
		if v != nil && (*v < 0 || *v > 3600) {
			errs.add(p.child(name), "must be 0-3600, got %d", *v)
		}
	}
	if len(a.CloudWatchTriggerList) > maxListItems {
		errs.add(p.child("cloudWatchTriggerList"), "at most %d entries", maxListItems)
	}
	if len(a.PrometheusTriggerList) > maxListItems {
		errs.add(p.child("prometheusTriggerList"), "at most %d entries", maxListItems)
	}
	if a.CloudWatchTrigger != nil {
		validateCloudWatch(a.CloudWatchTrigger, p.child("cloudWatchTrigger"), errs)
	}
	for i := range a.CloudWatchTriggerList {
		validateCloudWatch(&a.CloudWatchTriggerList[i], p.child("cloudWatchTriggerList").index(i), errs)
	}
	if a.PrometheusTrigger != nil {
		validatePrometheus(a.PrometheusTrigger, p.child("prometheusTrigger"), errs)
	}
	for i := range a.PrometheusTriggerList {
		validatePrometheus(&a.PrometheusTriggerList[i], p.child("prometheusTriggerList").index(i), errs)
	}
}

func validateTarget(target, activation *float64, metricType string, p path, errs *ErrorList) {
	switch {
	case target == nil:
		errs.add(p.child("targetValue"), "required")
	case !(*target > 0) || !finite(*target):
		errs.add(p.child("targetValue"), "must be a finite number > 0, got %v", *target)
	}
	if activation != nil && (!(*activation >= 0) || !finite(*activation)) {
		errs.add(p.child("activationTargetValue"), "must be a finite number >= 0, got %v", *activation)
	}
	if metricType != "" && metricType != MetricTypeAverage && metricType != MetricTypeValue {
		errs.add(p.child("metricType"), "unsupported value %q; one of %s, %s", metricType, MetricTypeAverage, MetricTypeValue)
	}
}

func validateCloudWatch(t *CloudWatchTrigger, p path, errs *ErrorList) {
	names, nsKnown := cloudWatchMetrics[t.Namespace]
	switch {
	case t.Namespace == "":
		errs.add(p.child("namespace"), "required")
	case !nsKnown:
		errs.add(p.child("namespace"), "unsupported namespace %q; capstan maps %s and %s", t.Namespace, cwNamespaceSageMaker, cwNamespaceCapstan)
	}
	metricKnown := names[t.MetricName]
	switch {
	case t.MetricName == "":
		errs.add(p.child("metricName"), "required")
	case nsKnown && !metricKnown:
		errs.add(p.child("metricName"), "unsupported metric %q in namespace %s; one of %s", t.MetricName, t.Namespace, strings.Join(slices.Sorted(maps.Keys(names)), ", "))
	}
	validateTarget(t.TargetValue, t.ActivationTargetValue, t.MetricType, p, errs)
	if t.MinValue != nil && !finite(*t.MinValue) {
		errs.add(p.child("minValue"), "must be a finite number, got %v", *t.MinValue)
	}
	intRange(t.MetricCollectionStartTime, 1, MaxScalingSeconds, p.child("metricCollectionStartTime"), errs)
	if per := t.MetricCollectionPeriod; per != nil {
		if v := *per; !(v == 1 || v == 5 || v == 10 || v == 30 || (v > 0 && v%60 == 0)) || v > MaxScalingSeconds {
			errs.add(p.child("metricCollectionPeriod"), "must be 1, 5, 10, 30 or a multiple of 60 up to %d, got %d", MaxScalingSeconds, v)
		} else if st := t.MetricCollectionStartTime; st != nil && *st < v {
			errs.add(p.child("metricCollectionStartTime"), "must be >= metricCollectionPeriod (%d), got %d", v, *st)
		}
	}
	if t.MetricStat != "" && !reMetricStat.MatchString(t.MetricStat) {
		errs.add(p.child("metricStat"), "unsupported statistic %q; Average, Sum, Minimum, Maximum, SampleCount or pNN", t.MetricStat)
	}
	for i, d := range t.Dimensions {
		if d.Name == "" {
			errs.add(p.child("dimensions").index(i).child("name"), "required")
		}
		if d.Value == "" {
			errs.add(p.child("dimensions").index(i).child("value"), "required")
		}
	}
}

func validatePrometheus(t *PrometheusTrigger, p path, errs *ErrorList) {
	// Deliberate difference from HyperPod: any Prometheus-compatible URL,
	// not only an Amazon Managed Prometheus workspace.
	if t.ServerAddress == "" {
		errs.add(p.child("serverAddress"), "required")
	} else if u, err := url.Parse(t.ServerAddress); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs.add(p.child("serverAddress"), "%q must be an http(s) URL", t.ServerAddress)
	}
	switch {
	case t.Query == "":
		errs.add(p.child("query"), "required")
	case len(t.Query) > maxStringBytes:
		errs.add(p.child("query"), "longer than %d bytes", maxStringBytes)
	}
	if _, err := parseCustomHeaders(t.CustomHeaders); err != nil {
		errs.add(p.child("customHeaders"), "%v; want name=value pairs separated by commas", err)
	}
	if len(t.Namespace) > 253 {
		errs.add(p.child("namespace"), "longer than 253 bytes")
	}
	validateTarget(t.TargetValue, t.ActivationTargetValue, t.MetricType, p, errs)
}

// CloudWatch namespaces and metrics capstan records (package metricstore;
// the autoscale/triggers package reads them and its tests check that both
// tables agree). Every statistic is available for every metric: the store
// keeps each period's samples as count, sum, extremes and a histogram.
const (
	cwNamespaceSageMaker = "AWS/SageMaker"
	cwNamespaceCapstan   = "capstan"
)

var cloudWatchMetrics = map[string]map[string]bool{
	cwNamespaceSageMaker: {
		"Invocations":                true,
		"InvocationsPerInstance":     true,
		"Invocation4XXErrors":        true,
		"Invocation5XXErrors":        true,
		"InvocationModelErrors":      true,
		"ModelLatency":               true,
		"OverheadLatency":            true,
		"ConcurrentRequestsPerModel": true,
	},
	cwNamespaceCapstan: {
		"QueueDepth":         true,
		"InFlightPerReplica": true,
		"KVCacheUtilization": true,
		"TimeToFirstToken":   true,
		"ArrivalRate":        true,
	},
}

// parseCustomHeaders checks KEDA's customHeaders form "k=v,k2=v2".
func parseCustomHeaders(s string) (int, error) {
	if strings.TrimSpace(s) == "" {
		return 0, nil
	}
	if len(s) > maxStringBytes {
		return 0, fmt.Errorf("longer than %d bytes", maxStringBytes)
	}
	pairs := strings.Split(s, ",")
	for i, pair := range pairs {
		k, v, ok := strings.Cut(pair, "=")
		k = strings.TrimSpace(k)
		if !ok || !reHeaderName.MatchString(k) {
			return 0, fmt.Errorf("entry %d %q is not name=value with a valid header name", i, pair)
		}
		if strings.ContainsAny(v, "\r\n") {
			return 0, fmt.Errorf("entry %d: value has a line break", i)
		}
	}
	return len(pairs), nil
}

var reHeaderName = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")

// ValidateUpdate checks the rules that compare a new version of an object
// with the stored one: identity is fixed, intelligent routing cannot be
// added to an existing deployment nor switched on or off, and an IEC
// worker's environment variables cannot change. next must already be
// defaulted and valid.
func ValidateUpdate(prev, next Object) error {
	var errs ErrorList
	if prev.GetKind() != next.GetKind() {
		errs.add("kind", "cannot change from %s to %s", prev.GetKind(), next.GetKind())
		return errs
	}
	pm, nm := prev.GetMeta(), next.GetMeta()
	if pm.Name != nm.Name {
		errs.add("metadata.name", "cannot change (%q → %q)", pm.Name, nm.Name)
	}
	if pm.Namespace != nm.Namespace {
		errs.add("metadata.namespace", "cannot change (%q → %q)", pm.Namespace, nm.Namespace)
	}
	var pir, nir *IntelligentRoutingSpec
	switch p := prev.(type) {
	case *InferenceEndpointConfig:
		n := next.(*InferenceEndpointConfig)
		pir, nir = p.Spec.IntelligentRoutingSpec, n.Spec.IntelligentRoutingSpec
		var pe, ne []EnvVar
		if p.Spec.Worker != nil {
			pe = p.Spec.Worker.EnvironmentVariables
		}
		if n.Spec.Worker != nil {
			ne = n.Spec.Worker.EnvironmentVariables
		}
		if !reflect.DeepEqual(pe, ne) {
			errs.add("spec.worker.environmentVariables", "cannot be updated; delete and re-create the deployment")
		}
	case *JumpStartModel:
		n := next.(*JumpStartModel)
		pir, nir = p.Spec.IntelligentRoutingSpec, n.Spec.IntelligentRoutingSpec
	}
	ip := path("spec.intelligentRoutingSpec")
	switch {
	case pir == nil && nir != nil:
		errs.add(ip, "cannot be added to an existing deployment; delete and re-create it")
	case pir != nil && nir != nil && boolValue(pir.Enabled) != boolValue(nir.Enabled):
		errs.add(ip.child("enabled"), "cannot change once set")
	}
	return errs.err()
}

func boolValue(b *bool) bool { return b != nil && *b }
