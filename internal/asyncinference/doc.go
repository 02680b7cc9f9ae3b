// Package asyncinference runs SageMaker asynchronous inference
// (InvokeEndpointAsync) for endpoints whose endpoint config has an
// AsyncInferenceConfig.
//
// Submit accepts a request (an S3 input location plus headers), stores it in
// the embedded store (so a restart does not lose accepted work) and queues it
// on its endpoint's bounded queue. Run's dispatcher hands queued requests to
// workers, at most MaxConcurrentInvocationsPerInstance per instance of the
// endpoint (one while it has none). A worker reads the input object from S3,
// invokes the endpoint through the gateway (the same path, routing and
// metrics as InvokeEndpoint), and writes the model's answer to
// <S3OutputPath>/<InferenceId>.out, or a failure (model error, missing or
// oversized input, expired RequestTTLSeconds, timeout) to
// <S3FailurePath>/<InferenceId>-error.out (to the output path when the config
// has no S3FailurePath). A model error is final at its first try unless its
// status says the replica was unavailable or busy (408, 429, 502, 503, 504;
// retryStatus): the same body would be refused again. A request that meets
// an endpoint with no instance, an unreachable replica or such a status waits
// in the queue and is tried again until its TTL; no instance also wakes the
// endpoint (Options.Wake, then the gateway's activator). Input bodies held in
// memory are bounded by Options.MaxHeldInputBytes across endpoints.
//
// The backlog (queued plus in-process requests) is exported as
// capstan_async_backlog{endpoint}; Backlog reads it for autoscaling
// (ApproximateBacklogSize / ApproximateBacklogSizePerInstance).
//
// The package knows nothing of wire shapes beyond the stored
// AsyncInferenceConfig JSON (SageMaker's own shape); the runtime API maps its
// errors to the wire.
package asyncinference
