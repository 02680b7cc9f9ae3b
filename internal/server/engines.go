package server

import (
	"log/slog"

	"github.com/capstan-dev/capstan/internal/engines"
)

// logEngines says at start which engine each image family runs here, so
// an engine the simulator stands in for is visible before any model asks.
func logEngines(log *slog.Logger, installed engines.Machine) {
	for _, a := range engines.All() {
		if a.Name == engines.Sim {
			continue
		}
		if bin, err := a.Resolve(installed[a.Name]); err == nil {
			log.Info("engine installed", "engine", a.Name, "binary", bin)
		} else if a.Format == engines.FormatGGUF {
			log.Info("engine not installed: its images are refused", "engine", a.Name, "set", "engines."+a.Name+".binary")
		} else {
			log.Info("engine not installed: the simulator stands in for its images", "engine", a.Name, "set", "engines."+a.Name+".binary")
		}
	}
}
