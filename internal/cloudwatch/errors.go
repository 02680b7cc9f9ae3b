package cloudwatch

import (
	"errors"
	"fmt"
	"net/http"
)

// Error is an error in CloudWatch's terms: the HTTP status, the query
// protocol's error code (also sent as x-amzn-query-error by the JSON and
// CBOR protocols, which are awsQueryCompatible), the error shape's name
// (__type in JSON and CBOR), the fault and the message.
type Error struct {
	Status  int
	Code    string // InvalidParameterValue
	Shape   string // InvalidParameterValueException
	Sender  bool   // Sender fault (else Receiver)
	Message string
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// The error codes CloudWatch answers these operations with.
const (
	CodeInvalidParameterValue       = "InvalidParameterValue"
	CodeInvalidParameterCombination = "InvalidParameterCombination"
	CodeMissingParameter            = "MissingParameter"
	CodeInvalidNextToken            = "InvalidNextToken"
	CodeInternal                    = "InternalServiceError"
	// CodeTooLarge answers a body over MaxBodyBytes.
	CodeTooLarge = "RequestEntityTooLarge"
	// Protocol-level codes: an unknown operation, an unreadable body.
	CodeInvalidAction = "InvalidAction"
	CodeSerialization = "SerializationException"
)

func errorf(status int, code, shape string, format string, a ...any) *Error {
	return &Error{Status: status, Code: code, Shape: shape, Sender: status < 500, Message: fmt.Sprintf(format, a...)}
}

// invalidValue is InvalidParameterValue.
func invalidValue(format string, a ...any) *Error {
	return errorf(http.StatusBadRequest, CodeInvalidParameterValue, "InvalidParameterValueException", format, a...)
}

// invalidCombination is InvalidParameterCombination.
func invalidCombination(format string, a ...any) *Error {
	return errorf(http.StatusBadRequest, CodeInvalidParameterCombination, "InvalidParameterCombinationException", format, a...)
}

// missing is MissingParameter for the parameter at path.
func missing(path string) *Error {
	return errorf(http.StatusBadRequest, CodeMissingParameter, "MissingRequiredParameterException", "The parameter %s is required.", path)
}

func invalidNextToken() *Error {
	return errorf(http.StatusBadRequest, CodeInvalidNextToken, "InvalidNextToken", "The NextToken is not valid for this request.")
}

// constraint is the model-constraint message AWS services use.
func constraint(value, path, rule string) *Error {
	return invalidValue("1 validation error detected: Value '%s' at '%s' failed to satisfy constraint: %s", value, path, rule)
}

func serialization(format string, a ...any) *Error {
	return errorf(http.StatusBadRequest, CodeSerialization, "SerializationException", format, a...)
}

func unknownOperation(status int, op string) *Error {
	return errorf(status, CodeInvalidAction, "UnknownOperationException",
		"The action %s is not valid for this web service: capstan's CloudWatch serves GetMetricStatistics, GetMetricData and ListMetrics.", truncate(op))
}

// toWire maps any error to an *Error: its own, a body over the limit, else
// an internal error (the caller logs the cause).
func toWire(err error) *Error {
	var we *Error
	if errors.As(err, &we) {
		return we
	}
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return errorf(http.StatusRequestEntityTooLarge, CodeTooLarge, "RequestEntityTooLargeException",
			"Request body is larger than the limit of %d bytes.", mbe.Limit)
	}
	return errorf(http.StatusInternalServerError, CodeInternal, "InternalServiceFault", "An internal error occurred.")
}

// fault is the query protocol's fault word.
func (e *Error) fault() string {
	if e.Sender {
		return "Sender"
	}
	return "Receiver"
}

// messageMember is the shape's message member: InternalServiceFault has
// Message, the others message.
func (e *Error) messageMember() string {
	if e.Shape == "InternalServiceFault" {
		return "Message"
	}
	return "message"
}
