package sagemaker

import (
	"fmt"
	"regexp"
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

// name checks a required name against length and pattern.
func (e *validationError) name(v *string, path string, pat *regexp.Regexp, patText string) {
	if !e.Required(v != nil, path) {
		return
	}
	switch {
	case len(*v) > 63:
		e.Add(*v, path, "Member must have length less than or equal to 63")
	case !pat.MatchString(*v):
		e.Add(*v, path, "Member must satisfy regular expression pattern: "+patText)
	}
}

// maxLen records a string longer than n bytes.
func (e *validationError) maxLen(v string, n int, path string) { e.Length(v, 0, n, path) }

func (e *validationError) minFloat(v *float64, n float64, path string) {
	if v != nil && *v < n {
		e.Add(*v, path, fmt.Sprintf("Member must have value greater than or equal to %v", n))
	}
}

// enum records a non-empty v that is none of allowed (absent members are
// empty strings here).
func (e *validationError) enum(v string, path string, allowed ...string) {
	if v != "" {
		e.Enum(v, path, allowed...)
	}
}

// listLen records a list of n items shorter than lo or longer than hi.
func (e *validationError) listLen(n, lo, hi int, path string) { e.ListLength(n, lo, hi, path) }
