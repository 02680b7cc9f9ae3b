package appautoscaling

import (
	"net/http"

	"github.com/capstan-dev/capstan/internal/awsjson"
)

// enum records a present v that is none of set.
func (e *validationErrors) enum(v *string, path string, set []string) {
	if v != nil {
		e.Enum(*v, path, set...)
	}
}

// targetRef is the (namespace, resource, dimension) triple every operation
// carries.
type targetRef struct {
	ServiceNamespace  *string `json:"ServiceNamespace"`
	ResourceId        *string `json:"ResourceId"`
	ScalableDimension *string `json:"ScalableDimension"`
}

// check adds the model's constraints; required says whether ResourceId and
// ScalableDimension must be present (ServiceNamespace always must).
func (r *targetRef) check(ve *validationErrors, required bool) {
	ve.Required(r.ServiceNamespace != nil, "serviceNamespace")
	ve.enum(r.ServiceNamespace, "serviceNamespace", serviceNamespaces)
	if r.ResourceId != nil {
		ve.Length(*r.ResourceId, 1, 1600, "resourceId")
	} else if required {
		ve.Required(false, "resourceId")
	}
	if r.ScalableDimension != nil {
		ve.enum(r.ScalableDimension, "scalableDimension", scalableDimensions)
	} else if required {
		ve.Required(false, "scalableDimension")
	}
}

// resolve checks that the (already model-valid, complete) triple is one
// capstan serves and returns its key and the endpoint/variant it names.
func (r *targetRef) resolve() (targetKey, string, string, error) {
	k := targetKey{*r.ServiceNamespace, *r.ResourceId, *r.ScalableDimension}
	if k.Namespace != NamespaceSageMaker {
		return k, "", "", awsjson.Validationf("Service namespace %s is not supported by capstan: only %s endpoint variants can be scaled.", k.Namespace, NamespaceSageMaker)
	}
	if k.Dimension != DimensionVariant {
		return k, "", "", awsjson.Validationf("Unsupported scalable dimension %s: capstan scales only %s.", k.Dimension, DimensionVariant)
	}
	ep, variant, ok := parseResource(k.ResourceID)
	if !ok {
		return k, "", "", awsjson.Validationf("Unsupported resource ID %s: a SageMaker variant is endpoint/<endpoint-name>/variant/<variant-name>.", k.ResourceID)
	}
	return k, ep, variant, nil
}

// page cuts n items into one page: MaxResults in [1, hi] (hi when absent)
// and a NextToken this server issued.
func page(n int, maxResults *int, token *string, hi int) (start, end int, next string, err error) {
	p := awsjson.Paging{MaxResults: maxResults}
	if token != nil {
		p.NextToken = *token
	}
	var ve awsjson.Violations
	p.CheckMaxResults(&ve, hi)
	if err := ve.Err(); err != nil {
		return 0, 0, "", err
	}
	start, end, next, ok := p.Page(n, hi)
	if !ok {
		return 0, 0, "", awsjson.Errorf(http.StatusBadRequest, CodeInvalidNextToken, "Invalid token: %s", p.NextToken)
	}
	return start, end, next, nil
}
