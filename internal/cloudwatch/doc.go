// Package cloudwatch serves the CloudWatch metrics API — GetMetricStatistics,
// GetMetricData and ListMetrics — over the series of package metricstore,
// in every protocol current AWS clients use for CloudWatch: smithy-rpc-v2-cbor
// (the aws CLI, boto3 and aws-sdk-go-v2 today), awsJson1_0 and the query
// protocol (older clients).
//
// Each protocol decodes a request once into this package's own input types
// (types.go), the Service validates it with CloudWatch's rules and error
// codes and answers from the store, and each protocol maps the output and
// errors to its wire shapes in one place (cbor.go, json.go, query.go).
//
// Metric math (Expression queries of GetMetricData) is not supported: such a
// query is answered with InvalidParameterValue.
package cloudwatch
