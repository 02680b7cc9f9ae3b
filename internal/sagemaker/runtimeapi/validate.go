package runtimeapi

import (
	"fmt"
	"net/http"
	"regexp"
	"unicode"
)

var (
	// Model patterns are applied as full matches (reference §2.5).
	endpointNameRE  = regexp.MustCompile(`^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$`)
	targetVariantRE = regexp.MustCompile(`^[a-zA-Z0-9](-*[a-zA-Z0-9])*$`)
)

// constraintError words a violation the way AWS validation errors do.
func constraintError(value, member, constraint string) error {
	return validationErrorf("1 validation error detected: Value '%s' at '%s' failed to satisfy constraint: %s",
		truncate(value, 256), member, constraint)
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] > unicode.MaxASCII {
			return false
		}
	}
	return true
}

// validInferenceID hand-translates `\A\S[\p{Print}]*\z` (RE2 has no \p{Print}).
func validInferenceID(s string) bool {
	for i, r := range s {
		if i == 0 && unicode.IsSpace(r) {
			return false
		}
		if !unicode.IsPrint(r) && r != ' ' {
			return false
		}
	}
	return s != ""
}

// headerRule validates one modelled request header.
type headerRule struct {
	header string
	member string
	check  func(string) error
}

func maxASCII(member string, n int) func(string) error {
	return func(v string) error {
		if len(v) > n {
			return constraintError(v, member, fmt.Sprintf("Member must have length less than or equal to %d", n))
		}
		if !isASCII(v) {
			return constraintError(v, member, `Member must satisfy regular expression pattern: \p{ASCII}*`)
		}
		return nil
	}
}

func checkTargetVariant(v string) error {
	if len(v) > 63 {
		return constraintError(v, "targetVariant", "Member must have length less than or equal to 63")
	}
	if !targetVariantRE.MatchString(v) {
		return constraintError(v, "targetVariant", "Member must satisfy regular expression pattern: ^[a-zA-Z0-9](-*[a-zA-Z0-9])*")
	}
	return nil
}

func checkInferenceID(v string) error {
	if len(v) > 64 {
		return constraintError(v, "inferenceId", "Member must have length less than or equal to 64")
	}
	if !validInferenceID(v) {
		return constraintError(v, "inferenceId", `Member must satisfy regular expression pattern: \A\S[\p{Print}]*\z`)
	}
	return nil
}

func requestRules(acceptHeader string) []headerRule {
	return []headerRule{
		{"Content-Type", "contentType", maxASCII("contentType", 1024)},
		{acceptHeader, "accept", maxASCII("accept", 1024)},
		{hdrCustomAttributes, "customAttributes", maxASCII("customAttributes", 1024)},
		{hdrTargetVariant, "targetVariant", checkTargetVariant},
		{hdrInferenceID, "inferenceId", checkInferenceID},
	}
}

// validateHeaders checks the modelled headers that are present.
func validateHeaders(h http.Header, acceptHeader string) error {
	for _, r := range requestRules(acceptHeader) {
		vs, ok := h[http.CanonicalHeaderKey(r.header)]
		if !ok {
			continue
		}
		if len(vs) > 1 {
			return validationErrorf("Header %s may be given only once.", r.header)
		}
		if err := r.check(vs[0]); err != nil {
			return err
		}
	}
	return nil
}

func validateEndpointName(name string) error {
	if len(name) > 63 {
		return constraintError(name, "endpointName", "Member must have length less than or equal to 63")
	}
	if !endpointNameRE.MatchString(name) {
		return constraintError(name, "endpointName", "Member must satisfy regular expression pattern: ^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}")
	}
	return nil
}
