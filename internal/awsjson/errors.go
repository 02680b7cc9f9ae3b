package awsjson

import (
	"fmt"
	"net/http"
)

// Codes both APIs answer with (AWS's protocol-level exceptions).
const (
	CodeValidation       = "ValidationException"
	CodeUnknownOperation = "UnknownOperationException"
	CodeSerialization    = "SerializationException"
)

// Error is an error already in a protocol's wire terms: the HTTP status, the
// __type code and the message a client sees.
type Error struct {
	Status  int
	Code    string
	Message string
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Errorf is an Error with a formatted message.
func Errorf(status int, code, format string, a ...any) *Error {
	return &Error{Status: status, Code: code, Message: fmt.Sprintf(format, a...)}
}

// Validationf is a 400 ValidationException: what a service checks past its
// model's constraints (those go through Violations).
func Validationf(format string, a ...any) *Error {
	return Errorf(http.StatusBadRequest, CodeValidation, format, a...)
}
