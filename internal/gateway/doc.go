// Package gateway owns the inference data path: per-endpoint routes (variants
// and their replica backends), variant choice by weight, backend choice by a
// pluggable routing policy (filters + scorers, Gateway API Inference
// Extension style), proxying with bounded retries, in-flight accounting and
// draining, and the Prometheus metrics for all of it.
//
// Protocol edges (SageMaker Runtime, OpenAI) sit on top: they call Invoke and
// map its typed errors to their own wire errors.
package gateway
