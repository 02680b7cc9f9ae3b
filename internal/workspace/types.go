package workspace

import (
	"encoding/json"
	"time"

	"github.com/capstan-dev/capstan/internal/manifest"
)

// The API group, its version and kinds.
const (
	Group                 = "workspace.jupyter.org"
	Version               = "v1alpha1"
	APIVersion            = Group + "/" + Version
	KindWorkspace         = "Workspace"
	KindWorkspaceTemplate = "WorkspaceTemplate"
)

// Desired statuses.
const (
	StatusRunning = "Running"
	StatusStopped = "Stopped"
)

// Ownership and access types.
const (
	Public    = "Public"
	OwnerOnly = "OwnerOnly"
)

// App types a template runs: Jupyter is checked and idle-detected through
// the Jupyter server's REST API; any other runs the template's command and
// is checked by an HTTP GET of its base URL.
const (
	AppJupyter    = "jupyterlab"
	AppCodeEditor = "code-editor"
)

// Workspace is one space.
type Workspace struct {
	APIVersion string              `json:"apiVersion"`
	Kind       string              `json:"kind"`
	Metadata   manifest.ObjectMeta `json:"metadata"`
	Spec       WorkspaceSpec       `json:"spec"`
	Status     WorkspaceStatus     `json:"status,omitzero"`
}

// WorkspaceSpec is what the user asks for.
type WorkspaceSpec struct {
	DisplayName string `json:"displayName"`
	// Image is checked against the template's allowed images; capstan runs
	// the template's program on the node, not a container image.
	Image string `json:"image,omitempty"`
	// DesiredStatus is Running (default) or Stopped.
	DesiredStatus string `json:"desiredStatus,omitempty"`
	OwnershipType string `json:"ownershipType,omitempty"`
	AccessType    string `json:"accessType,omitempty"`
	// Resources: cpu, memory, nvidia.com/gpu or one nvidia.com/mig-<profile>.
	Resources       *manifest.ResourceRequirements `json:"resources,omitempty"`
	Storage         *Storage                       `json:"storage,omitempty"`
	ContainerConfig *ContainerConfig               `json:"containerConfig,omitempty"`
	Env             []manifest.EnvVar              `json:"env,omitempty"`
	// NodeSelector: node.kubernetes.io/instance-type is honoured.
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	TemplateRef  *TemplateRef      `json:"templateRef,omitempty"`
	IdleShutdown *IdleShutdown     `json:"idleShutdown,omitempty"`
	AppType      string            `json:"appType,omitempty"`

	// Accepted and answered with a warning (Ignored): Kubernetes pod
	// settings with no meaning for a process on one machine.
	ServiceAccountName string `json:"serviceAccountName,omitempty"`
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:pruning:PreserveUnknownFields
	Volumes json.RawMessage `json:"volumes,omitempty"`
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	Affinity json.RawMessage `json:"affinity,omitempty"`
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:pruning:PreserveUnknownFields
	Tolerations json.RawMessage `json:"tolerations,omitempty"`
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	Lifecycle json.RawMessage `json:"lifecycle,omitempty"`
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	ReadinessProbe json.RawMessage `json:"readinessProbe,omitempty"`
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	AccessStrategy json.RawMessage `json:"accessStrategy,omitempty"`
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	PodSecurityContext json.RawMessage `json:"podSecurityContext,omitempty"`
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	ContainerSecurityContext json.RawMessage `json:"containerSecurityContext,omitempty"`
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:pruning:PreserveUnknownFields
	InitContainers json.RawMessage `json:"initContainers,omitempty"`
}

// Storage is the space's home directory.
type Storage struct {
	StorageClassName string            `json:"storageClassName,omitempty"`
	Size             manifest.Quantity `json:"size,omitempty"`
	MountPath        string            `json:"mountPath,omitempty"`
}

// ContainerConfig overrides the template's command and args.
type ContainerConfig struct {
	Command []string `json:"command,omitempty"`
	Args    []string `json:"args,omitempty"`
}

// TemplateRef names a WorkspaceTemplate; Namespace defaults to
// DefaultTemplateNamespace.
type TemplateRef struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
}

// IdleShutdown stops a space after IdleTimeoutInMinutes without activity.
type IdleShutdown struct {
	Enabled              bool `json:"enabled"`
	IdleTimeoutInMinutes int  `json:"idleTimeoutInMinutes"`
	// Detection is accepted for compatibility; capstan detects activity
	// itself (Ignored says so).
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	Detection json.RawMessage `json:"detection,omitempty"`
}

// Phases of a workspace.
const (
	PhasePending  = "Pending"  // waiting for room on a node
	PhaseStarting = "Starting" // process launched, not answering yet
	PhaseRunning  = "Running"
	PhaseStopping = "Stopping"
	PhaseStopped  = "Stopped"
	PhaseFailed   = "Failed"
)

// Condition types (jupyter-k8s's).
const (
	ConditionAvailable   = "Available"
	ConditionProgressing = "Progressing"
	ConditionDegraded    = "Degraded"
	ConditionStopped     = "Stopped"
)

// WorkspaceStatus is what capstan observed.
type WorkspaceStatus struct {
	Phase string `json:"phase,omitempty"`
	// AccessURL is where the running space is served, through capstan.
	AccessURL           string `json:"accessURL,omitempty"`
	ApplicationBasePath string `json:"applicationBasePath,omitempty"`
	// Node, InstanceType and the GPUs or MIG slice the space holds.
	Node         string `json:"node,omitempty"`
	InstanceType string `json:"instanceType,omitempty"`
	GPUs         int    `json:"gpus,omitempty"`
	MIGSlice     string `json:"migSlice,omitempty"`
	// LastActivity is when capstan last saw the space in use.
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Format=date-time
	LastActivity       *time.Time  `json:"lastActivity,omitempty"`
	ObservedGeneration int64       `json:"observedGeneration,omitempty"`
	Conditions         []Condition `json:"conditions,omitempty"`
}

// Condition is a metav1.Condition.
type Condition struct {
	Type    string `json:"type"`
	Status  string `json:"status"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Format=date-time
	LastTransitionTime time.Time `json:"lastTransitionTime"`
}

// WorkspaceTemplate is a template's defaults and bounds.
type WorkspaceTemplate struct {
	APIVersion string                `json:"apiVersion"`
	Kind       string                `json:"kind"`
	Metadata   manifest.ObjectMeta   `json:"metadata"`
	Spec       WorkspaceTemplateSpec `json:"spec"`
}

// WorkspaceTemplateSpec holds what a workspace gets when it says nothing,
// and the ranges it may ask for.
type WorkspaceTemplateSpec struct {
	DisplayName       string                         `json:"displayName"`
	Description       string                         `json:"description,omitempty"`
	DefaultImage      string                         `json:"defaultImage"`
	AllowedImages     []string                       `json:"allowedImages,omitempty"`
	AllowCustomImages *bool                          `json:"allowCustomImages,omitempty"`
	DefaultResources  *manifest.ResourceRequirements `json:"defaultResources,omitempty"`
	ResourceBounds    *ResourceBounds                `json:"resourceBounds,omitempty"`
	PrimaryStorage    *StorageConfig                 `json:"primaryStorage,omitempty"`
	// EnvironmentVariables are merged under the workspace's env.
	EnvironmentVariables   []manifest.EnvVar   `json:"environmentVariables,omitempty"`
	DefaultContainerConfig *ContainerConfig    `json:"defaultContainerConfig,omitempty"`
	DefaultNodeSelector    map[string]string   `json:"defaultNodeSelector,omitempty"`
	DefaultOwnershipType   string              `json:"defaultOwnershipType,omitempty"`
	DefaultAccessType      string              `json:"defaultAccessType,omitempty"`
	DefaultIdleShutdown    *IdleShutdown       `json:"defaultIdleShutdown,omitempty"`
	IdleShutdownOverrides  *IdleShutdownPolicy `json:"idleShutdownOverrides,omitempty"`
	AppType                string              `json:"appType,omitempty"`

	AllowSecondaryStorages *bool `json:"allowSecondaryStorages,omitempty"`
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	DefaultAffinity json.RawMessage `json:"defaultAffinity,omitempty"`
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:pruning:PreserveUnknownFields
	DefaultTolerations json.RawMessage `json:"defaultTolerations,omitempty"`
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	DefaultAccessStrategy json.RawMessage `json:"defaultAccessStrategy,omitempty"`
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	DefaultLifecycle json.RawMessage `json:"defaultLifecycle,omitempty"`
}

// ResourceBounds are the ranges a workspace's requests must fall in.
type ResourceBounds struct {
	CPU    *ResourceRange `json:"cpu,omitempty"`
	Memory *ResourceRange `json:"memory,omitempty"`
	GPU    *ResourceRange `json:"gpu,omitempty"`
}

// ResourceRange is an inclusive range of quantities.
type ResourceRange struct {
	Min manifest.Quantity `json:"min"`
	Max manifest.Quantity `json:"max"`
}

// StorageConfig bounds the home directory's size.
type StorageConfig struct {
	DefaultSize      manifest.Quantity  `json:"defaultSize,omitempty"`
	MinSize          *manifest.Quantity `json:"minSize,omitempty"`
	MaxSize          *manifest.Quantity `json:"maxSize,omitempty"`
	DefaultMountPath string             `json:"defaultMountPath,omitempty"`
}

// IdleShutdownPolicy says whether and how far a workspace may change the
// template's idle shutdown.
type IdleShutdownPolicy struct {
	Allow             *bool `json:"allow,omitempty"`
	MinTimeoutMinutes *int  `json:"minTimeoutMinutes,omitempty"`
	MaxTimeoutMinutes *int  `json:"maxTimeoutMinutes,omitempty"`
}
