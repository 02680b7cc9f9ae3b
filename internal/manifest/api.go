package manifest

import (
	"errors"
	"time"
)

// ErrNotFound is returned by manifest stores for an object that does not
// exist; the HTTP API maps it to a Kubernetes NotFound status.
var ErrNotFound = errors.New("not found")

// Preconditions narrow an apply the way Kubernetes' create and update
// verbs do; the zero value is capstan's declarative apply.
type Preconditions struct {
	// Create: the object must not exist yet (POST to a collection).
	Create bool
	// ResourceVersion, when set, must be the stored object's: an update
	// computed from an older read is refused (PATCH, PUT of a read object).
	ResourceVersion string
}

// Errors of an apply whose preconditions fail.
var (
	ErrAlreadyExists = errors.New("already exists")
	ErrConflict      = errors.New("the object has been modified; apply your changes to the latest version and try again")
)

// Apply actions, as kubectl prints them.
const (
	ActionCreated    = "created"
	ActionConfigured = "configured"
	ActionUnchanged  = "unchanged"
)

// ApplyResult says what applying one object did.
type ApplyResult struct {
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace"`
	Name       string `json:"name"`
	Action     string `json:"action"`
	Generation int64  `json:"generation"`
	// Warnings name the object's fields that are accepted but have no
	// effect here (IgnoredFields), one line each.
	Warnings []string `json:"warnings,omitempty"`
}

// Event types.
const (
	EventNormal  = "Normal"
	EventWarning = "Warning"
)

// Event is one thing that happened to an object (a rollout step, a scaling
// decision with its inputs, a failure), shown by `capstan describe`.
type Event struct {
	Time    time.Time `json:"time"`
	Type    string    `json:"type"`
	Reason  string    `json:"reason"`
	Message string    `json:"message"`
}
