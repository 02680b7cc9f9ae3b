package cli

import "github.com/spf13/cobra"

// registerCommands attaches every subcommand. It is the one explicit list of
// what the binary can do; each constructor lives in its own file.
func registerCommands(root *cobra.Command, g *globalOptions) {
	root.AddCommand(
		newServeCommand(g),
		newEngineCommand(g),
		newBenchCommand(g),
		newClockCommand(g),
		newGatewayCommand(g),
		newApplyCommand(g),
		newGetCommand(g),
		newDescribeCommand(g),
		newDeleteCommand(g),
		newNodeCommand(g),
		newObservabilityCommand(g),
		newTopCommand(g),
		newOperatorCommand(g),
		newKubeconfigCommand(g),
		newVersionCommand(),
	)
}
