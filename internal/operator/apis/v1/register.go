package v1

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the API group and version of both kinds.
var GroupVersion = schema.GroupVersion{Group: "inference.sagemaker.aws.amazon.com", Version: "v1"}

// AddToScheme registers both kinds and their lists in a scheme.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion,
		&InferenceEndpointConfig{}, &InferenceEndpointConfigList{},
		&JumpStartModel{}, &JumpStartModelList{},
	)
	metav1AddToGroupVersion(s)
	return nil
}
