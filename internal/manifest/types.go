package manifest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// APIVersion is the group/version of both kinds.
const APIVersion = "inference.sagemaker.aws.amazon.com/v1"

// Kind names.
const (
	KindInferenceEndpointConfig = "InferenceEndpointConfig"
	KindJumpStartModel          = "JumpStartModel"
)

// Object is one decoded manifest of either kind.
type Object interface {
	GetKind() string
	GetMeta() *ObjectMeta
	GetStatus() *Status
	// Default fills unset fields with the reference defaults. Idempotent.
	Default()
	// Validate returns nil or an ErrorList with every problem found.
	Validate() error
}

var (
	_ Object = (*InferenceEndpointConfig)(nil)
	_ Object = (*JumpStartModel)(nil)
)

// ObjectMeta is the subset of Kubernetes object metadata capstan keeps.
// The bookkeeping fields are written by the server and accepted on input so
// that `get -o yaml` output can be applied again.
type ObjectMeta struct {
	Name              string            `json:"name"`
	Namespace         string            `json:"namespace,omitempty"`
	Labels            map[string]string `json:"labels,omitempty"`
	Annotations       map[string]string `json:"annotations,omitempty"`
	UID               string            `json:"uid,omitempty"`
	ResourceVersion   string            `json:"resourceVersion,omitempty"`
	Generation        int64             `json:"generation,omitempty"`
	CreationTimestamp *time.Time        `json:"creationTimestamp,omitempty"`
	// ManagedFields are server-side apply's record of which field manager
	// owns which fields (kubectl apply --server-side): kept by the server,
	// as in Kubernetes.
	ManagedFields []metav1.ManagedFieldsEntry `json:"managedFields,omitempty"`
}

// InferenceEndpointConfig deploys a custom model server (worker) from S3,
// FSx, Hugging Face or a Kubernetes volume.
type InferenceEndpointConfig struct {
	APIVersion string                      `json:"apiVersion"`
	Kind       string                      `json:"kind"`
	Metadata   ObjectMeta                  `json:"metadata"`
	Spec       InferenceEndpointConfigSpec `json:"spec"`
	Status     Status                      `json:"status,omitzero"`
}

// InferenceEndpointConfigSpec is the IEC spec.
type InferenceEndpointConfigSpec struct {
	// +kubebuilder:validation:Pattern=`^[a-zA-Z0-9][a-zA-Z0-9._-]{0,62}$`
	ModelName    string `json:"modelName"`
	EndpointName string `json:"endpointName,omitempty"`
	ModelVersion string `json:"modelVersion,omitempty"`
	// +kubebuilder:validation:Pattern=`^ml\.`
	InstanceType  string   `json:"instanceType,omitempty"`
	InstanceTypes []string `json:"instanceTypes,omitempty"`
	// NodeAffinity is a core/v1 NodeAffinity, kept opaque: capstan does not
	// schedule on node labels yet.
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	NodeAffinity json.RawMessage `json:"nodeAffinity,omitempty"`
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	// +kubebuilder:default=1
	Replicas *int32 `json:"replicas,omitempty"`
	// InitialReplicaCount is deprecated upstream and has no effect; it is
	// accepted (with its odd capitalisation) so old manifests still decode.
	InitialReplicaCount *int32 `json:"InitialReplicaCount,omitempty"`
	// +kubebuilder:validation:MaxLength=4096
	// +kubebuilder:default=invocations
	InvocationEndpoint string `json:"invocationEndpoint,omitempty"`
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=86400
	// +kubebuilder:default=3600
	MaxDeployTimeInSeconds *int32 `json:"maxDeployTimeInSeconds,omitempty"`
	// +kubebuilder:validation:Required
	ModelSourceConfig *ModelSourceConfig `json:"modelSourceConfig,omitempty"`
	// +kubebuilder:validation:Required
	Worker                 *Worker                 `json:"worker,omitempty"`
	AutoScalingSpec        *AutoScalingSpec        `json:"autoScalingSpec,omitempty"`
	KVCacheSpec            *KVCacheSpec            `json:"kvCacheSpec,omitempty"`
	IntelligentRoutingSpec *IntelligentRoutingSpec `json:"intelligentRoutingSpec,omitempty"`
	LoadBalancer           *LoadBalancer           `json:"loadBalancer,omitempty"`
	TLSConfig              *TLSConfig              `json:"tlsConfig,omitempty"`
	DNSConfig              *DNSConfig              `json:"dnsConfig,omitempty"`
	Metrics                *Metrics                `json:"metrics,omitempty"`
	Kubernetes             *KubernetesSpec         `json:"kubernetes,omitempty"`
	// DataCapture, PDSpec and ModelCacheConfig are accepted but kept opaque
	// until capstan implements them.
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	DataCapture json.RawMessage `json:"dataCapture,omitempty"`
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	PDSpec json.RawMessage `json:"pdSpec,omitempty"`
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	ModelCacheConfig json.RawMessage `json:"modelCacheConfig,omitempty"`
	Tags             []Tag           `json:"tags,omitempty"`
}

// Model source types.
const (
	SourceS3               = "s3"
	SourceFSx              = "fsx"
	SourceHuggingFace      = "huggingface"
	SourceKubernetesVolume = "kubernetesVolume"
)

// ModelSourceConfig says where the weights come from.
type ModelSourceConfig struct {
	// +kubebuilder:validation:Enum=s3;fsx;huggingface;kubernetesVolume
	ModelSourceType  string            `json:"modelSourceType"`
	ModelLocation    string            `json:"modelLocation,omitempty"`
	PrefetchEnabled  bool              `json:"prefetchEnabled,omitempty"`
	S3Storage        *S3Storage        `json:"s3Storage,omitempty"`
	FSxStorage       *FSxStorage       `json:"fsxStorage,omitempty"`
	HuggingFaceModel *HuggingFaceModel `json:"huggingFaceModel,omitempty"`
}

// S3Storage is an S3 bucket source.
type S3Storage struct {
	BucketName string `json:"bucketName"`
	Region     string `json:"region"`
}

// FSxStorage is an FSx for Lustre source.
type FSxStorage struct {
	FileSystemID string `json:"fileSystemId"`
	DNSName      string `json:"dnsName,omitempty"`
	MountName    string `json:"mountName,omitempty"`
}

// HuggingFaceModel is a Hugging Face hub source.
type HuggingFaceModel struct {
	ModelID        string     `json:"modelId"`
	CommitSHA      string     `json:"commitSHA,omitempty"`
	TokenSecretRef *SecretRef `json:"tokenSecretRef,omitempty"`
}

// SecretRef names a key of a Secret.
type SecretRef struct {
	Name     string `json:"name"`
	Key      string `json:"key"`
	Optional *bool  `json:"optional,omitempty"`
}

// Worker is the model-server container.
type Worker struct {
	Image string `json:"image"`
	// +kubebuilder:validation:Required
	Resources *ResourceRequirements `json:"resources,omitempty"`
	// +kubebuilder:validation:Required
	ModelInvocationPort *ModelInvocationPort `json:"modelInvocationPort,omitempty"`
	// +kubebuilder:validation:Required
	ModelVolumeMount     *ModelVolumeMount `json:"modelVolumeMount,omitempty"`
	EnvironmentVariables []EnvVar          `json:"environmentVariables,omitempty"`
	Args                 []string          `json:"args,omitempty"`
	Command              []string          `json:"command,omitempty"`
	WorkingDir           string            `json:"workingDir,omitempty"`
	Probes               *Probes           `json:"probes,omitempty"`
	RequestLimits        *RequestLimits    `json:"requestLimits,omitempty"`
}

// ResourceRequirements mirrors core/v1 ResourceRequirements.
type ResourceRequirements struct {
	Requests map[string]Quantity `json:"requests,omitempty"`
	Limits   map[string]Quantity `json:"limits,omitempty"`
	// numbers are the quantities written as JSON numbers
	// ("limits/nvidia.com/gpu"). They are written back as numbers, so an
	// object reads back as it was applied, as the API server keeps an
	// int-or-string: kubectl apply compares the two and would otherwise
	// see a change in every `nvidia.com/gpu: 1`.
	numbers map[string]bool `json:"-"`
}

// UnmarshalJSON reads the two maps and which of their quantities are
// numbers.
func (r *ResourceRequirements) UnmarshalJSON(b []byte) error {
	var raw struct {
		Requests map[string]json.RawMessage `json:"requests"`
		Limits   map[string]json.RawMessage `json:"limits"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	*r = ResourceRequirements{}
	read := func(side string, in map[string]json.RawMessage) (map[string]Quantity, error) {
		if in == nil {
			return nil, nil
		}
		out := make(map[string]Quantity, len(in))
		for k, v := range in {
			var q Quantity
			if err := q.UnmarshalJSON(v); err != nil {
				return nil, fmt.Errorf("%s[%s]: %w", side, k, err)
			}
			out[k] = q
			if t := bytes.TrimSpace(v); len(t) > 0 && t[0] != '"' {
				if r.numbers == nil {
					r.numbers = map[string]bool{}
				}
				r.numbers[side+"/"+k] = true
			}
		}
		return out, nil
	}
	var err error
	if r.Requests, err = read("requests", raw.Requests); err != nil {
		return err
	}
	r.Limits, err = read("limits", raw.Limits)
	return err
}

// MarshalJSON writes the quantities read as numbers as numbers.
func (r ResourceRequirements) MarshalJSON() ([]byte, error) {
	write := func(side string, in map[string]Quantity) map[string]any {
		if len(in) == 0 {
			return nil
		}
		out := make(map[string]any, len(in))
		for k, q := range in {
			if r.numbers[side+"/"+k] && json.Valid([]byte(q)) && q != "" && q[0] != '"' {
				out[k] = json.Number(q)
			} else {
				out[k] = string(q)
			}
		}
		return out
	}
	return json.Marshal(struct {
		Requests map[string]any `json:"requests,omitempty"`
		Limits   map[string]any `json:"limits,omitempty"`
	}{write("requests", r.Requests), write("limits", r.Limits)})
}

// Resource names capstan understands.
const (
	ResourceCPU       = "cpu"
	ResourceMemory    = "memory"
	ResourceGPU       = "nvidia.com/gpu"
	ResourceMIGPrefix = "nvidia.com/mig-"
)

// Quantity is a Kubernetes resource quantity ("6", "5600m", "30Gi", 1).
// YAML authors write both numbers and strings, so both decode.
//
// In the CRD schema it is an int-or-string, as core/v1 quantities are.
//
// +kubebuilder:validation:XIntOrString
// +kubebuilder:validation:Type=""
type Quantity string

// UnmarshalJSON accepts a JSON string or number.
func (q *Quantity) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*q = Quantity(s)
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return err
	}
	*q = Quantity(n.String())
	return nil
}

// ModelInvocationPort is the server's port.
type ModelInvocationPort struct {
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	ContainerPort int32 `json:"containerPort"`
	// +kubebuilder:validation:Enum=http;grpc
	// +kubebuilder:default=http
	Name string `json:"name,omitempty"`
}

// ModelVolumeMount is where weights appear in the container.
type ModelVolumeMount struct {
	Name string `json:"name"`
	// +kubebuilder:default="/opt/ml/model"
	MountPath string `json:"mountPath,omitempty"`
}

// EnvVar mirrors core/v1 EnvVar; valueFrom is kept opaque.
type EnvVar struct {
	Name  string `json:"name"`
	Value string `json:"value,omitempty"`
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	ValueFrom json.RawMessage `json:"valueFrom,omitempty"`
}

// Probes holds core/v1 Probes, kept opaque.
type Probes struct {
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	LivenessProbe json.RawMessage `json:"livenessProbe,omitempty"`
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	ReadinessProbe json.RawMessage `json:"readinessProbe,omitempty"`
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	StartupProbe json.RawMessage `json:"startupProbe,omitempty"`
}

// RequestLimits caps per-replica concurrency.
type RequestLimits struct {
	MaxConcurrentRequests *int32 `json:"maxConcurrentRequests,omitempty"`
	MaxQueueSize          *int32 `json:"maxQueueSize,omitempty"`
	OverflowStatusCode    *int32 `json:"overflowStatusCode,omitempty"`
}

// AutoScalingSpec compiles (upstream) to a KEDA ScaledObject plus HPA.
// Pointers distinguish "unset" from zero, which is meaningful here
// (minReplicaCount 0 = scale to zero).
type AutoScalingSpec struct {
	MinReplicaCount            *int32              `json:"minReplicaCount,omitempty"`
	MaxReplicaCount            *int32              `json:"maxReplicaCount,omitempty"`
	PollingInterval            *int32              `json:"pollingInterval,omitempty"`
	CooldownPeriod             *int32              `json:"cooldownPeriod,omitempty"`
	InitialCooldownPeriod      *int32              `json:"initialCooldownPeriod,omitempty"`
	ScaleDownStabilizationTime *int32              `json:"scaleDownStabilizationTime,omitempty"`
	ScaleUpStabilizationTime   *int32              `json:"scaleUpStabilizationTime,omitempty"`
	CloudWatchTrigger          *CloudWatchTrigger  `json:"cloudWatchTrigger,omitempty"`
	CloudWatchTriggerList      []CloudWatchTrigger `json:"cloudWatchTriggerList,omitempty"`
	PrometheusTrigger          *PrometheusTrigger  `json:"prometheusTrigger,omitempty"`
	PrometheusTriggerList      []PrometheusTrigger `json:"prometheusTriggerList,omitempty"`
}

// Metric types of a trigger.
const (
	MetricTypeAverage = "Average"
	MetricTypeValue   = "Value"
)

// CloudWatchTrigger scales on a CloudWatch metric.
type CloudWatchTrigger struct {
	Name                      string      `json:"name,omitempty"`
	Namespace                 string      `json:"namespace"`
	MetricName                string      `json:"metricName"`
	TargetValue               *float64    `json:"targetValue,omitempty"`
	Dimensions                []Dimension `json:"dimensions,omitempty"`
	ActivationTargetValue     *float64    `json:"activationTargetValue,omitempty"`
	MinValue                  *float64    `json:"minValue,omitempty"`
	MetricCollectionStartTime *int32      `json:"metricCollectionStartTime,omitempty"`
	MetricCollectionPeriod    *int32      `json:"metricCollectionPeriod,omitempty"`
	MetricStat                string      `json:"metricStat,omitempty"`
	// +kubebuilder:validation:Enum=Average;Value
	MetricType       string `json:"metricType,omitempty"`
	UseCachedMetrics *bool  `json:"useCachedMetrics,omitempty"`
}

// Dimension is a CloudWatch dimension.
type Dimension struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// PrometheusTrigger scales on a PromQL query returning a scalar.
type PrometheusTrigger struct {
	Name                  string   `json:"name,omitempty"`
	ServerAddress         string   `json:"serverAddress"`
	Query                 string   `json:"query"`
	TargetValue           *float64 `json:"targetValue,omitempty"`
	ActivationTargetValue *float64 `json:"activationTargetValue,omitempty"`
	Namespace             string   `json:"namespace,omitempty"`
	CustomHeaders         string   `json:"customHeaders,omitempty"`
	// +kubebuilder:validation:Enum=Average;Value
	MetricType       string `json:"metricType,omitempty"`
	UseCachedMetrics *bool  `json:"useCachedMetrics,omitempty"`
}

// L2 cache backends (matched case-insensitively).
const (
	L2BackendRedis         = "redis"
	L2BackendTieredStorage = "tieredstorage"
)

// KVCacheSpec switches the tiered KV cache on: L1 is CPU memory in each
// replica, L2 a shared tier (redis, or tieredstorage on each node's local
// disk). L1CacheSize is capstan's extension, not the reference schema's.
type KVCacheSpec struct {
	EnableL1Cache *bool `json:"enableL1Cache,omitempty"`
	// L1CacheSize (capstan's extension) is each replica's L1 size, a
	// Kubernetes quantity ("8Gi"); unset, the worker's memory request, or
	// half the replica's share (by GPUs) of the node's memory.
	L1CacheSize     Quantity     `json:"l1CacheSize,omitempty"`
	EnableL2Cache   *bool        `json:"enableL2Cache,omitempty"`
	L2CacheSpec     *L2CacheSpec `json:"l2CacheSpec,omitempty"`
	CacheConfigFile string       `json:"cacheConfigFile,omitempty"`
}

// L2CacheSpec selects the shared tier.
type L2CacheSpec struct {
	L2CacheBackend  string `json:"l2CacheBackend"`
	L2CacheLocalURL string `json:"l2CacheLocalUrl,omitempty"`
	// L2CacheSize (capstan's extension) is the tieredstorage budget of the
	// model on each node, a Kubernetes quantity: each model has its own
	// file in the node's store, bounded by its own budget. Unset,
	// DefaultTieredStorageBytes of the instance type. It has no effect with
	// redis (the server's memory bounds it).
	L2CacheSize Quantity `json:"l2CacheSize,omitempty"`
}

// Routing strategies.
const (
	RoutingPrefixAware = "prefixaware"
	RoutingKVAware     = "kvaware"
	RoutingSession     = "session"
	RoutingRoundRobin  = "roundrobin"
)

// IntelligentRoutingSpec deploys a per-endpoint cache-aware router.
type IntelligentRoutingSpec struct {
	Enabled *bool `json:"enabled,omitempty"`
	// +kubebuilder:validation:Enum=prefixaware;kvaware;session;roundrobin
	RoutingStrategy string           `json:"routingStrategy,omitempty"`
	AutoScalingSpec *AutoScalingSpec `json:"autoScalingSpec,omitempty"`
}

// Load-balancer routing algorithms.
const (
	LBLeastOutstandingRequests = "least_outstanding_requests"
	LBRoundRobin               = "round_robin"
)

// LoadBalancer holds target-group settings.
type LoadBalancer struct {
	// +kubebuilder:validation:Pattern=`^/`
	HealthCheckPath string `json:"healthCheckPath,omitempty"`
	// +kubebuilder:validation:Enum=least_outstanding_requests;round_robin
	RoutingAlgorithm   string `json:"routingAlgorithm,omitempty"`
	IdleTimeoutSeconds *int32 `json:"idleTimeoutSeconds,omitempty"`
}

// TLSConfig configures certificates.
type TLSConfig struct {
	TLSCertificateOutputS3URI string                   `json:"tlsCertificateOutputS3Uri,omitempty"`
	CustomCertificateConfig   *CustomCertificateConfig `json:"customCertificateConfig,omitempty"`
}

// CustomCertificateConfig is a bring-your-own ACM certificate.
type CustomCertificateConfig struct {
	ACMArn     string `json:"acmArn"`
	DomainName string `json:"domainName"`
}

// DNSConfig automates Route 53 records.
type DNSConfig struct {
	HostedZoneID string `json:"hostedZoneId"`
}

// Metrics configures scraping of the model server.
type Metrics struct {
	Enabled                      *bool         `json:"enabled,omitempty"`
	MetricsScrapeIntervalSeconds *int32        `json:"metricsScrapeIntervalSeconds,omitempty"`
	ModelMetrics                 *ModelMetrics `json:"modelMetrics,omitempty"`
}

// ModelMetrics is where the model server exposes metrics.
type ModelMetrics struct {
	Path string `json:"path,omitempty"`
	Port *int32 `json:"port,omitempty"`
}

// KubernetesSpec customises the pod; volumes and init containers are core/v1
// shapes kept opaque except for a volume's name.
type KubernetesSpec struct {
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:pruning:PreserveUnknownFields
	InitContainers []json.RawMessage `json:"initContainers,omitempty"`
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:pruning:PreserveUnknownFields
	Volumes            []map[string]any `json:"volumes,omitempty"`
	ServiceAccountName string           `json:"serviceAccountName,omitempty"`
	SchedulerName      string           `json:"schedulerName,omitempty"`
}

// Tag is a SageMaker endpoint tag.
type Tag struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// JumpStartModel deploys a model from the JumpStart hub (capstan's model
// catalog) on a given instance type.
type JumpStartModel struct {
	APIVersion string             `json:"apiVersion"`
	Kind       string             `json:"kind"`
	Metadata   ObjectMeta         `json:"metadata"`
	Spec       JumpStartModelSpec `json:"spec"`
	Status     Status             `json:"status,omitzero"`
}

// JumpStartModelSpec is the JSM spec.
type JumpStartModelSpec struct {
	// +kubebuilder:validation:Required
	Model *JumpStartModelRef `json:"model,omitempty"`
	// +kubebuilder:validation:Required
	Server            *Server            `json:"server,omitempty"`
	SageMakerEndpoint *SageMakerEndpoint `json:"sageMakerEndpoint,omitempty"`
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	// +kubebuilder:default=1
	Replicas             *int32      `json:"replicas,omitempty"`
	EnvironmentVariables []NameValue `json:"environmentVariables,omitempty"`
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=86400
	// +kubebuilder:default=3600
	MaxDeployTimeInSeconds *int32                  `json:"maxDeployTimeInSeconds,omitempty"`
	AutoScalingSpec        *AutoScalingSpec        `json:"autoScalingSpec,omitempty"`
	KVCacheSpec            *KVCacheSpec            `json:"kvCacheSpec,omitempty"`
	IntelligentRoutingSpec *IntelligentRoutingSpec `json:"intelligentRoutingSpec,omitempty"`
	LoadBalancer           *LoadBalancer           `json:"loadBalancer,omitempty"`
	Metrics                *Metrics                `json:"metrics,omitempty"`
	TLSConfig              *TLSConfig              `json:"tlsConfig,omitempty"`
	DNSConfig              *DNSConfig              `json:"dnsConfig,omitempty"`
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	DataCapture json.RawMessage `json:"dataCapture,omitempty"`
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	ModelCacheConfig json.RawMessage `json:"modelCacheConfig,omitempty"`
}

// JumpStartModelRef names a hub model.
type JumpStartModelRef struct {
	// +kubebuilder:validation:Pattern=`^[a-zA-Z0-9][a-zA-Z0-9._-]{0,62}$`
	ModelID string `json:"modelId"`
	// +kubebuilder:default=SageMakerPublicHub
	ModelHubName           string      `json:"modelHubName,omitempty"`
	ModelVersion           string      `json:"modelVersion,omitempty"`
	AcceptEula             bool        `json:"acceptEula,omitempty"`
	GatedModelDownloadRole string      `json:"gatedModelDownloadRole,omitempty"`
	AdditionalConfigs      []NameValue `json:"additionalConfigs,omitempty"`
}

// Server is the JSM serving shape.
type Server struct {
	// +kubebuilder:validation:Pattern=`^ml\.`
	InstanceType string `json:"instanceType"`
	// +kubebuilder:validation:Pattern=`^mig-.*$`
	AcceleratorPartitionType string             `json:"acceleratorPartitionType,omitempty"`
	Validations              *ServerValidations `json:"validations,omitempty"`
	ExecutionRole            string             `json:"executionRole,omitempty"`
}

// ServerValidations toggles server-side checks.
type ServerValidations struct {
	AcceleratorPartitionValidation *bool `json:"acceleratorPartitionValidation,omitempty"`
}

// SageMakerEndpoint names the SageMaker endpoint to register ("" = none).
type SageMakerEndpoint struct {
	Name string `json:"name"`
}

// NameValue is a plain name/value pair.
type NameValue struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// State is the status state machine shared by both kinds.
type State string

// The eight upstream states.
const (
	StateDeploymentPending    State = "DeploymentPending"
	StateDeploymentInProgress State = "DeploymentInProgress"
	StateDeploymentFailed     State = "DeploymentFailed"
	StateDeploymentComplete   State = "DeploymentComplete"
	StateDeletionPending      State = "DeletionPending"
	StateDeletionInProgress   State = "DeletionInProgress"
	StateDeletionFailed       State = "DeletionFailed"
	StateDeletionComplete     State = "DeletionComplete"
)

// States lists every valid State in lifecycle order.
var States = []State{
	StateDeploymentPending, StateDeploymentInProgress, StateDeploymentFailed, StateDeploymentComplete,
	StateDeletionPending, StateDeletionInProgress, StateDeletionFailed, StateDeletionComplete,
}

// Valid reports whether s is one of States.
func (s State) Valid() bool {
	for _, v := range States {
		if s == v {
			return true
		}
	}
	return false
}

// Condition types. Upstream does not publish its condition types, so these
// are capstan's own, in the Kubernetes style (positive polarity).
const (
	ConditionReady       = "Ready"       // all desired replicas serve
	ConditionProgressing = "Progressing" // a rollout or scale is under way
	ConditionDegraded    = "Degraded"    // fewer replicas than desired, or a failure
)

// Condition reasons.
const (
	ReasonDeploying            = "Deploying"
	ReasonDeployed             = "Deployed"
	ReasonDeployTimeout        = "DeployTimeout"        // maxDeployTimeInSeconds elapsed
	ReasonInsufficientCapacity = "InsufficientCapacity" // no instance of the type available
	ReasonReplicaFailed        = "ReplicaFailed"
	ReasonScaledToZero         = "ScaledToZero"
	ReasonDeleting             = "Deleting"
	ReasonInvalidSpec          = "InvalidSpec"
	ReasonModelSourceFailed    = "ModelSourceFailed" // the model source could not be fetched or resolved
	ReasonEndpointNameInUse    = "EndpointNameInUse" // the SageMaker endpoint name belongs to someone else
	ReasonAsExpected           = "AsExpected"        // Degraded=False: nothing is wrong
)

// ConditionStatus is True, False or Unknown.
type ConditionStatus string

// Condition status values.
const (
	ConditionTrue    ConditionStatus = "True"
	ConditionFalse   ConditionStatus = "False"
	ConditionUnknown ConditionStatus = "Unknown"
)

// Condition mirrors metav1.Condition.
type Condition struct {
	Type               string          `json:"type"`
	Status             ConditionStatus `json:"status"`
	ObservedGeneration int64           `json:"observedGeneration,omitempty"`
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Format=date-time
	LastTransitionTime time.Time `json:"lastTransitionTime"`
	Reason             string    `json:"reason"`
	Message            string    `json:"message,omitempty"`
}

// Status is shared by both kinds and written only by controllers.
type Status struct {
	// +kubebuilder:validation:Enum=DeploymentPending;DeploymentInProgress;DeploymentFailed;DeploymentComplete;DeletionPending;DeletionInProgress;DeletionFailed;DeletionComplete
	State              State             `json:"state,omitempty"`
	Replicas           int32             `json:"replicas,omitempty"`
	ReadyReplicas      int32             `json:"readyReplicas,omitempty"`
	Selector           string            `json:"selector,omitempty"`
	ObservedGeneration int64             `json:"observedGeneration,omitempty"`
	Conditions         []Condition       `json:"conditions,omitempty"`
	DeploymentStatus   *DeploymentStatus `json:"deploymentStatus,omitempty"`
	Endpoints          *EndpointsStatus  `json:"endpoints,omitempty"`
	MetricsStatus      *MetricsStatus    `json:"metricsStatus,omitempty"`
}

// DeploymentStatus summarises the underlying deployment.
type DeploymentStatus struct {
	Name string `json:"name,omitempty"`
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Format=date-time
	LastUpdated                  *time.Time `json:"lastUpdated,omitempty"`
	DeploymentObjectOverallState string     `json:"deploymentObjectOverallState,omitempty"`
	Reason                       string     `json:"reason,omitempty"`
	Message                      string     `json:"message,omitempty"`
}

// EndpointsStatus says where the deployment can be invoked. URL is capstan's
// own addition: the gateway URL that reaches the deployment.
type EndpointsStatus struct {
	URL       string                   `json:"url,omitempty"`
	SageMaker *SageMakerEndpointStatus `json:"sagemaker,omitempty"`
}

// SageMakerEndpointStatus is the registered SageMaker endpoint.
type SageMakerEndpointStatus struct {
	State       string `json:"state"`
	EndpointArn string `json:"endpointArn,omitempty"`
	ConfigArn   string `json:"configArn,omitempty"`
	ModelArn    string `json:"modelArn,omitempty"`
}

// MetricsStatus reports scraping state.
type MetricsStatus struct {
	Enabled                      bool          `json:"enabled"`
	State                        string        `json:"state,omitempty"`
	ErrorMessage                 string        `json:"errorMessage,omitempty"`
	MetricsScrapeIntervalSeconds int32         `json:"metricsScrapeIntervalSeconds,omitempty"`
	ModelMetrics                 *ModelMetrics `json:"modelMetrics,omitempty"`
}

// GetKind, GetMeta and GetStatus implement Object.
func (o *InferenceEndpointConfig) GetKind() string      { return KindInferenceEndpointConfig }
func (o *InferenceEndpointConfig) GetMeta() *ObjectMeta { return &o.Metadata }
func (o *InferenceEndpointConfig) GetStatus() *Status   { return &o.Status }
func (o *JumpStartModel) GetKind() string               { return KindJumpStartModel }
func (o *JumpStartModel) GetMeta() *ObjectMeta          { return &o.Metadata }
func (o *JumpStartModel) GetStatus() *Status            { return &o.Status }
