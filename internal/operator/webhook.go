package operator

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/capstan-dev/capstan/internal/manifest"
	apiv1 "github.com/capstan-dev/capstan/internal/operator/apis/v1"
)

// ValidatePath is where the validating webhook is served.
const ValidatePath = "/validate-inference-sagemaker-aws-amazon-com-v1"

// Validator is the validating admission webhook for both kinds: it runs
// manifest.Default and manifest.Validate (and ValidateUpdate on updates),
// the very checks `capstan apply` runs, so the API server refuses what
// capstan refuses, with the same field paths and messages. It covers what
// the CRD's OpenAPI schema cannot say: cross-field rules, the catalog
// (instance types, MIG profiles per GPU, model fit).
type Validator struct{}

var _ admission.Handler = Validator{}

// Handle implements admission.Handler.
func (Validator) Handle(_ context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return admission.Allowed("")
	}
	next, err := decodeManifest(req.Kind.Kind, req.Object.Raw)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	next.Default()
	verr := next.Validate()
	if verr == nil && req.Operation == admissionv1.Update && len(req.OldObject.Raw) > 0 {
		prev, err := decodeManifest(req.Kind.Kind, req.OldObject.Raw)
		if err != nil {
			return admission.Errored(http.StatusBadRequest, err)
		}
		prev.Default()
		verr = manifest.ValidateUpdate(prev, next)
	}
	if verr == nil {
		return admission.Allowed("")
	}
	return invalid(req, verr)
}

func decodeManifest(kind string, raw []byte) (manifest.Object, error) {
	var obj apiv1.Object
	switch kind {
	case manifest.KindJumpStartModel:
		obj = &apiv1.JumpStartModel{}
	default:
		obj = &apiv1.InferenceEndpointConfig{}
	}
	if err := json.Unmarshal(raw, obj); err != nil {
		return nil, err
	}
	return obj.ToManifest(), nil
}

// invalid answers 422 Invalid with one cause per field error, as the API
// server's own validation does, so kubectl prints each field path.
func invalid(req admission.Request, err error) admission.Response {
	fes := manifest.FieldErrors(err)
	causes := make([]metav1.StatusCause, 0, len(fes))
	msgs := make([]string, 0, len(fes))
	for _, fe := range fes {
		causes = append(causes, metav1.StatusCause{Type: metav1.CauseTypeFieldValueInvalid, Field: fe.Path, Message: fe.Message})
		msgs = append(msgs, fe.Error())
	}
	if len(msgs) == 0 {
		msgs = append(msgs, err.Error())
	}
	resp := admission.Denied(strings.Join(msgs, "; "))
	resp.Result.Code = http.StatusUnprocessableEntity
	resp.Result.Reason = metav1.StatusReasonInvalid
	resp.Result.Details = &metav1.StatusDetails{
		Name: req.Name, Group: apiv1.GroupVersion.Group, Kind: req.Kind.Kind, Causes: causes,
	}
	return resp
}
