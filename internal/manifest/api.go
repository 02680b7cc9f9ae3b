package manifest

import (
	"errors"
	"time"
)

// ErrNotFound is returned by manifest stores for an object that does not
// exist; the HTTP API maps it to a Kubernetes NotFound status.
var ErrNotFound = errors.New("not found")

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
