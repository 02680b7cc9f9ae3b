// Package awsjson holds what capstan's AWS JSON 1.1 APIs (SageMaker and
// Application Auto Scaling) word identically, so that the CLI and SDK users
// see the same messages from both.
package awsjson

import (
	"fmt"
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
