package cli

import (
	"errors"

	"github.com/spf13/cobra"
)

// Placeholder until the owning package lands; replaced wholesale by its author.
func newEngineSimCommand(_ *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:    "sim",
		Hidden: true,
		RunE:   func(*cobra.Command, []string) error { return errors.New("sim: not implemented yet") },
	}
}
