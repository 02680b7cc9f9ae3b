// Package openai is the OpenAI-compatible front door of the gateway:
// /v1/chat/completions, /v1/completions (streamed or not) and /v1/models.
// The request's "model" names the endpoint; the body goes, with the model
// field cut out (engines may serve under another name), through the same
// gateway.Invoke as SageMaker invocations. Streams pass through chunk by
// chunk. It owns the OpenAI wire errors and nothing of routing.
package openai
