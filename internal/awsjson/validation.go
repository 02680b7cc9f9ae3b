// Package awsjson holds the mechanics capstan's AWS JSON 1.1 APIs (SageMaker
// and Application Auto Scaling) share: dispatch by X-Amz-Target and the error
// envelope (Handler), request decoding, NextToken pagination (Paging) and
// AWS's validation messages (Violations), so that the CLI and SDK users see
// the same behaviour from both. Each API keeps its own operations and the
// mapping of its domain errors to its wire codes.
package awsjson

import (
	"fmt"
	"slices"
	"strings"
)

// NotNull is the constraint AWS names for a missing required member.
const NotNull = "Member must not be null"

// Violations collects failed constraints. Its message is AWS's
// "N validation error(s) detected: Value '…' at '…' failed to satisfy
// constraint: …" line; the APIs send it as a ValidationException.
type Violations struct{ v []violation }

type violation struct {
	value, path, constraint string
}

// Add records that value at path (the member's wire path, e.g.
// "productionVariants.1.member.instanceType") fails constraint.
func (e *Violations) Add(value any, path, constraint string) {
	e.v = append(e.v, violation{fmt.Sprint(value), path, constraint})
}

// Err is e when something was added, nil otherwise.
func (e *Violations) Err() error {
	if len(e.v) == 0 {
		return nil
	}
	return e
}

// Required records a missing member and says whether it is present.
func (e *Violations) Required(present bool, path string) bool {
	if !present {
		e.Add(nil, path, NotNull)
	}
	return present
}

// Length records a string shorter than lo or longer than hi bytes.
func (e *Violations) Length(v string, lo, hi int, path string) {
	if len(v) < lo {
		e.Add(v, path, fmt.Sprintf("Member must have length greater than or equal to %d", lo))
	} else if len(v) > hi {
		e.Add(v, path, fmt.Sprintf("Member must have length less than or equal to %d", hi))
	}
}

// ListLength records a list of n items shorter than lo or longer than hi.
func (e *Violations) ListLength(n, lo, hi int, path string) {
	if n < lo {
		e.Add(fmt.Sprintf("[%d items]", n), path, fmt.Sprintf("Member must have length greater than or equal to %d", lo))
	} else if n > hi {
		e.Add(fmt.Sprintf("[%d items]", n), path, fmt.Sprintf("Member must have length less than or equal to %d", hi))
	}
}

// IntRange records a present v outside [lo, hi].
func (e *Violations) IntRange(v *int, lo, hi int, path string) {
	if v == nil {
		return
	}
	if *v < lo {
		e.Add(*v, path, fmt.Sprintf("Member must have value greater than or equal to %d", lo))
	} else if *v > hi {
		e.Add(*v, path, fmt.Sprintf("Member must have value less than or equal to %d", hi))
	}
}

// Enum records a v that is none of allowed (the empty string included:
// callers skip members that are absent).
func (e *Violations) Enum(v, path string, allowed ...string) {
	if !slices.Contains(allowed, v) {
		e.Add(v, path, "Member must satisfy enum value set: ["+strings.Join(allowed, ", ")+"]")
	}
}

func (e *Violations) Error() string {
	parts := make([]string, len(e.v))
	for i, v := range e.v {
		if v.constraint == NotNull {
			parts[i] = fmt.Sprintf("Value null at '%s' failed to satisfy constraint: %s", v.path, v.constraint)
			continue
		}
		parts[i] = fmt.Sprintf("Value '%s' at '%s' failed to satisfy constraint: %s", v.value, v.path, v.constraint)
	}
	noun := "error"
	if len(parts) > 1 {
		noun = "errors"
	}
	return fmt.Sprintf("%d validation %s detected: %s", len(parts), noun, strings.Join(parts, "; "))
}
