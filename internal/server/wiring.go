package server

import (
	"log/slog"
	"net/http"

	"github.com/capstan-dev/capstan/internal/config"
	"github.com/capstan-dev/capstan/internal/gateway"
	"github.com/capstan-dev/capstan/internal/sagemaker/runtimeapi"
)

// RuntimeAPI mounts the SageMaker runtime handler with the server's identity.
func RuntimeAPI(cfg config.Config) RuntimeAPIFactory {
	return func(gw *gateway.Gateway, log *slog.Logger) http.Handler {
		return runtimeapi.NewHandler(gw, runtimeapi.Options{AccountID: cfg.AccountID, Region: cfg.Region, Logger: log})
	}
}
