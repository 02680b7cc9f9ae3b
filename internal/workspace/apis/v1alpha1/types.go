package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/capstan-dev/capstan/internal/workspace"
)

// Workspace is one interactive space (JupyterLab, Code-OSS) on a node.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=workspaces,singular=workspace,scope=Namespaced,shortName=ws;space;spaces
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=".status.phase"
// +kubebuilder:printcolumn:name="Desired",type=string,JSONPath=".spec.desiredStatus"
// +kubebuilder:printcolumn:name="Node",type=string,JSONPath=".status.node"
// +kubebuilder:printcolumn:name="URL",type=string,JSONPath=".status.accessURL",priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
type Workspace struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   workspace.WorkspaceSpec   `json:"spec"`
	Status workspace.WorkspaceStatus `json:"status,omitempty"`
}

// WorkspaceList is a list of Workspace.
//
// +kubebuilder:object:root=true
type WorkspaceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Workspace `json:"items"`
}

// WorkspaceTemplate holds a space's defaults and the bounds it must keep.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=workspacetemplates,singular=workspacetemplate,scope=Namespaced,shortName=wst
// +kubebuilder:printcolumn:name="Display Name",type=string,JSONPath=".spec.displayName"
// +kubebuilder:printcolumn:name="Image",type=string,JSONPath=".spec.defaultImage"
// +kubebuilder:printcolumn:name="App",type=string,JSONPath=".spec.appType",priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
type WorkspaceTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec workspace.WorkspaceTemplateSpec `json:"spec"`
}

// WorkspaceTemplateList is a list of WorkspaceTemplate.
//
// +kubebuilder:object:root=true
type WorkspaceTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []WorkspaceTemplate `json:"items"`
}
