package manifestapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/capstan-dev/capstan/internal/deployment"
	"github.com/capstan-dev/capstan/internal/manifest"
	"github.com/capstan-dev/capstan/internal/spaces"
)

// Status is the Kubernetes metav1.Status body: every error the API returns,
// and the answer to a successful DELETE.
type Status struct {
	Kind       string         `json:"kind"`
	APIVersion string         `json:"apiVersion"`
	Metadata   struct{}       `json:"metadata"`
	Status     string         `json:"status"`
	Message    string         `json:"message,omitempty"`
	Reason     string         `json:"reason,omitempty"`
	Details    *StatusDetails `json:"details,omitempty"`
	Code       int            `json:"code"`
}

// Status.Status values.
const (
	StatusSuccess = "Success"
	StatusFailure = "Failure"
)

// Status reasons, as Kubernetes spells them.
const (
	ReasonInvalid               = "Invalid"
	ReasonNotFound              = "NotFound"
	ReasonBadRequest            = "BadRequest"
	ReasonMethodNotAllowed      = "MethodNotAllowed"
	ReasonRequestEntityTooLarge = "RequestEntityTooLarge"
	ReasonForbidden             = "Forbidden"
	ReasonConflict              = "Conflict"
	ReasonAlreadyExists         = "AlreadyExists"
	ReasonUnsupportedMediaType  = "UnsupportedMediaType"
	ReasonInternalError         = "InternalError"
	ReasonTimeout               = "Timeout"
)

// StatusDetails names the object an error is about and, for Invalid, every
// field problem.
type StatusDetails struct {
	Name   string        `json:"name,omitempty"`
	Group  string        `json:"group,omitempty"`
	Kind   string        `json:"kind,omitempty"`
	Causes []StatusCause `json:"causes,omitempty"`
}

// StatusCause is one problem. Field is the path inside the object
// ("spec.worker.resources.limits[nvidia.com/mig-4g.71gb]"). Document, Line
// and Object are capstan's additions (ignored by Kubernetes clients) that
// place the problem in a multi-document body: Document is 0-based.
type StatusCause struct {
	Reason   string `json:"reason,omitempty"`
	Message  string `json:"message"`
	Field    string `json:"field,omitempty"`
	Document *int   `json:"document,omitempty"`
	Line     int    `json:"line,omitempty"`
	Object   string `json:"object,omitempty"`
}

// Error makes a failure Status usable as an error on the client side.
func (s *Status) Error() string {
	if s.Message != "" {
		return s.Message
	}
	return fmt.Sprintf("%s (HTTP %d)", s.Reason, s.Code)
}

// Request-level error kinds, wrapped with %w by the handler and turned into
// a Status by statusFor.
var (
	errBadRequest           = errors.New("bad request")
	errUnsupportedMediaType = errors.New("unsupported media type")
	errNotFound             = errors.New("not found")
	errMethodNotAllowed     = errors.New("method not allowed")
	errTooLarge             = errors.New("request entity too large")
	// errPrecondition: a DELETE's preconditions do not hold (409, as in
	// Kubernetes).
	errPrecondition = errors.New("precondition failed")
)

// kindError is an error of one of the kinds above whose message is only
// its own text (no "bad request: " prefix on the wire).
type kindError struct {
	kind error
	msg  string
}

func (e *kindError) Error() string        { return e.msg }
func (e *kindError) Is(target error) bool { return target == e.kind }

// fail returns an error of the given kind with a formatted message.
func fail(kind error, format string, args ...any) error {
	return &kindError{kind: kind, msg: fmt.Sprintf(format, args...)}
}

// objectError names the object an error is about, for Status.details.
type objectError struct {
	kind, name string
	err        error
}

func (e *objectError) Error() string { return e.err.Error() }
func (e *objectError) Unwrap() error { return e.err }

func withObject(kind, name string, err error) error {
	return &objectError{kind: kind, name: name, err: err}
}

// statusFor maps any error from the handler or the Store to its wire
// Status; it is the only place that chooses HTTP codes and reasons.
func statusFor(err error) *Status {
	if st, ok := conflictStatus(err); ok {
		return st
	}
	st := &Status{Kind: "Status", APIVersion: "v1", Status: StatusFailure, Message: err.Error()}
	var oe *objectError
	if errors.As(err, &oe) {
		st.Details = &StatusDetails{Name: oe.name, Group: groupOf(oe.kind), Kind: oe.kind}
	}
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe) || errors.Is(err, errTooLarge):
		st.Code, st.Reason = http.StatusRequestEntityTooLarge, ReasonRequestEntityTooLarge
		if mbe != nil {
			st.Message = fmt.Sprintf("request body is larger than the limit of %d bytes", mbe.Limit)
		}
	case errors.Is(err, errBadRequest):
		st.Code, st.Reason = http.StatusBadRequest, ReasonBadRequest
	case errors.Is(err, errMethodNotAllowed):
		st.Code, st.Reason = http.StatusMethodNotAllowed, ReasonMethodNotAllowed
	case errors.Is(err, errNotFound), errors.Is(err, manifest.ErrNotFound):
		st.Code, st.Reason = http.StatusNotFound, ReasonNotFound
	case errors.Is(err, deployment.ErrTooMany), errors.Is(err, spaces.ErrTooMany):
		// Kubernetes answers an exceeded quota with 403 Forbidden.
		st.Code, st.Reason = http.StatusForbidden, ReasonForbidden
	case errors.Is(err, manifest.ErrConflict):
		// Worded as Kubernetes words it: clients match on it.
		st.Code, st.Reason = http.StatusConflict, ReasonConflict
		if oe != nil {
			st.Message = fmt.Sprintf("Operation cannot be fulfilled on %s %q: %v", groupResourceOf(oe.kind), oe.name, manifest.ErrConflict)
		}
	case errors.Is(err, deployment.ErrBeingDeleted), errors.Is(err, spaces.ErrInUse), errors.Is(err, errPrecondition):
		st.Code, st.Reason = http.StatusConflict, ReasonConflict
	case errors.Is(err, manifest.ErrAlreadyExists):
		st.Code, st.Reason = http.StatusConflict, ReasonAlreadyExists
		if oe != nil {
			st.Message = fmt.Sprintf("%s %q already exists", groupResourceOf(oe.kind), oe.name)
		}
	case errors.Is(err, errUnsupportedMediaType):
		st.Code, st.Reason = http.StatusUnsupportedMediaType, ReasonUnsupportedMediaType
	case len(manifest.FieldErrors(err)) > 0:
		st.Code, st.Reason = http.StatusUnprocessableEntity, ReasonInvalid
		if st.Details == nil {
			st.Details = &StatusDetails{Group: Group}
		}
		st.Details.Causes = causes(err)
	case errors.Is(err, context.DeadlineExceeded):
		st.Code, st.Reason = http.StatusGatewayTimeout, ReasonTimeout
	default:
		st.Code, st.Reason = http.StatusInternalServerError, ReasonInternalError
	}
	return st
}

// groupResourceOf is a kind's plural qualified by its group
// ("jumpstartmodels.inference.sagemaker.aws.amazon.com").
func groupResourceOf(kind string) string {
	if r, ok := ResourceForKind(kind); ok {
		return r.Plural + "." + Group
	}
	for _, r := range append(slices.Clone(WorkspaceResources), NodeResources...) {
		if r.Kind == kind {
			return r.Plural + "." + r.APIGroup
		}
	}
	return strings.ToLower(kind) + "." + groupOf(kind)
}

// groupOf is the API group of a kind.
func groupOf(kind string) string {
	for _, r := range append(slices.Clone(WorkspaceResources), NodeResources...) {
		if r.Kind == kind {
			return r.APIGroup
		}
	}
	return Group
}

// causes flattens validation errors into StatusCauses, keeping the document
// each came from when the error came from a multi-document body.
func causes(err error) []StatusCause {
	var out []StatusCause
	var walk func(e error, doc *manifest.DocumentError)
	walk = func(e error, doc *manifest.DocumentError) {
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			for _, c := range j.Unwrap() {
				walk(c, doc)
			}
			return
		}
		var de *manifest.DocumentError
		if doc == nil && errors.As(e, &de) {
			walk(de.Err, de)
			return
		}
		for _, fe := range manifest.FieldErrors(e) {
			c := StatusCause{Reason: "FieldValueInvalid", Message: fe.Message, Field: fe.Path}
			if doc != nil {
				c.Document = new(doc.Index)
				c.Line = doc.Line
				if doc.Kind != "" && doc.Name != "" {
					c.Object = doc.Kind + "/" + doc.Name
				}
			}
			out = append(out, c)
		}
	}
	walk(err, nil)
	return out
}
