package testutil

import (
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
)

// AWSRetryer is the retry policy of the AWS SDK clients in tests: an error
// the server answered (a throttle, a 5xx, a validation error) reaches the test
// on the first attempt, as with RetryMaxAttempts 1; a request lost to the
// connection under it is sent again at once, up to twice. The SDK classes
// "use of closed network connection" with a reset connection: on a loaded
// machine Go's transport can close a kept-alive connection while the
// response body is read (aws/aws-sdk-go-v2#2737), which fails a test on what
// the server got right. Use it as aws.Config.Retryer, or call it for an
// Options.Retryer.
func AWSRetryer() aws.Retryer {
	return retry.NewStandard(func(o *retry.StandardOptions) {
		o.MaxAttempts = 3
		o.Retryables = []retry.IsErrorRetryable{retry.RetryableConnectionError{}}
		o.RateLimiter = ratelimit.None
		o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 0, nil })
	})
}
