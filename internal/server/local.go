package server

import (
	"log/slog"

	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/runtime"
	"github.com/capstan-dev/capstan/internal/runtime/local"
)

// LocalRuntime runs replicas as `bin engine sim` child processes on this host,
// logging to <data-dir>/replicas/<id>.log.
func LocalRuntime(bin string) RuntimeFactory {
	return func(clk clock.Clock, log *slog.Logger, replicaDir string) (runtime.Runtime, error) {
		return local.New(local.Options{Binary: bin, LogDir: replicaDir, Host: "127.0.0.1", Clock: clk, Logger: log})
	}
}
