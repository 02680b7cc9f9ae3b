package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capstan-dev/capstan/internal/manifest"
)

// Object is either kind as a Kubernetes object that also converts to its
// manifest, so the operator handles both with one reconciler.
type Object interface {
	client.Object
	// ToManifest is the object as `capstan apply` would have decoded it
	// (not yet defaulted); it shares no memory with the receiver.
	ToManifest() manifest.Object
	// ManifestStatus is the status the operator writes.
	ManifestStatus() *manifest.Status
}

var (
	_ Object = (*InferenceEndpointConfig)(nil)
	_ Object = (*JumpStartModel)(nil)
)

func meta(m *metav1.ObjectMeta) manifest.ObjectMeta {
	out := manifest.ObjectMeta{
		Name:            m.Name,
		Namespace:       m.Namespace,
		UID:             string(m.UID),
		ResourceVersion: m.ResourceVersion,
		Generation:      m.Generation,
	}
	if len(m.Labels) > 0 {
		out.Labels = make(map[string]string, len(m.Labels))
		for k, v := range m.Labels {
			out.Labels[k] = v
		}
	}
	// Annotations kubectl writes for its own bookkeeping are not the
	// manifest's: they would count against the manifest's limits.
	for k, v := range m.Annotations {
		if k == "kubectl.kubernetes.io/last-applied-configuration" {
			continue
		}
		if out.Annotations == nil {
			out.Annotations = map[string]string{}
		}
		out.Annotations[k] = v
	}
	if !m.CreationTimestamp.IsZero() {
		t := m.CreationTimestamp.Time
		out.CreationTimestamp = &t
	}
	return out
}

// ToManifest implements Object.
func (o *InferenceEndpointConfig) ToManifest() manifest.Object {
	c := o.DeepCopy()
	return &manifest.InferenceEndpointConfig{
		APIVersion: manifest.APIVersion,
		Kind:       manifest.KindInferenceEndpointConfig,
		Metadata:   meta(&c.ObjectMeta),
		Spec:       c.Spec,
		Status:     c.Status,
	}
}

// ManifestStatus implements Object.
func (o *InferenceEndpointConfig) ManifestStatus() *manifest.Status { return &o.Status }

// ToManifest implements Object.
func (o *JumpStartModel) ToManifest() manifest.Object {
	c := o.DeepCopy()
	return &manifest.JumpStartModel{
		APIVersion: manifest.APIVersion,
		Kind:       manifest.KindJumpStartModel,
		Metadata:   meta(&c.ObjectMeta),
		Spec:       c.Spec,
		Status:     c.Status,
	}
}

// ManifestStatus implements Object.
func (o *JumpStartModel) ManifestStatus() *manifest.Status { return &o.Status }
