package operator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/manifest"
	apiv1 "github.com/capstan-dev/capstan/internal/operator/apis/v1"
)

// Reasons the operator adds to manifest's.
const (
	// ReasonNameConflict: a child's name is taken by an object the
	// operator does not own; it is left alone.
	ReasonNameConflict = "NameConflict"
)

// Reconciler turns one kind of manifest object into its Deployment,
// Service and HPA (or KEDA ScaledObject), and mirrors the Deployment into the object's status.
type Reconciler struct {
	Client client.Client
	Scheme *runtime.Scheme
	Clock  clock.Clock
	Log    *slog.Logger
	Build  BuildOptions
	// New makes an empty object of the reconciled kind.
	New func() apiv1.Object
}

var _ reconcile.Reconciler = (*Reconciler)(nil)

// SetupWithManager registers the reconciler for its kind, watching the
// children it owns.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	obj := r.New()
	b := ctrl.NewControllerManagedBy(mgr).
		For(obj).
		Owns(&appsv1.Deployment{}).
		Owns(&corev1.Service{}).
		Owns(&autoscalingv2.HorizontalPodAutoscaler{})
	if r.Build.KEDA {
		b = b.Owns(NewScaledObject())
	}
	return b.Named(obj.ToManifest().GetKind()).Complete(r)
}

// The operator's RBAC (deploy/operator/rbac/role.yaml is generated from these).
// +kubebuilder:rbac:groups=inference.sagemaker.aws.amazon.com,resources=inferenceendpointconfigs;jumpstartmodels,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=inference.sagemaker.aws.amazon.com,resources=inferenceendpointconfigs/status;jumpstartmodels/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=autoscaling,resources=horizontalpodautoscalers,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=keda.sh,resources=scaledobjects,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations,verbs=get;patch

// Reconcile implements reconcile.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	obj := r.New()
	if err := r.Client.Get(ctx, req.NamespacedName, obj); err != nil {
		// Deleted: its children go with it (owner references).
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !obj.GetDeletionTimestamp().IsZero() {
		return reconcile.Result{}, nil
	}
	m := obj.ToManifest()
	m.Default()
	o := observed{generation: obj.GetGeneration(), selector: apiv1.SelectorLabels(m.GetKind(), obj.GetName())}
	if err := m.Validate(); err != nil {
		// The admission webhook refuses these; one can still be here when
		// it was stored before the webhook ran, or with the webhook off.
		o.failure, o.failureReason = err.Error(), manifest.ReasonInvalidSpec
		return reconcile.Result{}, r.writeStatus(ctx, obj, o)
	}
	desired, err := Build(m, r.Build)
	if err != nil {
		o.failure, o.failureReason = err.Error(), manifest.ReasonInvalidSpec
		return reconcile.Result{}, r.writeStatus(ctx, obj, o)
	}
	o.desired = *desired.Deployment.Spec.Replicas

	dep := &appsv1.Deployment{}
	if err := r.ensure(ctx, obj, desired.Deployment, dep, func(cur, want *appsv1.Deployment) bool {
		return equality.Semantic.DeepDerivative(want.Spec, cur.Spec) && equality.Semantic.DeepDerivative(want.Labels, cur.Labels)
	}); err != nil {
		return r.childFailed(ctx, obj, o, err)
	}
	o.deployment = dep
	if err := r.ensure(ctx, obj, desired.Service, &corev1.Service{}, func(cur, want *corev1.Service) bool {
		return equality.Semantic.DeepDerivative(want.Spec, cur.Spec) && equality.Semantic.DeepDerivative(want.Labels, cur.Labels)
	}); err != nil {
		return r.childFailed(ctx, obj, o, err)
	}
	switch {
	case desired.ScaledObject != nil:
		if err := r.ensure(ctx, obj, desired.ScaledObject, NewScaledObject(), func(cur, want *unstructured.Unstructured) bool {
			return equality.Semantic.DeepDerivative(want.Object["spec"], cur.Object["spec"]) && equality.Semantic.DeepDerivative(want.GetLabels(), cur.GetLabels())
		}); err != nil {
			return r.childFailed(ctx, obj, o, err)
		}
	case desired.HPA != nil:
		if err := r.ensure(ctx, obj, desired.HPA, &autoscalingv2.HorizontalPodAutoscaler{}, func(cur, want *autoscalingv2.HorizontalPodAutoscaler) bool {
			return equality.Semantic.DeepDerivative(want.Spec, cur.Spec) && equality.Semantic.DeepDerivative(want.Labels, cur.Labels)
		}); err != nil {
			return r.childFailed(ctx, obj, o, err)
		}
	}
	// An autoscaler the spec no longer asks for (autoScalingSpec removed,
	// or KEDA installed since) goes.
	if desired.HPA == nil {
		if err := r.removeOwned(ctx, obj, &autoscalingv2.HorizontalPodAutoscaler{}); err != nil {
			return reconcile.Result{}, err
		}
	}
	if desired.ScaledObject == nil && r.Build.KEDA {
		if err := r.removeOwned(ctx, obj, NewScaledObject()); err != nil {
			return reconcile.Result{}, err
		}
	}
	return reconcile.Result{}, r.writeStatus(ctx, obj, o)
}

// errNotOwned is returned by ensure for a child name held by another owner.
type errNotOwned struct{ kind, name string }

func (e *errNotOwned) Error() string {
	return fmt.Sprintf("%s %s exists and is not owned by this object; the operator leaves it alone", e.kind, e.name)
}

func (r *Reconciler) childFailed(ctx context.Context, obj apiv1.Object, o observed, err error) (reconcile.Result, error) {
	var no *errNotOwned
	if errors.As(err, &no) {
		o.failure, o.failureReason = err.Error(), ReasonNameConflict
		return reconcile.Result{}, r.writeStatus(ctx, obj, o)
	}
	return reconcile.Result{}, err
}

// ensure creates want, or updates the existing object (read into cur) when
// same says it differs; an existing object not controlled by owner is
// never touched.
func ensure[T client.Object](ctx context.Context, r *Reconciler, owner apiv1.Object, want, cur T, same func(cur, want T) bool) error {
	if err := controllerutil.SetControllerReference(owner, want, r.Scheme); err != nil {
		return fmt.Errorf("operator: owner reference: %w", err)
	}
	key := client.ObjectKeyFromObject(want)
	kind := want.GetObjectKind().GroupVersionKind().Kind
	err := r.Client.Get(ctx, key, cur)
	switch {
	case apierrors.IsNotFound(err):
		if err := r.Client.Create(ctx, want); err != nil {
			return fmt.Errorf("operator: create %s %s: %w", kind, key, err)
		}
		r.Log.InfoContext(ctx, "created", "kind", kind, "object", key.String())
		return copyInto(want, cur)
	case err != nil:
		return fmt.Errorf("operator: get %s %s: %w", kind, key, err)
	}
	if !metav1.IsControlledBy(cur, owner) {
		return &errNotOwned{kind: kind, name: key.String()}
	}
	if same(cur, want) {
		return nil
	}
	want.SetResourceVersion(cur.GetResourceVersion())
	if err := r.Client.Update(ctx, want); err != nil {
		return fmt.Errorf("operator: update %s %s: %w", kind, key, err)
	}
	r.Log.InfoContext(ctx, "updated", "kind", kind, "object", key.String())
	return copyInto(want, cur)
}

// copyInto copies src's JSON into dst (both the same Go type).
func copyInto(src, dst any) error {
	b, err := json.Marshal(src)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, dst)
}

func (r *Reconciler) ensure(ctx context.Context, owner apiv1.Object, want, cur client.Object, same any) error {
	switch w := want.(type) {
	case *appsv1.Deployment:
		return ensure(ctx, r, owner, w, cur.(*appsv1.Deployment), same.(func(cur, want *appsv1.Deployment) bool))
	case *corev1.Service:
		return ensure(ctx, r, owner, w, cur.(*corev1.Service), same.(func(cur, want *corev1.Service) bool))
	case *autoscalingv2.HorizontalPodAutoscaler:
		return ensure(ctx, r, owner, w, cur.(*autoscalingv2.HorizontalPodAutoscaler), same.(func(cur, want *autoscalingv2.HorizontalPodAutoscaler) bool))
	case *unstructured.Unstructured:
		return ensure(ctx, r, owner, w, cur.(*unstructured.Unstructured), same.(func(cur, want *unstructured.Unstructured) bool))
	}
	return fmt.Errorf("operator: cannot ensure %T", want)
}

// removeOwned deletes the object of owner's name and cur's type when owner
// controls it (an autoScalingSpec that was removed).
func (r *Reconciler) removeOwned(ctx context.Context, owner apiv1.Object, cur client.Object) error {
	err := r.Client.Get(ctx, client.ObjectKeyFromObject(owner), cur)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("operator: get %T: %w", cur, err)
	}
	if !metav1.IsControlledBy(cur, owner) {
		return nil
	}
	if err := r.Client.Delete(ctx, cur); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("operator: delete %T: %w", cur, err)
	}
	return nil
}

// writeStatus updates the status subresource when it changed.
func (r *Reconciler) writeStatus(ctx context.Context, obj apiv1.Object, o observed) error {
	st := obj.ManifestStatus()
	next := statusFor(*st, o, r.Clock.Now().UTC().Truncate(time.Second))
	if statusEqual(*st, next) {
		return nil
	}
	*st = next
	if err := r.Client.Status().Update(ctx, obj); err != nil {
		if apierrors.IsConflict(err) {
			return err // requeued; the next read has the new version
		}
		return fmt.Errorf("operator: status of %s: %w", client.ObjectKeyFromObject(obj), err)
	}
	return nil
}

// statusEqual compares two statuses as stored (JSON), so a time that only
// differs in its monotonic reading or location compares equal.
func statusEqual(a, b manifest.Status) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(ja) == string(jb)
}
