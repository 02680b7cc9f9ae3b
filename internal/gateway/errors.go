package gateway

import (
	"errors"
	"fmt"
	"time"
)

var (
	// ErrUnknownEndpoint: no route for the endpoint.
	ErrUnknownEndpoint = errors.New("unknown endpoint")
	// ErrUnknownVariant: the invocation's TargetVariant is not in the route.
	ErrUnknownVariant = errors.New("unknown variant")
	// ErrNoBackend: the route exists but no backend can serve (no backends,
	// zero weight everywhere, or every backend refused the connection).
	ErrNoBackend = errors.New("no backend available")
)

// UnavailableExpired is the Route.Unavailable reason of an endpoint whose
// capacity reservation ended: its replicas are gone until it is updated.
const UnavailableExpired = "capacity reservation expired"

// UnavailableError is returned for every invocation of a route whose
// Unavailable reason is set; each protocol edge words the reason its way.
type UnavailableError struct{ Reason string }

func (e *UnavailableError) Error() string { return "endpoint unavailable: " + e.Reason }

// IsUnavailable reports whether err is (or wraps) an *UnavailableError.
func IsUnavailable(err error) bool {
	var u *UnavailableError
	return errors.As(err, &u)
}

func noBackendf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrNoBackend, fmt.Sprintf(format, args...))
}

// QueueFullError: the endpoint's concurrency limit and queue are both full;
// protocol edges answer 429 with a Retry-After of RetryAfter.
type QueueFullError struct {
	Endpoint   string
	RetryAfter time.Duration
}

func (e *QueueFullError) Error() string {
	return "endpoint " + e.Endpoint + ": too many requests queued"
}

// IsQueueFull reports whether err is (or wraps) a *QueueFullError.
func IsQueueFull(err error) bool {
	var q *QueueFullError
	return errors.As(err, &q)
}
