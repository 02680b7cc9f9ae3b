package cli

import "github.com/spf13/cobra"

func newEngineCommand(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "engine",
		Short: "Run a model server (engine) in the foreground",
	}
	cmd.AddCommand(newEngineSimCommand(g))
	return cmd
}
