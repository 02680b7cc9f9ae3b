package cli

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
)

// DefaultServer is where client subcommands look for `capstan serve` when neither
// --server nor CAPSTAN_SERVER says otherwise.
const DefaultServer = "http://127.0.0.1:8080"

// globalOptions are the flags every subcommand shares.
type globalOptions struct {
	server string
}

// serverURL resolves the server address: flag, then environment, then default.
func (g *globalOptions) serverURL() string {
	if g.server != "" {
		return g.server
	}
	if v := os.Getenv("CAPSTAN_SERVER"); v != "" {
		return v
	}
	return DefaultServer
}

// NewRootCommand returns the `capstan` command with every subcommand attached.
func NewRootCommand() *cobra.Command {
	g := &globalOptions{}
	root := &cobra.Command{
		Use:           "capstan",
		Short:         "Self-hosted GPU inference: reservations, endpoints, routing, autoscaling",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().StringVar(&g.server, "server", "", "capstan server URL (env CAPSTAN_SERVER, default "+DefaultServer+")")
	registerCommands(root, g)
	return root
}

// Execute runs the command line and maps the outcome to a process exit code.
func Execute(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := NewRootCommand()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return 1
	}
	return 0
}
