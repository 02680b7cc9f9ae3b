// Package awsauth verifies AWS Signature Version 4 on incoming requests for the
// AWS APIs capstan serves (SageMaker, SageMaker Runtime, Application Auto
// Scaling). It rebuilds the canonical request from the request's own
// SignedHeaders list, so it accepts what any AWS SDK or the aws CLI signs, and
// it hashes the body itself: the payload is always part of what is verified.
// Everything the headers allow is checked before the body is read (key,
// credential scope, clock skew, body size), and the body is read once,
// bounded by the addressed API's limit, and handed on without a copy
// (ReadBody). It owns no credentials store beyond the map it is given and
// knows of the APIs only the Scope each is mounted with; refusals are written
// by the Verifier's Refuse, or without one in the AWS JSON error shape by one
// function (writeError).
package awsauth
