// Package sagemaker owns the SageMaker control API wire protocol (AWS JSON 1.1):
// POST / with X-Amz-Target: SageMaker.<Op>, request and response shapes, input
// validation in SageMaker's "1 validation error detected" wording, ARNs,
// epoch-second timestamps, pagination, and the one function that maps errors to
// wire errors (writeError). It translates to and from package endpoint's types
// and holds no state of its own; the training-plan operations (ops_plans.go)
// call package capacity. The runtime API lives in runtimeapi/, request
// signing in sigv4/.
package sagemaker
