package manifest

import (
	"errors"
	"fmt"
	"strings"
)

// FieldError is one problem at one field path, e.g.
// "spec.worker.resources.limits[nvidia.com/mig-4g.71gb]".
type FieldError struct {
	Path    string
	Message string
}

func (e *FieldError) Error() string {
	if e.Path == "" {
		return e.Message
	}
	return e.Path + ": " + e.Message
}

// ErrorList is every FieldError found in one object; it is the error type
// returned by Validate and (inside a DocumentError) by Decode.
type ErrorList []*FieldError

func (l ErrorList) Error() string {
	parts := make([]string, len(l))
	for i, e := range l {
		parts[i] = e.Error()
	}
	return strings.Join(parts, "; ")
}

// err returns nil for an empty list so callers can `return errs.err()`.
func (l ErrorList) err() error {
	if len(l) == 0 {
		return nil
	}
	return l
}

// DocumentError places an error in a multi-document file: Index is the
// 0-based document number, Kind and Name are filled when they were readable.
type DocumentError struct {
	Index int
	Line  int // first line of the document in the file; 0 when unknown
	Kind  string
	Name  string
	Err   error
}

func (e *DocumentError) Error() string {
	where := fmt.Sprintf("document %d", e.Index)
	if e.Line > 0 {
		where += fmt.Sprintf(" (line %d)", e.Line)
	}
	if e.Kind != "" && e.Name != "" {
		where += fmt.Sprintf(" %s/%s", e.Kind, e.Name)
	}
	return where + ": " + e.Err.Error()
}

func (e *DocumentError) Unwrap() error { return e.Err }

// FieldErrors extracts every FieldError from err (which may wrap an
// ErrorList, a FieldError or several DocumentErrors joined).
func FieldErrors(err error) []*FieldError {
	var out []*FieldError
	var walk func(error)
	walk = func(e error) {
		if e == nil {
			return
		}
		// errors.Join first: errors.As would stop at its first member.
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			for _, c := range j.Unwrap() {
				walk(c)
			}
			return
		}
		var l ErrorList
		if errors.As(e, &l) {
			out = append(out, l...)
			return
		}
		var fe *FieldError
		if errors.As(e, &fe) {
			out = append(out, fe)
		}
	}
	walk(err)
	return out
}

// path is a field path under construction.
type path string

func (p path) child(name string) path {
	if p == "" {
		return path(name)
	}
	return path(string(p) + "." + name)
}

func (p path) index(i int) path  { return path(fmt.Sprintf("%s[%d]", p, i)) }
func (p path) key(k string) path { return path(fmt.Sprintf("%s[%s]", p, k)) }
func (p path) String() string    { return string(p) }

// add appends a formatted FieldError.
func (l *ErrorList) add(p path, format string, args ...any) {
	*l = append(*l, &FieldError{Path: string(p), Message: fmt.Sprintf(format, args...)})
}
