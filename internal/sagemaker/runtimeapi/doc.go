// Package runtimeapi owns the SageMaker Runtime protocol edge (restJson1):
// InvokeEndpoint and InvokeEndpointWithResponseStream over HTTP, request
// header validation, forwarding through the gateway, AWS event-stream framing
// for streamed responses, and the mapping of every error to the runtime's
// wire errors (X-Amzn-ErrorType header + JSON body), done in toWire only.
//
// For InvokeEndpointWithResponseStream the handler asks the engine to stream:
// when the request body is a JSON object without a "stream" member it inserts
// "stream":true (an explicit "stream" value from the client is left alone).
package runtimeapi
