package server

import (
	"log/slog"

	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/config"
	"github.com/capstan-dev/capstan/internal/engines"
	"github.com/capstan-dev/capstan/internal/runtime"
	"github.com/capstan-dev/capstan/internal/runtime/local"
	"github.com/capstan-dev/capstan/internal/sandbox"
)

// LocalRuntime runs replicas as child processes on this host, each in sb:
// `bin engine sim` for the simulator, the installed engines' own servers
// for the rest; each logs to <data-dir>/replicas/<id>.log.
func LocalRuntime(bin string, installed engines.Machine, sb *sandbox.Sandbox) RuntimeFactory {
	return func(clk clock.Clock, log *slog.Logger, replicaDir string) (runtime.Runtime, error) {
		return local.New(local.Options{Binary: bin, LogDir: replicaDir, Host: "127.0.0.1", Clock: clk, Logger: log,
			Engines: installed, Sandbox: sb})
	}
}

// NewSandbox is the sandbox of cfg's spaces and replicas: it hides the data
// directory, configFile (the capstan.yaml read, if any) and the model
// caches, which hold the server's secrets and every other program's files.
func NewSandbox(cfg config.Config, configFile string, log *slog.Logger) (*sandbox.Sandbox, error) {
	return sandbox.New(sandbox.Options{Bubblewrap: cfg.Sandbox.Bubblewrap,
		AllowUnsandboxed: cfg.Sandbox.AllowProcessesToReadServerSecrets, Logger: log,
		Hide: []string{cfg.DataDir, configFile, cfg.ModelSources.CacheDir, cfg.ModelSources.FSxRoot}})
}
