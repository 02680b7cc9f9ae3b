package server

import (
	"net/http"

	"github.com/capstan-dev/capstan/internal/awsauth"
	"github.com/capstan-dev/capstan/internal/cloudwatch"
)

// cloudwatchScope: the AWS SDKs and CLI sign CloudWatch as "monitoring".
var cloudwatchScope = awsauth.Scope{Service: "monitoring", MaxBodyBytes: cloudwatch.DefaultMaxBodyBytes, TooLargeCode: cloudwatch.CodeTooLarge}

// cloudwatchDispatch sends the root's requests that routes.classify made
// doorCloudWatch's (smithy-rpc-v2-cbor's path, awsJson1_0's
// GraniteServiceVersion20100801 target, a query-protocol form) to cw and
// everything else to the AWS JSON 1.1 APIs.
func cloudwatchDispatch(cw, rest http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if doorOf(r) == doorCloudWatch {
			cw.ServeHTTP(w, r)
			return
		}
		rest.ServeHTTP(w, r)
	})
}
