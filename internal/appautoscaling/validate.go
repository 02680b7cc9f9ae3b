package appautoscaling

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/capstan-dev/capstan/internal/awsjson"
)

func (e *validationErrors) required(present bool, path string) bool {
	if !present {
		e.Add(nil, path, awsjson.NotNull)
	}
	return present
}

func (e *validationErrors) length(v string, lo, hi int, path string) {
	if len(v) < lo {
		e.Add(v, path, fmt.Sprintf("Member must have length greater than or equal to %d", lo))
	} else if len(v) > hi {
		e.Add(v, path, fmt.Sprintf("Member must have length less than or equal to %d", hi))
	}
}

func (e *validationErrors) enum(v *string, path string, set []string) {
	if v != nil && !oneOf(*v, set) {
		e.Add(*v, path, "Member must satisfy enum value set: "+enumText(set))
	}
}

func (e *validationErrors) intRange(v *int, lo, hi int, path string) {
	if v == nil {
		return
	}
	if *v < lo {
		e.Add(*v, path, fmt.Sprintf("Member must have value greater than or equal to %d", lo))
	} else if *v > hi {
		e.Add(*v, path, fmt.Sprintf("Member must have value less than or equal to %d", hi))
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
	ve.required(r.ServiceNamespace != nil, "serviceNamespace")
	ve.enum(r.ServiceNamespace, "serviceNamespace", serviceNamespaces)
	if r.ResourceId != nil {
		ve.length(*r.ResourceId, 1, 1600, "resourceId")
	} else if required {
		ve.required(false, "resourceId")
	}
	if r.ScalableDimension != nil {
		ve.enum(r.ScalableDimension, "scalableDimension", scalableDimensions)
	} else if required {
		ve.required(false, "scalableDimension")
	}
}

// resolve checks that the (already model-valid, complete) triple is one
// capstan serves and returns its key and the endpoint/variant it names.
func (r *targetRef) resolve() (targetKey, string, string, error) {
	k := targetKey{*r.ServiceNamespace, *r.ResourceId, *r.ScalableDimension}
	if k.Namespace != NamespaceSageMaker {
		return k, "", "", validationf("Service namespace %s is not supported by capstan: only %s endpoint variants can be scaled.", k.Namespace, NamespaceSageMaker)
	}
	if k.Dimension != DimensionVariant {
		return k, "", "", validationf("Unsupported scalable dimension %s: capstan scales only %s.", k.Dimension, DimensionVariant)
	}
	ep, variant, ok := parseResource(k.ResourceID)
	if !ok {
		return k, "", "", validationf("Unsupported resource ID %s: a SageMaker variant is endpoint/<endpoint-name>/variant/<variant-name>.", k.ResourceID)
	}
	return k, ep, variant, nil
}

type pageToken struct {
	Offset int `json:"o"`
}

// page cuts n items into one page: MaxResults in [1, hi] (default def) and a
// NextToken this server issued.
func page(n int, maxResults *int, token *string, def, hi int) (start, end int, next *string, err error) {
	var ve validationErrors
	ve.intRange(maxResults, 1, hi, "maxResults")
	if err := ve.Err(); err != nil {
		return 0, 0, nil, err
	}
	if token != nil && *token != "" {
		raw, derr := base64.RawURLEncoding.DecodeString(*token)
		var t pageToken
		if derr == nil {
			derr = json.Unmarshal(raw, &t)
		}
		if derr != nil || t.Offset < 0 || t.Offset > n {
			return 0, 0, nil, newAPIError(http.StatusBadRequest, CodeInvalidNextToken, "Invalid token: %s", *token)
		}
		start = t.Offset
	}
	limit := def
	if maxResults != nil {
		limit = *maxResults
	}
	end = min(start+limit, n)
	if end < n {
		raw, _ := json.Marshal(pageToken{Offset: end})
		s := base64.RawURLEncoding.EncodeToString(raw)
		next = &s
	}
	return start, end, next, nil
}
