package cli

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/capstan-dev/capstan/internal/catalog"
	"github.com/capstan-dev/capstan/internal/config"
	"github.com/capstan-dev/capstan/internal/server"
)

type serveOptions struct {
	configPath        string
	listen            string
	dataDir           string
	accountID         string
	region            string
	devClock          bool
	engineTimeScale   float64
	insecureListenAny bool
	logLevel          string
	s3Endpoint        string
}

func newServeCommand(_ *globalOptions) *cobra.Command {
	o := &serveOptions{}
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the control API, runtime API, controllers and local replicas in one process",
		Long: `serve runs capstan in embedded mode: the SageMaker control API (POST / with
X-Amz-Target), the SageMaker runtime API (/endpoints/{name}/invocations), the
endpoint controller, local engine replicas, the OpenAI API (/v1/...), manifests
(/apis/..., used by capstan apply/get/describe/delete) with their deployment
controller and autoscaler, Application Auto Scaling, /metrics and /healthz, with
state in --data-dir. Flags override capstan.yaml (--config).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.Load(o.configPath)
			if err != nil {
				return err
			}
			f := cmd.Flags()
			if f.Changed("listen") || cfg.Listen == "" {
				cfg.Listen = o.listen
			}
			if f.Changed("data-dir") || cfg.DataDir == "" {
				cfg.DataDir = o.dataDir
			}
			if f.Changed("account-id") {
				cfg.AccountID = o.accountID
			}
			if f.Changed("region") {
				cfg.Region = o.region
			}
			if f.Changed("dev-clock") {
				cfg.DevClock = o.devClock
			}
			if f.Changed("engine-time-scale") {
				cfg.Engine.TimeScale = o.engineTimeScale
			}
			if f.Changed("insecure-listen-any") {
				cfg.InsecureListenAny = o.insecureListenAny
			}
			if f.Changed("s3-endpoint") {
				cfg.ModelSources.S3.Endpoint = o.s3Endpoint
			}
			cfg.Default()
			if err := cfg.Validate(catalog.Default()); err != nil {
				return err
			}
			var level slog.Level
			if err := level.UnmarshalText([]byte(o.logLevel)); err != nil {
				return fmt.Errorf("--log-level: %w", err)
			}
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level}))
			bin := cfg.Engine.Binary
			if bin == "" {
				if bin, err = os.Executable(); err != nil {
					return fmt.Errorf("find the capstan binary for replicas: %w", err)
				}
			}
			sb, err := server.NewSandbox(cfg, o.configPath, log)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			srv, err := server.Start(ctx, server.Options{Config: cfg, Logger: log, Stdout: cmd.OutOrStdout(), Sandbox: sb,
				Runtime: server.LocalRuntime(bin, cfg.Engines, sb), RuntimeAPI: server.RuntimeAPI(cfg)})
			if err != nil {
				return err
			}
			<-ctx.Done()
			srv.Stop(context.Background())
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.configPath, "config", "", "capstan.yaml to read (flags override it)")
	f.StringVar(&o.listen, "listen", "127.0.0.1:8080", "address to serve on (127.0.0.1:0 picks a free port)")
	f.StringVar(&o.dataDir, "data-dir", "./capstan-data", "directory for the store and replica logs")
	f.StringVar(&o.accountID, "account-id", "000000000000", "account id used in ARNs")
	f.StringVar(&o.region, "region", "us-east-1", "region used in ARNs")
	f.BoolVar(&o.devClock, "dev-clock", false, "enable POST /_capstan/clock to move the server's clock forward")
	f.Float64Var(&o.engineTimeScale, "engine-time-scale", 1, "time scale passed to simulated engines (0.01 = 100x faster)")
	f.BoolVar(&o.insecureListenAny, "insecure-listen-any", false, "allow a non-loopback --listen without credentials, apiKeys or adminTokens")
	f.StringVar(&o.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	f.StringVar(&o.s3Endpoint, "s3-endpoint", "", "S3-compatible endpoint URL for s3 model sources (modelSources.s3.endpoint); credentials from the AWS environment")
	return cmd
}
