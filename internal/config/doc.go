// Package config owns capstan.yaml: the server's settings decoded strictly
// (unknown fields are errors), then defaulted, then validated with errors that
// name the field. Flags are applied on top by the CLI before Validate. It does
// not start anything.
package config
