package endpoint

import (
	"errors"
	"fmt"
)

// ErrorKind classifies Service errors; the wire layer maps each kind to its
// protocol's code in one place.
type ErrorKind int

const (
	// KindNotFound: the named resource does not exist.
	ErrNotFound ErrorKind = iota + 1
	// ErrAlreadyExists: a create named an existing resource.
	ErrAlreadyExists
	// ErrInProgress: the endpoint is Creating/Updating/Deleting.
	ErrInProgress
	// ErrFailedState: the endpoint is Failed; only delete is allowed.
	ErrFailedState
	// ErrInvalid: the request is inconsistent with stored state.
	ErrInvalid
)

// Resource names used in errors, as SageMaker words them.
const (
	ResModel    = "model"
	ResConfig   = "endpoint configuration"
	ResEndpoint = "endpoint"
)

// Error is a typed Service error.
type Error struct {
	Kind     ErrorKind
	Resource string // ResModel, ResConfig or ResEndpoint
	Name     string
	Message  string // for ErrInvalid
	// Err is the cause, when there is a typed one (e.g. a
	// *serving.FieldError naming the policy field).
	Err error
}

func (e *Error) Unwrap() error { return e.Err }

func (e *Error) Error() string {
	switch e.Kind {
	case ErrNotFound:
		return fmt.Sprintf("%s %q not found", e.Resource, e.Name)
	case ErrAlreadyExists:
		return fmt.Sprintf("%s %q already exists", e.Resource, e.Name)
	case ErrInProgress:
		return fmt.Sprintf("%s %q is in progress", e.Resource, e.Name)
	case ErrFailedState:
		return fmt.Sprintf("%s %q is Failed", e.Resource, e.Name)
	default:
		return e.Message
	}
}

// AsError returns the *Error in err's chain, if any.
func AsError(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}

// IsNotFound reports whether err is a not-found Service error.
func IsNotFound(err error) bool {
	e, ok := AsError(err)
	return ok && e.Kind == ErrNotFound
}

func notFound(res, name string) error { return &Error{Kind: ErrNotFound, Resource: res, Name: name} }
func alreadyExists(res, name string) error {
	return &Error{Kind: ErrAlreadyExists, Resource: res, Name: name}
}
func invalidf(format string, a ...any) error {
	return &Error{Kind: ErrInvalid, Message: fmt.Sprintf(format, a...)}
}
