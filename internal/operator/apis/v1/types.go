package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/capstan-dev/capstan/internal/manifest"
)

// InferenceEndpointConfig deploys a custom model server (worker).
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=inferenceendpointconfigs,singular=inferenceendpointconfig,scope=Namespaced,shortName=iec
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=".status.state"
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=".spec.replicas"
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=".status.readyReplicas"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
type InferenceEndpointConfig struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   manifest.InferenceEndpointConfigSpec `json:"spec"`
	Status manifest.Status                      `json:"status,omitempty"`
}

// InferenceEndpointConfigList is a list of InferenceEndpointConfig.
//
// +kubebuilder:object:root=true
type InferenceEndpointConfigList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []InferenceEndpointConfig `json:"items"`
}

// JumpStartModel deploys a model from the JumpStart hub (capstan's catalog).
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=jumpstartmodels,singular=jumpstartmodel,scope=Namespaced,shortName=jsm
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=".status.state"
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=".spec.replicas"
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=".status.readyReplicas"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
type JumpStartModel struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   manifest.JumpStartModelSpec `json:"spec"`
	Status manifest.Status             `json:"status,omitempty"`
}

// JumpStartModelList is a list of JumpStartModel.
//
// +kubebuilder:object:root=true
type JumpStartModelList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []JumpStartModel `json:"items"`
}
