// Command capstan is the single binary: control plane, gateway, engines and tools.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/capstan-dev/capstan/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Execute(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
