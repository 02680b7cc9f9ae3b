// Package catalog owns the static facts capstan reasons about: GPUs and their MIG
// profiles, model architectures, and ml.* instance types. The facts are data
// (YAML files embedded in the binary), not code; this package only loads,
// indexes and looks them up, with errors that list the valid names.
//
// It must not hold runtime state: fleets, bookings and prices in effect live in
// internal/capacity and the config.
package catalog
