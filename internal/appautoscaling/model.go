package appautoscaling

import (
	"fmt"
	"regexp"
	"strings"
	"time"
)

// The only service namespace, dimension and resource shape capstan scales.
const (
	NamespaceSageMaker               = "sagemaker"
	DimensionVariant                 = "sagemaker:variant:DesiredInstanceCount"
	PredefinedInvocationsPerInstance = "SageMakerVariantInvocationsPerInstance"

	PolicyTargetTracking = "TargetTrackingScaling"
	PolicyStepScaling    = "StepScaling"
	PolicyPredictive     = "PredictiveScaling"
)

// Store buckets owned by this package.
const (
	bucketTargets    = "appautoscaling.targets"
	bucketPolicies   = "appautoscaling.policies"
	bucketActivities = "appautoscaling.activities"
)

// Enum value sets from the service model, for validation messages.
var (
	serviceNamespaces  = []string{"ecs", "elasticmapreduce", "ec2", "appstream", "dynamodb", "rds", "sagemaker", "custom-resource", "comprehend", "lambda", "cassandra", "kafka", "elasticache", "neptune", "workspaces"}
	scalableDimensions = []string{
		"ecs:service:DesiredCount", "ec2:spot-fleet-request:TargetCapacity", "elasticmapreduce:instancegroup:InstanceCount",
		"appstream:fleet:DesiredCapacity", "dynamodb:table:ReadCapacityUnits", "dynamodb:table:WriteCapacityUnits",
		"dynamodb:index:ReadCapacityUnits", "dynamodb:index:WriteCapacityUnits", "rds:cluster:ReadReplicaCount",
		"sagemaker:variant:DesiredInstanceCount", "custom-resource:ResourceType:Property",
		"comprehend:document-classifier-endpoint:DesiredInferenceUnits", "comprehend:entity-recognizer-endpoint:DesiredInferenceUnits",
		"lambda:function:ProvisionedConcurrency", "cassandra:table:ReadCapacityUnits", "cassandra:table:WriteCapacityUnits",
		"kafka:broker-storage:VolumeSize", "elasticache:cache-cluster:Nodes", "elasticache:replication-group:NodeGroups",
		"elasticache:replication-group:Replicas", "neptune:cluster:ReadReplicaCount",
		"sagemaker:variant:DesiredProvisionedConcurrency", "sagemaker:inference-component:DesiredCopyCount",
		"workspaces:workspacespool:DesiredUserSessions",
	}
	policyTypes = []string{PolicyStepScaling, PolicyTargetTracking, PolicyPredictive}
	statistics  = []string{"Average", "Minimum", "Maximum", "SampleCount", "Sum"}
	// Namespaces whose metrics capstan computes itself (through Reader).
	metricNamespaces = []string{"AWS/SageMaker", "capstan"}
)

// patResourceID is SageMaker's variant resource id; the names follow
// SageMaker's EndpointName / VariantName patterns.
var patResourceID = regexp.MustCompile(`^endpoint/([a-zA-Z0-9](?:-*[a-zA-Z0-9]){0,62})/variant/([a-zA-Z0-9](?:-*[a-zA-Z0-9]){0,62})$`)

// patPrintable is the model's \p{Print}+ for policy names.
var patPrintable = regexp.MustCompile(`^\PC+$`)

// targetKey identifies one scalable target.
type targetKey struct {
	Namespace, ResourceID, Dimension string
}

func (k targetKey) String() string { return k.Namespace + "|" + k.ResourceID + "|" + k.Dimension }

// parseResource splits endpoint/<name>/variant/<variant>.
func parseResource(id string) (endpointName, variant string, ok bool) {
	m := patResourceID.FindStringSubmatch(id)
	if m == nil {
		return "", "", false
	}
	return m[1], m[2], true
}

// targetRecord is a registered scalable target as stored.
type targetRecord struct {
	Key        targetKey
	Endpoint   string
	Variant    string
	Min, Max   int
	RoleARN    string
	SuspendIn  bool
	SuspendOut bool
	SuspendSch bool
	ARN        string
	Created    time.Time
	// Scaling history the cooldowns read; kept here so a restart keeps them.
	LastScaleOut time.Time
	LastScaleIn  time.Time
}

// policyRecord is a scaling policy as stored.
type policyRecord struct {
	Target  targetKey
	Name    string
	ARN     string
	Type    string
	Config  TargetTrackingConfig
	Alarms  []Alarm
	Created time.Time
}

func (p *policyRecord) key() string { return p.Target.String() + "|" + p.Name }

// activityRecord is one scaling activity as stored.
type activityRecord struct {
	Target targetKey
	ScalingActivity
}

func activityKey(t targetKey, start time.Time, id string) string {
	return fmt.Sprintf("%s|%020d|%s", t, start.UnixNano(), id)
}

// ---- wire shapes ----

// SuspendedState is the wire shape of a target's suspended scaling.
type SuspendedState struct {
	DynamicScalingInSuspended  *bool `json:"DynamicScalingInSuspended,omitempty"`
	DynamicScalingOutSuspended *bool `json:"DynamicScalingOutSuspended,omitempty"`
	ScheduledScalingSuspended  *bool `json:"ScheduledScalingSuspended,omitempty"`
}

// MetricDimension is a CloudWatch dimension.
type MetricDimension struct {
	Name  string `json:"Name"`
	Value string `json:"Value"`
}

// PredefinedMetricSpecification names a predefined metric.
type PredefinedMetricSpecification struct {
	PredefinedMetricType string  `json:"PredefinedMetricType"`
	ResourceLabel        *string `json:"ResourceLabel,omitempty"`
}

// CustomizedMetricSpecification names a CloudWatch metric.
type CustomizedMetricSpecification struct {
	MetricName *string           `json:"MetricName,omitempty"`
	Namespace  *string           `json:"Namespace,omitempty"`
	Dimensions []MetricDimension `json:"Dimensions,omitempty"`
	Statistic  *string           `json:"Statistic,omitempty"`
	Unit       *string           `json:"Unit,omitempty"`
	// Metrics (metric math) is accepted on the wire only to be refused with
	// a clear message.
	Metrics []map[string]any `json:"Metrics,omitempty"`
}

// TargetTrackingConfig is TargetTrackingScalingPolicyConfiguration.
type TargetTrackingConfig struct {
	TargetValue                   *float64                       `json:"TargetValue,omitempty"`
	PredefinedMetricSpecification *PredefinedMetricSpecification `json:"PredefinedMetricSpecification,omitempty"`
	CustomizedMetricSpecification *CustomizedMetricSpecification `json:"CustomizedMetricSpecification,omitempty"`
	ScaleOutCooldown              *int                           `json:"ScaleOutCooldown,omitempty"`
	ScaleInCooldown               *int                           `json:"ScaleInCooldown,omitempty"`
	DisableScaleIn                *bool                          `json:"DisableScaleIn,omitempty"`
}

// Alarm is one CloudWatch alarm a target-tracking policy owns.
type Alarm struct {
	AlarmName string `json:"AlarmName"`
	AlarmARN  string `json:"AlarmARN"`
}

// NotScaledReason says why an activity did not scale.
type NotScaledReason struct {
	Code            string `json:"Code"`
	CurrentCapacity *int   `json:"CurrentCapacity,omitempty"`
	MaxCapacity     *int   `json:"MaxCapacity,omitempty"`
	MinCapacity     *int   `json:"MinCapacity,omitempty"`
}

// ScalingActivity is the wire shape of a scaling activity.
type ScalingActivity struct {
	ActivityId        string            `json:"ActivityId"`
	ServiceNamespace  string            `json:"ServiceNamespace"`
	ResourceId        string            `json:"ResourceId"`
	ScalableDimension string            `json:"ScalableDimension"`
	Description       string            `json:"Description"`
	Cause             string            `json:"Cause"`
	StartTime         *Epoch            `json:"StartTime"`
	EndTime           *Epoch            `json:"EndTime,omitempty"`
	StatusCode        string            `json:"StatusCode"`
	StatusMessage     string            `json:"StatusMessage,omitempty"`
	Details           string            `json:"Details,omitempty"`
	NotScaledReasons  []NotScaledReason `json:"NotScaledReasons,omitempty"`
}

// Activity status codes.
const (
	StatusSuccessful = "Successful"
	StatusFailed     = "Failed"
)

func alarmNames(resourceID, id string) (high, low string) {
	return "TargetTracking-" + resourceID + "-AlarmHigh-" + id, "TargetTracking-" + resourceID + "-AlarmLow-" + id
}

func intp(n int) *int { return &n }

func oneOf(v string, set []string) bool {
	for _, s := range set {
		if s == v {
			return true
		}
	}
	return false
}

func enumText(set []string) string { return "[" + strings.Join(set, ", ") + "]" }
