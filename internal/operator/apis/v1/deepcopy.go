package v1

import (
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Deep copies are written by hand rather than by controller-gen's object
// generator: the spec and status are internal/manifest types, which hold
// opaque JSON (json.RawMessage, map[string]any) that the generator cannot
// copy, and generating methods into internal/manifest would tie it to
// Kubernetes. A JSON round trip copies them exactly, since JSON is their
// only representation anyway.

func copyJSON[T any](in T) T {
	b, err := json.Marshal(in)
	if err != nil {
		panic(fmt.Sprintf("deep copy %T: %v", in, err)) // only JSON-made values live here
	}
	var out T
	if err := json.Unmarshal(b, &out); err != nil {
		panic(fmt.Sprintf("deep copy %T: %v", in, err))
	}
	return out
}

// DeepCopyInto copies o into out.
func (o *InferenceEndpointConfig) DeepCopyInto(out *InferenceEndpointConfig) {
	out.TypeMeta = o.TypeMeta
	o.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	out.Spec = copyJSON(o.Spec)
	out.Status = copyJSON(o.Status)
}

// DeepCopy returns a copy of o.
func (o *InferenceEndpointConfig) DeepCopy() *InferenceEndpointConfig {
	if o == nil {
		return nil
	}
	out := new(InferenceEndpointConfig)
	o.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (o *InferenceEndpointConfig) DeepCopyObject() runtime.Object { return o.DeepCopy() }

// DeepCopyObject implements runtime.Object.
func (l *InferenceEndpointConfigList) DeepCopyObject() runtime.Object {
	if l == nil {
		return nil
	}
	out := &InferenceEndpointConfigList{TypeMeta: l.TypeMeta}
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	if l.Items != nil {
		out.Items = make([]InferenceEndpointConfig, len(l.Items))
		for i := range l.Items {
			l.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
	return out
}

// DeepCopyInto copies o into out.
func (o *JumpStartModel) DeepCopyInto(out *JumpStartModel) {
	out.TypeMeta = o.TypeMeta
	o.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	out.Spec = copyJSON(o.Spec)
	out.Status = copyJSON(o.Status)
}

// DeepCopy returns a copy of o.
func (o *JumpStartModel) DeepCopy() *JumpStartModel {
	if o == nil {
		return nil
	}
	out := new(JumpStartModel)
	o.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (o *JumpStartModel) DeepCopyObject() runtime.Object { return o.DeepCopy() }

// DeepCopyObject implements runtime.Object.
func (l *JumpStartModelList) DeepCopyObject() runtime.Object {
	if l == nil {
		return nil
	}
	out := &JumpStartModelList{TypeMeta: l.TypeMeta}
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	if l.Items != nil {
		out.Items = make([]JumpStartModel, len(l.Items))
		for i := range l.Items {
			l.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
	return out
}

func metav1AddToGroupVersion(s *runtime.Scheme) { metav1.AddToGroupVersion(s, GroupVersion) }
