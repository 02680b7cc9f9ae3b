// Package sigv4 verifies AWS Signature Version 4 on incoming requests, for both
// the SageMaker control API and the runtime API (both sign with service name
// "sagemaker"). It rebuilds the canonical request from the request's own
// SignedHeaders list, so it accepts what any AWS SDK or the aws CLI signs. It
// owns no credentials store beyond the map it is given, and knows nothing
// about the APIs it protects; rejections are written in the AWS JSON error
// shape by one function (writeError).
package sigv4
