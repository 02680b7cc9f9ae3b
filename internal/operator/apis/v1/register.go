package v1

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
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

// NewScheme holds client-go's types and both kinds: what the operator and
// readers of its objects decode with.
func NewScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := AddToScheme(s); err != nil {
		return nil, err
	}
	return s, nil
}
