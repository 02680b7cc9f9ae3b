package endpoint

import (
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/capstan-dev/capstan/internal/placement"
	"github.com/capstan-dev/capstan/internal/serving"
)

// Store buckets.
const (
	KindModel    = "models"
	KindConfig   = "endpointconfigs"
	KindEndpoint = "endpoints"
)

// Caps on counts. SageMaker bounds the number of variants (1..10) and
// InitialInstanceCount only from below; its real ceiling is the account's
// service quota. capstan's ceiling is MaxInstancesPerVariant, so that no
// client number can size a loop, a list of replica ids or an allocation.
const (
	// MaxVariants is SageMaker's limit on ProductionVariants.
	MaxVariants = 10
	// MaxInstancesPerVariant bounds InitialInstanceCount and
	// DesiredInstanceCount. A replica is a process (or a simulated one) on
	// the capstan host; 1000 is far above any fleet a host can run and
	// equals the manifest cap on replicas.
	MaxInstancesPerVariant = 1000
	// MaxInstancesPerEndpoint bounds what one endpoint holds at once: every
	// variant at its cap on both sides of a blue/green update.
	MaxInstancesPerEndpoint = 2 * MaxVariants * MaxInstancesPerVariant
)

// An Allocator refuses more than placement.MaxInstancesPerOwner of a source
// outright, so an endpoint's bound must not exceed it (this fails to compile
// if it does).
var _ [placement.MaxInstancesPerOwner - MaxInstancesPerEndpoint]struct{}

// AddInstances is a+b for instance counts, refusing negative terms and sums
// over MaxInstancesPerEndpoint (checked before adding, so it cannot wrap).
func AddInstances(a, b int) (int, error) {
	if a < 0 || b < 0 || a > MaxInstancesPerEndpoint || b > MaxInstancesPerEndpoint-a {
		return 0, &Error{Kind: ErrInvalid, Message: fmt.Sprintf(
			"Instance count %d + %d is outside [0, %d], capstan's limit on the instances of one endpoint.", a, b, MaxInstancesPerEndpoint)}
	}
	return a + b, nil
}

// checkCount refuses a variant instance count outside [0, MaxInstancesPerVariant].
func checkCount(variant string, n int) error {
	if n < 0 || n > MaxInstancesPerVariant {
		return &Error{Kind: ErrInvalid, Message: fmt.Sprintf(
			"Variant %q asks for %d instances; capstan allows 0 to %d instances per variant.", variant, n, MaxInstancesPerVariant)}
	}
	return nil
}

// checkWeight refuses a variant weight that is negative, NaN or infinite.
func checkWeight(variant string, w float64) error {
	if !(w >= 0) || math.IsInf(w, 0) {
		return &Error{Kind: ErrInvalid, Message: fmt.Sprintf(
			"Variant %q has weight %v; a weight must be a finite number greater than or equal to 0.", variant, w)}
	}
	return nil
}

// Endpoint statuses (the subset capstan produces).
const (
	StatusCreating  = "Creating"
	StatusInService = "InService"
	StatusUpdating  = "Updating"
	StatusDeleting  = "Deleting"
	StatusFailed    = "Failed"
)

// Tag is a key/value label, kept only to be echoed back.
type Tag struct {
	Key   string `json:"Key"`
	Value string `json:"Value"`
}

// Container says what a model runs. Field names follow SageMaker's
// ContainerDefinition because users write them; capstan reads Environment and
// ModelDataUrl to decide which catalog model to simulate (see ResolveModel).
type Container struct {
	ContainerHostname string            `json:"ContainerHostname,omitempty"`
	Image             string            `json:"Image,omitempty"`
	Mode              string            `json:"Mode,omitempty"`
	ModelDataUrl      string            `json:"ModelDataUrl,omitempty"`
	Environment       map[string]string `json:"Environment,omitempty"`
	ModelPackageName  string            `json:"ModelPackageName,omitempty"`
	ImageConfig       json.RawMessage   `json:"ImageConfig,omitempty"`
	ModelDataSource   json.RawMessage   `json:"ModelDataSource,omitempty"`
}

// Model is a registered model.
type Model struct {
	Name                     string          `json:"ModelName"`
	CreationTime             time.Time       `json:"CreationTime"`
	PrimaryContainer         *Container      `json:"PrimaryContainer,omitempty"`
	Containers               []Container     `json:"Containers,omitempty"`
	ExecutionRoleArn         string          `json:"ExecutionRoleArn,omitempty"`
	EnableNetworkIsolation   bool            `json:"EnableNetworkIsolation,omitempty"`
	InferenceExecutionConfig json.RawMessage `json:"InferenceExecutionConfig,omitempty"`
	VpcConfig                json.RawMessage `json:"VpcConfig,omitempty"`
	Tags                     []Tag           `json:"Tags,omitempty"`

	// Set by CreateModel, never on the wire: ModelDir is the local model
	// folder fetched from ModelDataUrl / ModelDataSource (its config.json
	// gives the architecture); ResolvedModel the catalog model it is, or
	// the one a JumpStart artifacts URI names ("" when not in the catalog).
	ModelDir      string `json:"capstanModelDir,omitempty"`
	ResolvedModel string `json:"capstanResolvedModel,omitempty"`
	// Engine is the engine adapter its replicas run, chosen from the
	// container image (package engines; "" in records older than engines:
	// the simulator). EngineNote says why the simulator stands in, when it does.
	Engine     string `json:"capstanEngine,omitempty"`
	EngineNote string `json:"capstanEngineNote,omitempty"`
}

// RoutingConfig picks the replica strategy inside a variant.
type RoutingConfig struct {
	RoutingStrategy string `json:"RoutingStrategy"`
}

// CapacityReservationConfig pins a variant to a training plan's instances
// (see reservation.go).
type CapacityReservationConfig struct {
	CapacityReservationPreference string `json:"CapacityReservationPreference,omitempty"`
	MlReservationArn              string `json:"MlReservationArn,omitempty"`
}

// Variant is one production variant of an endpoint config.
type Variant struct {
	VariantName                                 string                     `json:"VariantName"`
	ModelName                                   string                     `json:"ModelName,omitempty"`
	InitialInstanceCount                        int                        `json:"InitialInstanceCount,omitempty"`
	InstanceType                                string                     `json:"InstanceType,omitempty"`
	InitialVariantWeight                        *float64                   `json:"InitialVariantWeight,omitempty"`
	RoutingConfig                               *RoutingConfig             `json:"RoutingConfig,omitempty"`
	CapacityReservationConfig                   *CapacityReservationConfig `json:"CapacityReservationConfig,omitempty"`
	VolumeSizeInGB                              *int                       `json:"VolumeSizeInGB,omitempty"`
	ModelDataDownloadTimeoutInSeconds           *int                       `json:"ModelDataDownloadTimeoutInSeconds,omitempty"`
	ContainerStartupHealthCheckTimeoutInSeconds *int                       `json:"ContainerStartupHealthCheckTimeoutInSeconds,omitempty"`
	InferenceAmiVersion                         string                     `json:"InferenceAmiVersion,omitempty"`
	ServerlessConfig                            *ServerlessConfig          `json:"ServerlessConfig,omitempty"`
}

// Weight is InitialVariantWeight with SageMaker's default of 1.0.
func (v Variant) Weight() float64 {
	if v.InitialVariantWeight == nil {
		return 1
	}
	return *v.InitialVariantWeight
}

// EndpointConfig is a named set of variants.
type EndpointConfig struct {
	Name                   string          `json:"EndpointConfigName"`
	CreationTime           time.Time       `json:"CreationTime"`
	ProductionVariants     []Variant       `json:"ProductionVariants"`
	DataCaptureConfig      json.RawMessage `json:"DataCaptureConfig,omitempty"`
	AsyncInferenceConfig   json.RawMessage `json:"AsyncInferenceConfig,omitempty"`
	KmsKeyId               string          `json:"KmsKeyId,omitempty"`
	ExecutionRoleArn       string          `json:"ExecutionRoleArn,omitempty"`
	EnableNetworkIsolation bool            `json:"EnableNetworkIsolation,omitempty"`
	Tags                   []Tag           `json:"Tags,omitempty"`
}

// Endpoint is the stored record of an endpoint and of the controller's progress.
type Endpoint struct {
	Name             string    `json:"name"`
	Status           string    `json:"status"`
	FailureReason    string    `json:"failureReason,omitempty"`
	CreationTime     time.Time `json:"creationTime"`
	LastModifiedTime time.Time `json:"lastModifiedTime"`
	Tags             []Tag     `json:"tags,omitempty"`
	// Version increases on every write; the controller writes only if the
	// version it read is still current (optimistic concurrency with the API).
	Version int64 `json:"version"`
	// Generation numbers deployments; replica ids include it.
	Generation int `json:"generation"`
	// Current is what serves traffic (nil until the first deployment is up).
	Current *Deployment `json:"current,omitempty"`
	// Pending is the deployment being brought up (CreateEndpoint or the green
	// side of UpdateEndpoint); it takes traffic only once all of it is healthy.
	Pending *Deployment `json:"pending,omitempty"`
	// Retiring are replicas taken out of the route that still need draining and
	// stopping (old blue side, or instances removed by a capacity change).
	Retiring []string `json:"retiring,omitempty"`
	// ReservationExpired is set when the plan under the serving deployment
	// ended: its instances were taken back and invocations fail as
	// gateway.UnavailableExpired until the endpoint is updated.
	ReservationExpired bool `json:"reservationExpired,omitempty"`
	// ManagedBy names the manifest that registered this endpoint (e.g.
	// "InferenceEndpointConfig/default/demo"); such endpoints are run by the
	// deployment controller, not this package's, and refuse SageMaker updates.
	ManagedBy string `json:"managedBy,omitempty"`
	// Rollout is the update in progress, with its policy (nil otherwise).
	Rollout *Rollout `json:"rollout,omitempty"`
	// LastPolicy is the policy of the last update that finished or was
	// rolled back (DescribeEndpoint's LastDeploymentConfig).
	LastPolicy *serving.Policy `json:"lastPolicy,omitempty"`
}

// Rollout is an update moving from Current to Pending under a policy.
type Rollout struct {
	Policy serving.Policy `json:"policy"`
	// Start is when the update began (for Policy.MaxDuration).
	Start time.Time `json:"start"`
	// RollingBack is set once the update failed: Current is brought back
	// to its size and Pending retires, under Policy.RollbackStrategy;
	// Reason says why.
	RollingBack bool   `json:"rollingBack,omitempty"`
	Reason      string `json:"reason,omitempty"`
}

// Deployment is one endpoint config brought up as replicas.
type Deployment struct {
	ConfigName string         `json:"configName"`
	Generation int            `json:"generation"`
	StartTime  time.Time      `json:"startTime"`
	Variants   []VariantState `json:"variants"`
}

// VariantState is one variant of a deployment and the replicas serving it.
type VariantState struct {
	Name            string `json:"name"`
	ModelName       string `json:"modelName"`
	InstanceType    string `json:"instanceType"`
	RoutingStrategy string `json:"routingStrategy,omitempty"`
	// Model is the catalog model id replicas run; ModelError says why it could
	// not be resolved (the endpoint then fails with it as FailureReason).
	Model      string `json:"model,omitempty"`
	ModelError string `json:"modelError,omitempty"`
	// ModelDir is the model folder replicas run (--model-dir), when the
	// model's artifacts were fetched; Model then only names it.
	ModelDir string `json:"modelDir,omitempty"`
	// Engine is the engine adapter its replicas run (the model's Engine).
	Engine   string `json:"engine,omitempty"`
	GPU      string `json:"gpu,omitempty"`
	GPUCount int    `json:"gpuCount,omitempty"`

	Weight        float64  `json:"weight"`
	DesiredWeight float64  `json:"desiredWeight"`
	DesiredCount  int      `json:"desiredCount"`
	Replicas      []string `json:"replicas"`
	// NextIndex numbers new replicas so ids are never reused.
	NextIndex int `json:"nextIndex"`
	// ChangeStart is when a weight/capacity change of this variant began.
	ChangeStart time.Time `json:"changeStart,omitempty"`

	// Reservation is the training plan a capacity-reservations-only variant
	// runs on (zero for on-demand), stored as the plan key string;
	// ReservationArn is the ARN as given.
	Reservation    placement.PlanRef `json:"reservation,omitzero"`
	ReservationArn string            `json:"reservationArn,omitempty"`
	// Waiting says why replicas are not started yet (the plan has not begun).
	Waiting string `json:"waiting,omitempty"`

	// Rollout progress of the side being brought up (see serving.Progress).
	// Share is its traffic share against the other side's variant of the
	// same name; StepAt when the rollout last took a step; Want how many
	// replicas the strategy asked for (Want above len(Replicas) waits for
	// capacity); Hold, under a rolling policy, how many instances the pair
	// of variants may use together (0: no limit beyond the allocation).
	Share  float64   `json:"share,omitempty"`
	StepAt time.Time `json:"stepAt,omitzero"`
	Want   int       `json:"want,omitempty"`
	Hold   int       `json:"hold,omitempty"`

	// Serverless is the serving ServerlessConfig of a serverless variant
	// (nil for an instance-based one); DesiredServerless is what
	// UpdateEndpointWeightsAndCapacities asked for until the controller
	// applies it (see serverless.go).
	Serverless        *ServerlessConfig `json:"serverless,omitempty"`
	DesiredServerless *ServerlessConfig `json:"desiredServerless,omitempty"`
}

// Desired is one entry of UpdateEndpointWeightsAndCapacities.
type Desired struct {
	VariantName   string
	Weight        *float64
	InstanceCount *int
	// Serverless is ServerlessUpdateConfig (serverless variants only).
	Serverless *ServerlessUpdate
}

// instanceCounts sums instances per source over the given deployments, with
// checked addition: a count outside [0, MaxInstancesPerVariant] or a sum over
// MaxInstancesPerEndpoint is an error, never a wrapped int (a negative sum
// would pass every fleet check). A variant with a Hold (a rolling update)
// counts its Hold once for itself and the other side's variant of its name.
func instanceCounts(deps ...*Deployment) (placement.Want, error) {
	out := placement.Want{}
	held := map[string]bool{}
	for _, d := range deps {
		if d == nil {
			continue
		}
		for _, v := range d.Variants {
			if v.Hold > 0 {
				held[v.Name] = true
			}
		}
	}
	for _, d := range deps {
		if d == nil {
			continue
		}
		for _, v := range d.Variants {
			n := max(len(v.Replicas), v.DesiredCount)
			if held[v.Name] {
				if v.Hold == 0 {
					continue
				}
				n = v.Hold
			}
			if err := checkCount(v.Name, n); err != nil {
				return nil, err
			}
			if v.Serverless != nil {
				// Serverless replicas hold no fleet instances (serverless.go).
				continue
			}
			key := placement.OnDemand(v.InstanceType)
			if !v.Reservation.IsZero() {
				// Reserved-only variants draw on their plan, never on-demand.
				if n == 0 {
					continue
				}
				key = placement.OnPlan(v.Reservation)
			}
			sum, err := AddInstances(out[key], n)
			if err != nil {
				return nil, err
			}
			out[key] = sum
		}
	}
	return out, nil
}
