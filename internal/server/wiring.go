package server

import (
	"log/slog"
	"net/http"

	"github.com/capstan-dev/capstan/internal/appautoscaling"
	"github.com/capstan-dev/capstan/internal/awsauth"
	"github.com/capstan-dev/capstan/internal/config"
	"github.com/capstan-dev/capstan/internal/gateway"
	"github.com/capstan-dev/capstan/internal/sagemaker"
	"github.com/capstan-dev/capstan/internal/sagemaker/runtimeapi"
)

// The SigV4 scope of each AWS API: the signing name the AWS SDKs and CLI use
// for it (aws-sdk-go-v2 signs SageMaker and SageMaker Runtime as "sagemaker",
// Application Auto Scaling as "application-autoscaling"), and the API's body
// limit and error code for a larger body.
var (
	sagemakerScope   = awsauth.Scope{Service: "sagemaker", MaxBodyBytes: sagemaker.DefaultMaxBodyBytes, TooLargeCode: sagemaker.CodeTooLarge}
	autoScalingScope = awsauth.Scope{Service: "application-autoscaling", MaxBodyBytes: appautoscaling.DefaultMaxBodyBytes,
		TooLargeCode: appautoscaling.CodeRequestTooLarge}
	// runtimeapi answers an oversized Body with ValidationError (413).
	runtimeScope = awsauth.Scope{Service: "sagemaker", MaxBodyBytes: runtimeapi.DefaultMaxBodyBytes, TooLargeCode: runtimeapi.CodeValidation}
)

// RuntimeAPI mounts the SageMaker runtime handler with the server's identity.
func RuntimeAPI(cfg config.Config) RuntimeAPIFactory {
	return func(gw *gateway.Gateway, log *slog.Logger) http.Handler {
		return runtimeapi.NewHandler(gw, runtimeapi.Options{AccountID: cfg.AccountID, Region: cfg.Region, Logger: log})
	}
}
