package endpoint

import (
	"fmt"
	"strings"

	"github.com/capstan-dev/capstan/internal/gateway"
)

// StrategyTag is the endpoint configuration tag whose value names the
// gateway routing strategy of every variant of the configuration (any
// registered one: kvaware, prefixaware, session, roundrobin, ...). A
// variant's own routing strategy can name only the two the configuration
// format enumerates, so the cache-aware ones need a setting outside it; when
// both are given the tag wins, since it is the more specific request.
const StrategyTag = "capstan:routing-strategy"

// StrategyError says a configuration's StrategyTag names no routing
// strategy. Known lists the accepted values.
type StrategyError struct {
	Value string
	Known []string
}

func (e *StrategyError) Error() string {
	return fmt.Sprintf("tag %s: routing strategy %q is not registered; known strategies: %s",
		StrategyTag, e.Value, strings.Join(e.Known, ", "))
}

// checkStrategyTag rejects a StrategyTag that names no registered strategy.
func checkStrategyTag(tags []Tag) error {
	for _, t := range tags {
		if t.Key == StrategyTag && !gateway.IsStrategy(t.Value) {
			se := &StrategyError{Value: t.Value, Known: gateway.Strategies()}
			return &Error{Kind: ErrInvalid, Message: se.Error(), Err: se}
		}
	}
	return nil
}

// taggedStrategy is the StrategyTag's value ("" without one; the first when
// repeated).
func taggedStrategy(tags []Tag) string {
	for _, t := range tags {
		if t.Key == StrategyTag {
			return t.Value
		}
	}
	return ""
}
