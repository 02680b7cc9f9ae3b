package sagemaker

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/capstan-dev/capstan/internal/awsjson"
)

// Patterns from the SageMaker model (applied as full matches, reported with ^).
var (
	patModelName    = regexp.MustCompile(`^[a-zA-Z0-9]([\-a-zA-Z0-9]*[a-zA-Z0-9])?$`)
	patResourceName = regexp.MustCompile(`^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$`)
	patNameContains = regexp.MustCompile(`^[a-zA-Z0-9-]+$`)
	patReservation  = regexp.MustCompile(`^arn:aws[a-z\-]*:sagemaker:[a-z0-9\-]*:[0-9]{12}:[a-z0-9\-]{1,14}/.*$`)
)

const (
	patModelNameText    = `^[a-zA-Z0-9]([\-a-zA-Z0-9]*[a-zA-Z0-9])?`
	patResourceNameText = `^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}`
	patNameContainsText = `^[a-zA-Z0-9-]+`
)

func (e *validationError) required(present bool, path string) bool {
	if !present {
		e.Add(nil, path, awsjson.NotNull)
	}
	return present
}

// name checks a required name against length and pattern.
func (e *validationError) name(v *string, path string, pat *regexp.Regexp, patText string) {
	if !e.required(v != nil, path) {
		return
	}
	switch {
	case len(*v) > 63:
		e.Add(*v, path, "Member must have length less than or equal to 63")
	case !pat.MatchString(*v):
		e.Add(*v, path, "Member must satisfy regular expression pattern: "+patText)
	}
}

func (e *validationError) maxLen(v string, n int, path string) {
	if len(v) > n {
		e.Add(v, path, fmt.Sprintf("Member must have length less than or equal to %d", n))
	}
}

func (e *validationError) minInt(v *int, n int, path string) {
	if v != nil && *v < n {
		e.Add(*v, path, fmt.Sprintf("Member must have value greater than or equal to %d", n))
	}
}

func (e *validationError) maxInt(v *int, n int, path string) {
	if v != nil && *v > n {
		e.Add(*v, path, fmt.Sprintf("Member must have value less than or equal to %d", n))
	}
}

func (e *validationError) minFloat(v *float64, n float64, path string) {
	if v != nil && *v < n {
		e.Add(*v, path, fmt.Sprintf("Member must have value greater than or equal to %v", n))
	}
}

func (e *validationError) enum(v string, path string, allowed ...string) {
	if v == "" {
		return
	}
	for _, a := range allowed {
		if v == a {
			return
		}
	}
	e.Add(v, path, "Member must satisfy enum value set: ["+strings.Join(allowed, ", ")+"]")
}

func (e *validationError) listLen(n, lo, hi int, path string) {
	if n < lo {
		e.Add(fmt.Sprintf("[%d items]", n), path, fmt.Sprintf("Member must have length greater than or equal to %d", lo))
	}
	if n > hi {
		e.Add(fmt.Sprintf("[%d items]", n), path, fmt.Sprintf("Member must have length less than or equal to %d", hi))
	}
}
