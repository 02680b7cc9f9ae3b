package runtime

import (
	"context"
	"errors"
	"time"
)

// ReplicaSpec says what one replica runs. It is engine-neutral: the runtime
// turns it into a command line (local) or a pod (kube).
type ReplicaSpec struct {
	// ID is unique per replica and stable across restarts of capstan, e.g.
	// "my-endpoint.AllTraffic.gen3.0". The runtime uses it for log file names.
	ID string
	// Owner labels, for logs and metrics.
	Endpoint string
	Variant  string
	// Controller names the controller that owns the replica: "" for the
	// SageMaker endpoint controller, ControllerDeployment for manifests. Each
	// controller touches only its own replicas.
	Controller string
	// Engine names the engine adapter (package engines): "sim" (also ""),
	// "llamacpp", "vllm", "sglang" or "tgi".
	Engine string
	// Model is a catalog model id or alias (e.g. a Hugging Face name). It may
	// be empty when ModelDir is set.
	Model string
	// ModelDir is a model folder whose Hugging Face config.json gives the
	// architecture (fetched from a manifest's model source).
	ModelDir string
	// ServedModelName is the name the engine answers to in OpenAI requests;
	// empty means Model.
	ServedModelName string
	// GPU is a catalog GPU name; TensorParallel is the number of GPUs the
	// replica spans; MIGProfile, when set, is the slice it runs on.
	GPU            string
	TensorParallel int
	MIGProfile     string
	// Devices are the GPU indices or MIG device UUIDs the replica may use
	// (CUDA_VISIBLE_DEVICES of a CUDA engine); empty: the engine's default.
	Devices []string
	// KVEventsEndpoint, when set, is where an engine that publishes KV
	// cache events binds them (ZMQ, tcp://*:PORT).
	KVEventsEndpoint string
	// KVTiers are the KV cache tiers below the GPU the replica keeps; each
	// engine adapter turns them into its own flags (or warns it has none).
	KVTiers KVTiers
	// Args are extra engine flags (e.g. "--time-scale=0.01").
	Args []string
	// Env is extra environment for the engine process.
	Env map[string]string
	// Labels name the replica's owner for monitoring (Prometheus service
	// discovery): endpoint, variant, instance_type for a SageMaker variant;
	// namespace, deployment, kind, endpoint, instance_type for a manifest's
	// deployment. The runtime does not read them.
	Labels map[string]string
}

// KVTiers are a replica's KV cache tiers below the GPU; zero values are off.
type KVTiers struct {
	// CPUBytes is the node-CPU (l1) tier's size.
	CPUBytes int64
	// StorageDir and StorageBytes are the node's shared tieredstorage file
	// folder and this model's budget in it.
	StorageDir   string
	StorageBytes int64
	// RedisURL is the shared (l2) Redis store.
	RedisURL string
}

// Any reports whether a tier is on.
func (t KVTiers) Any() bool { return t.CPUBytes > 0 || t.StorageBytes > 0 || t.RedisURL != "" }

// ControllerDeployment owns the replicas of InferenceEndpointConfig and
// JumpStartModel deployments.
const ControllerDeployment = "deployment"

// State is where a replica is in its life.
type State string

const (
	StateStarting State = "Starting" // launched, not yet healthy
	StateHealthy  State = "Healthy"  // passing health checks, may take traffic
	StateFailed   State = "Failed"   // crashed or unhealthy; the runtime may restart it
	StateStopped  State = "Stopped"  // stopped on request
)

// Replica is the runtime's view of one replica.
type Replica struct {
	Spec ReplicaSpec
	// Addr is host:port of the replica's HTTP server, known once started.
	Addr string
	// APIKey is the secret the replica's engine requires as a bearer token
	// (its health route aside): whoever calls the replica (the gateway, the
	// metrics reader) sends it, so a local user who finds the port cannot
	// skip capstan's keys and limits. Empty: the engine takes none. Never
	// stored or shown.
	APIKey   string `json:"-"`
	State    State
	Message  string // why it is Failed, or what it waits for
	Restarts int
	// Failures counts the runs in a row that ended in failure without the
	// replica becoming healthy (a crash loop, e.g. an engine that cannot
	// load its model); LastFailure is the latest one's Message, kept while
	// the replica restarts.
	Failures    int
	LastFailure string
	Since       time.Time // when State last changed
}

// ErrNotFound is returned for an unknown replica id.
var ErrNotFound = errors.New("replica not found")

// Runtime starts, watches and stops replicas.
//
// Error contract: Start returns an error only when the spec is invalid or the
// replica cannot be launched at all (bad model or GPU name, no binary); a
// replica that launches and then crashes is reported through its State, and
// the runtime restarts it with backoff until Stop. Stop is idempotent and
// returns once the replica's process has exited (or ctx is done).
type Runtime interface {
	Start(ctx context.Context, spec ReplicaSpec) error
	Stop(ctx context.Context, id string) error
	Get(id string) (Replica, error)
	List() []Replica
	// Subscribe calls fn (from a runtime goroutine, never concurrently) on every
	// state change until ctx is done.
	Subscribe(ctx context.Context, fn func(Replica))
	// Close stops every replica.
	Close(ctx context.Context) error
}
