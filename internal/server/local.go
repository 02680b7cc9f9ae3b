package server

import (
	"log/slog"

	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/engines"
	"github.com/capstan-dev/capstan/internal/runtime"
	"github.com/capstan-dev/capstan/internal/runtime/local"
)

// LocalRuntime runs replicas as child processes on this host: `bin engine
// sim` for the simulator, the installed engines' own servers for the rest;
// each logs to <data-dir>/replicas/<id>.log.
func LocalRuntime(bin string, installed engines.Machine) RuntimeFactory {
	return func(clk clock.Clock, log *slog.Logger, replicaDir string) (runtime.Runtime, error) {
		return local.New(local.Options{Binary: bin, LogDir: replicaDir, Host: "127.0.0.1", Clock: clk, Logger: log,
			Engines: installed})
	}
}
