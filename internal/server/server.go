package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/capstan-dev/capstan/internal/alarm"
	"github.com/capstan-dev/capstan/internal/appautoscaling"
	"github.com/capstan-dev/capstan/internal/awsauth"
	"github.com/capstan-dev/capstan/internal/capacity"
	"github.com/capstan-dev/capstan/internal/catalog"
	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/cloudwatch"
	"github.com/capstan-dev/capstan/internal/config"
	"github.com/capstan-dev/capstan/internal/console"
	"github.com/capstan-dev/capstan/internal/dashboards"
	"github.com/capstan-dev/capstan/internal/deployment"
	"github.com/capstan-dev/capstan/internal/endpoint"
	"github.com/capstan-dev/capstan/internal/gateway"
	"github.com/capstan-dev/capstan/internal/gateway/openai"
	"github.com/capstan-dev/capstan/internal/kubeapi"
	"github.com/capstan-dev/capstan/internal/manifestapi"
	"github.com/capstan-dev/capstan/internal/metricstore"
	"github.com/capstan-dev/capstan/internal/nodeapi"
	"github.com/capstan-dev/capstan/internal/observability"
	"github.com/capstan-dev/capstan/internal/promdb"
	"github.com/capstan-dev/capstan/internal/runtime"
	"github.com/capstan-dev/capstan/internal/sagemaker"
	"github.com/capstan-dev/capstan/internal/sagemaker/runtimeapi"
	"github.com/capstan-dev/capstan/internal/sandbox"
	"github.com/capstan-dev/capstan/internal/serving"
	"github.com/capstan-dev/capstan/internal/spaceproxy"
	"github.com/capstan-dev/capstan/internal/store"
	"github.com/capstan-dev/capstan/internal/tagging"
	"github.com/capstan-dev/capstan/internal/workspace"
)

// RuntimeFactory builds the replica runtime once the server knows its clock,
// logger and data dir.
type RuntimeFactory func(clk clock.Clock, log *slog.Logger, replicaDir string) (runtime.Runtime, error)

// RuntimeAPIFactory builds the SageMaker runtime API handler over the gateway.
type RuntimeAPIFactory func(gw *gateway.Gateway, log *slog.Logger) http.Handler

// Options are everything Run needs besides the config.
type Options struct {
	Config     config.Config // defaulted and validated by the caller
	Logger     *slog.Logger
	Stdout     io.Writer // receives the "capstan serving on" line
	Runtime    RuntimeFactory
	RuntimeAPI RuntimeAPIFactory // nil: /endpoints/ answers 404
	// Resync overrides the controller's resync period (tests).
	Resync time.Duration
	// Sandbox confines spaces (and, through Runtime, replicas); nil: one
	// made from Config by NewSandbox.
	Sandbox *sandbox.Sandbox
}

// Server is a running capstan serve.
type Server struct {
	Addr        string
	Clock       clock.Clock
	Gateway     *gateway.Gateway
	Service     *endpoint.Service
	Deployments *deployment.Service
	// MetricStore holds the CloudWatch-style metrics the gateway records.
	MetricStore *metricstore.Store

	cfg    config.Config
	log    *slog.Logger
	store  *store.Store
	rt     runtime.Runtime
	reg    *prometheus.Registry
	http   *http.Server
	ln     net.Listener
	cancel context.CancelFunc
	loops  sync.WaitGroup // the controllers' Run loops
	once   sync.Once
}

// Start opens the store, starts the runtime, controller and listener, prints
// the serving line and returns. Stop (or ctx's end) shuts everything down.
func Start(ctx context.Context, o Options) (*Server, error) {
	cfg := o.Config
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	cat := catalog.Default()
	sb := o.Sandbox
	if sb == nil {
		var err error
		if sb, err = NewSandbox(cfg, "", log); err != nil {
			return nil, err
		}
	}
	st, err := store.Open(filepath.Join(cfg.DataDir, "capstan.db"), 5*time.Second)
	if err != nil {
		return nil, err
	}
	clk, err := openClock(st, cfg.DevClock)
	if err != nil {
		st.Close()
		return nil, err
	}
	// Before anything can delete a resource: its tags go with it.
	tags := tagging.New(st, tagging.Options{Region: cfg.Region, AccountID: cfg.AccountID, Resolvers: tagging.Resolvers()})
	rt, err := o.Runtime(clk, log, filepath.Join(cfg.DataDir, "replicas"))
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("runtime: %w", err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// The one store of CloudWatch-style metrics: the gateway records into
	// it; the CloudWatch API, cloudWatchTrigger and Application Auto Scaling
	// read it.
	cw := metricstore.New(clk, metricstore.Options{})
	gw := gateway.New(gateway.Options{Clock: clk, Logger: log, Registerer: reg, MetricStore: cw})
	// One calendar for on-demand endpoints and training plans (issue 3).
	fl, err := capacity.New(st, cat, clk, cfg.FleetCapacity(cat))
	if err != nil {
		_ = rt.Close(context.Background())
		st.Close()
		return nil, err
	}
	svc := endpoint.NewService(st, fl, cat, clk, log)
	svc.SetReservations(fl)
	svc.SetEngines(cfg.Engines)
	logEngines(log, cfg.Engines)
	models, err := newModelSource(cfg, cat, clk, log)
	if err != nil {
		_ = rt.Close(context.Background())
		st.Close()
		return nil, fmt.Errorf("model sources: %w", err)
	}
	svc.SetModelSource(models, 0)
	costs := capacity.NewCollector(fl)
	reg.MustRegister(newStatusCollector(svc), costs)
	args := append([]string{fmt.Sprintf("--time-scale=%g", cfg.Engine.TimeScale)}, cfg.Engine.Args...)
	// One serving engine runs the replicas of both doors.
	eng := serving.New(serving.Options{Runtime: rt, Router: gw, Logger: log, EngineArgs: args,
		DrainTimeout: cfg.Endpoints.DrainTimeout.Duration})
	alarms, err := alarm.NewEvaluator(reg, cfg.Alarms)
	if err != nil {
		_ = rt.Close(context.Background())
		st.Close()
		return nil, err
	}
	svc.SetAlarms(alarmsAdapter{alarms})
	ctrl := endpoint.NewController(st, fl, eng, clk, log, endpoint.Options{
		StartTimeout: cfg.Endpoints.StartTimeout.Duration, Resync: o.Resync, Reservations: fl, Alarms: alarmsAdapter{alarms},
		Load: gw, Costs: costs, Registerer: reg, ServerlessIdleTimeout: cfg.Endpoints.ServerlessIdleTimeout.Duration})
	// Routes exist before the listener opens: after a restart, requests to
	// an endpoint wait for its replicas instead of failing as unknown.
	if err := ctrl.Prime(); err != nil {
		_ = rt.Close(context.Background())
		st.Close()
		return nil, err
	}

	// Listen first: deployments publish their endpoint URL in status.
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		_ = rt.Close(context.Background())
		st.Close()
		return nil, fmt.Errorf("listen %s: %w", cfg.Listen, err)
	}
	fail := func(err error) (*Server, error) {
		ln.Close()
		_ = rt.Close(context.Background())
		st.Close()
		return nil, err
	}
	// The clusters' nodes are in the pool before deployments place on it.
	cls, err := newClusters(ctx, cfg, st, fl, cat, clk, log, reg, o.Resync)
	if err != nil {
		return fail(fmt.Errorf("clusters: %w", err))
	}
	dep, err := newDeployments(deploymentDeps{cfg: cfg, store: st, clock: clk, log: log, reg: reg, eng: eng, gw: gw,
		endpoints: svc, cat: cat, models: models, gatewayURL: "http://" + ln.Addr().String(), pool: cls.pool, nodeEvents: cls.svc,
		provisioned: cls.provisioned, tieredStorage: cls.tieredStorage, groups: cls.groups}, o)
	if err != nil {
		return fail(fmt.Errorf("deployments: %w", err))
	}
	cls.workloads.dep.Store(dep)
	// Deployments' routes too exist before the listener serves.
	if err := dep.Controller().Prime(); err != nil {
		return fail(fmt.Errorf("deployments: %w", err))
	}
	manifests, err := manifestapi.New(manifestapi.Options{Store: dep, Logger: log, Clock: clk})
	if err != nil {
		return fail(err)
	}
	spc, err := newSpaces(st, cls, cat, clk, log, reg, cfg.DataDir, "http://"+ln.Addr().String(), o.Resync, sb)
	if err != nil {
		return fail(fmt.Errorf("spaces: %w", err))
	}
	cls.workloads.spaces.Store(spc)
	asyncQ, err := newAsync(ctx, cfg, st, svc, gw, clk, log, reg)
	if err != nil {
		return fail(err)
	}
	aas := appautoscaling.NewAPI(st, variantsAdapter{svc}, appautoscaling.Options{AccountID: cfg.AccountID, Region: cfg.Region,
		Clock: clk, Logger: log, Registerer: reg, Source: gw, NewReader: asyncReaders(asyncQ, gw, clk)})

	nodesH, err := cls.handler(st, cat, clk, log)
	if err != nil {
		return fail(err)
	}
	api := sagemaker.NewAPI(svc, sagemaker.Options{AccountID: cfg.AccountID, Region: cfg.Region, Catalog: cat, Logger: log,
		Capacity: fl, Clusters: cls.svc, Tags: tags})
	var control, runtimeH http.Handler = awsJSONDispatch(api, aas), http.NotFoundHandler()
	cwAPI := cloudwatch.NewHandler(cw, cloudwatch.HandlerOptions{Clock: clk, AccountID: cfg.AccountID, Logger: log})
	control = cloudwatchDispatch(cwAPI, control)
	if o.RuntimeAPI != nil {
		runtimeH = runtimeapi.WithAsync(o.RuntimeAPI(gw, log), asyncQ, runtimeapi.Options{AccountID: cfg.AccountID, Region: cfg.Region, Logger: log})
	}
	// capstan's own APIs date their answers by the server's clock (the CLI's AGE columns).
	var manifestsH, nodeAPIH http.Handler = manifestapi.WithServerDate(manifests, clk), manifestapi.WithServerDate(nodesH, clk)
	workspaces, err := manifestapi.NewWorkspaces(spc, log, clk)
	if err != nil {
		return nil, err
	}
	var workspacesH http.Handler = manifestapi.WithServerDate(workspaces, clk)
	var front http.Handler = openai.NewHandler(gw, openai.Options{Logger: log, Clock: clk})
	var metricsH, clockH http.Handler = promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), clockHandler(clk)
	var targetsH, replicaMetricsH http.Handler = observability.TargetsHandler(rt), observability.ReplicaMetricsHandler(rt)
	// capstan's own Prometheus: the console's dashboards query it.
	promH, dashboardsH, scraper := metricsStore(cfg.MetricsStore, reg, rt, gw, clk, ln.Addr().String(), log,
		func() map[string]bool { return cls.svc.MetricsOff(context.Background()) })
	if len(cfg.Credentials) > 0 {
		secrets := map[string]string{}
		for _, c := range cfg.Credentials {
			secrets[c.AccessKeyID] = c.SecretAccessKey
		}
		// Wall time even under --dev-clock: clients sign with theirs.
		v := &awsauth.Verifier{Secrets: secrets, Region: cfg.Region, Clock: clock.Real{}, Refuse: refuseSigV4}
		control = awsJSONDispatch(v.Middleware(sagemakerScope, api), v.Middleware(autoScalingScope, aas))
		control = cloudwatchDispatch(v.Middleware(cloudwatchScope, cwAPI), control)
		runtimeH = v.Middleware(runtimeScope, runtimeH)
	}
	// Once any authentication is configured, every surface but /healthz
	// requires its own kind, and one whose kind is not configured refuses
	// everything: inference keys do not administer, and the AWS secret is
	// never sent as a bearer key.
	if cfg.AuthConfigured() {
		if len(cfg.Credentials) == 0 {
			control, runtimeH = sigv4Closed(), sigv4Closed()
		}
		front = bearerAuth(front, "apiKeys", cfg.APIKeys)
		manifestsH = bearerAuth(manifestsH, "adminTokens", cfg.AdminTokens)
		nodeAPIH = bearerAuth(nodeAPIH, "adminTokens", cfg.AdminTokens)
		workspacesH = bearerAuth(workspacesH, "adminTokens", cfg.AdminTokens)
		metricsH = bearerAuth(metricsH, "adminTokens", cfg.AdminTokens)
		targetsH = bearerAuth(targetsH, "adminTokens", cfg.AdminTokens)
		replicaMetricsH = bearerAuth(replicaMetricsH, "adminTokens", cfg.AdminTokens)
		promH = bearerAuth(promH, "adminTokens", cfg.AdminTokens)
		dashboardsH = bearerAuth(dashboardsH, "adminTokens", cfg.AdminTokens)
		clockH = bearerAuth(clockH, "adminTokens", cfg.AdminTokens)
	}
	// The console is static assets plus config.json; what it shows comes
	// through the handlers above, with their authentication.
	consoleH := console.Handler(console.Options{Region: cfg.Region, AccountID: cfg.AccountID, SigV4: cfg.AuthConfigured(),
		AdminToken: cfg.AuthConfigured(), DevClock: cfg.DevClock, Clock: clk})
	// Each route names its door: the API whose error shape its refusals
	// take (routes.classify, door.write).
	rs := newRoutes()
	rs.handle("/", doorControl, toConsole(control))
	rs.handle(console.Path, doorAdmin, consoleH)
	rs.handle("/endpoints/", doorRuntime, runtimeH)
	// kubectl and client-go reach the manifest and workspace kinds through
	// kubeapi, which adds discovery, tables, watches and core/v1 events.
	apis := http.NewServeMux()
	apis.Handle("/apis/", manifestsH)
	apis.Handle(manifestapi.WorkspaceBasePath, workspacesH)
	apis.Handle(manifestapi.WorkspaceBasePath+"/", workspacesH)
	for _, p := range []string{nodeapi.CapstanPath, nodeapi.NodePoolPath, nodeapi.NodeClassPath} {
		apis.Handle(p, nodeAPIH)
		apis.Handle(strings.TrimSuffix(p, "/"), nodeAPIH)
	}
	kube, err := kubeapi.New(kubeapi.Options{APIs: apis, Clock: clk, Logger: log, NodesPath: nodeapi.CapstanPath + "nodes", Groups: []schema.GroupVersion{
		{Group: manifestapi.Group, Version: manifestapi.Version}, {Group: workspace.Group, Version: workspace.Version},
		{Group: "karpenter.sh", Version: "v1"}, {Group: "karpenter.sagemaker.amazonaws.com", Version: "v1"}}})
	if err != nil {
		return nil, err
	}
	var kubeH http.Handler = kube
	if cfg.AuthConfigured() {
		kubeH = bearerAuth(kubeH, "adminTokens", cfg.AdminTokens)
	}
	for _, p := range append([]string{"/apis", "/apis/", manifestapi.WorkspaceBasePath, manifestapi.WorkspaceBasePath + "/",
		nodeapi.NodePoolPath, nodeapi.NodeClassPath}, kubeapi.Paths...) {
		rs.handle(p, doorManifests, kubeH)
	}
	// Spaces check their own credentials (a browser opens them) and, with
	// none configured, serve only loopback.
	rs.handle(spaceproxy.Path, doorAdmin, spaceproxy.New(spaceproxy.Options{Spaces: spc, RequireToken: cfg.AuthConfigured(), AdminTokens: cfg.AdminTokens,
		LoopbackOnly: !cfg.AuthConfigured(), Logger: log}))
	rs.handle(nodeapi.CapstanPath, doorManifests, nodeAPIH)
	rs.handle("/metrics", doorAdmin, metricsH)
	rs.handle(observability.DiscoveryPath, doorAdmin, targetsH)
	rs.handle("GET "+observability.ReplicaMetricsPath+"{id}/metrics", doorAdmin, replicaMetricsH)
	rs.handle(promdb.Path, doorAdmin, promH)
	rs.handle(dashboards.ServePath, doorAdmin, dashboardsH)
	rs.handle(dashboards.ServePath+"/", doorAdmin, dashboardsH)
	rs.handle("/healthz", doorAdmin, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") }))
	rs.handle("/_capstan/clock", doorAdmin, clockH)
	for _, p := range openai.Paths() {
		rs.handle(p, doorOpenAI, front)
	}
	httpSrv, limited := newHTTPServer(ln, rs.serve(guard(rs.mux, cfg, clk)), cfg.Limits)

	cctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s := &Server{Addr: ln.Addr().String(), Clock: clk, Gateway: gw, Service: svc, Deployments: dep, cfg: cfg, log: log, store: st, rt: rt,
		ln: limited, cancel: cancel, http: httpSrv, MetricStore: cw}
	// The controllers: SageMaker endpoints, manifests' deployments,
	// Application Auto Scaling's target tracking, the clusters' nodes and
	// the node autoscaler. Stop waits for all of them before it stops the
	// replicas.
	for _, run := range []func(context.Context){ctrl.Run, dep.Run, aas.Run, cls.svc.Run, cls.autoscaler.Run, asyncQ.Run,
		gw.Sampler().Run, cw.Run, spc.Run, scraper} {
		s.loops.Add(1)
		go func() {
			defer s.loops.Done()
			run(cctx)
		}()
	}
	// The gateway's own loop scrapes replica metrics, health-checks replicas and
	// follows KV events for the cache-aware routing policies.
	go func() { _ = gw.Run(cctx) }()
	go func() {
		if err := s.http.Serve(s.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("http serve", "err", err)
		}
	}()
	if o.Stdout != nil {
		fmt.Fprintf(o.Stdout, "capstan serving on http://%s\n", s.Addr)
	}
	log.Info("capstan serving", "addr", s.Addr, "dataDir", cfg.DataDir, "devClock", cfg.DevClock, "sigv4", len(cfg.Credentials) > 0)
	go func() {
		<-ctx.Done()
		s.Stop(context.Background())
	}()
	s.reg = reg
	return s, nil
}

// toConsole sends a browser that opens the server's root to the console;
// every other request to / is an AWS API call for next.
func toConsole(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if console.WantsConsole(r) {
			http.Redirect(w, r, console.Path, http.StatusFound)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// Registry is the registry /metrics serves: every metric the server exports
// (the metrics catalog's test holds internal/metrics.Catalog equal to it).
func (s *Server) Registry() *prometheus.Registry { return s.reg }

// StopTimeout bounds Stop: in-flight requests get up to 20 s of it, the
// controllers' loops what is left (they observe cancellation between steps,
// but a runtime call that ignores it must not hold shutdown), and stopping
// the replicas the rest.
const StopTimeout = 30 * time.Second

// Stop shuts down gracefully: no new requests, in-flight ones finish, the
// controllers stop, every replica stops, the store closes. It returns within
// StopTimeout, or sooner when ctx ends (plus the store's close). The stored
// endpoints are untouched, so a restart brings them back.
func (s *Server) Stop(ctx context.Context) {
	s.once.Do(func() {
		sctx, cancel := context.WithTimeout(ctx, StopTimeout)
		defer cancel()
		hctx, hcancel := context.WithTimeout(sctx, 20*time.Second)
		_ = s.http.Shutdown(hctx)
		hcancel()
		s.cancel()
		loopsDone := make(chan struct{})
		go func() {
			s.loops.Wait()
			close(loopsDone)
		}()
		select {
		case <-loopsDone:
		case <-sctx.Done():
			s.log.Warn("controllers did not stop within the shutdown bound; stopping replicas anyway", "bound", StopTimeout)
		}
		if err := s.rt.Close(sctx); err != nil {
			s.log.Warn("stop replicas", "err", err)
		}
		if err := s.store.Close(); err != nil {
			s.log.Warn("close store", "err", err)
		}
		s.log.Info("capstan stopped")
	})
}

var (
	_ prometheus.Collector = (*statusCollector)(nil)
	_ endpoint.Alarms      = alarmsAdapter{}
)

// alarmsAdapter lets endpoint updates arm capstan's alarms (docs/alarms.md).
type alarmsAdapter struct{ ev *alarm.Evaluator }

func (a alarmsAdapter) Known(names []string) error { return a.ev.Known(names) }

func (a alarmsAdapter) Arm(ep string, names []string) (endpoint.AlarmWatch, error) {
	return a.ev.Arm(context.Background(), ep, names)
}

// clockHandler serves the dev-clock admin call: GET reads the server's time,
// POST {"advance":"168h"} moves it forward. Without --dev-clock it answers 404
// with a message saying how to turn it on.
func clockHandler(clk clock.Clock) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		reply := func(status int, v any) {
			w.WriteHeader(status)
			_ = json.NewEncoder(w).Encode(v)
		}
		dev, ok := clk.(*clock.Dev)
		if !ok {
			reply(http.StatusNotFound, map[string]string{"message": "the dev clock is off; start capstan serve with --dev-clock to move time"})
			return
		}
		switch r.Method {
		case http.MethodGet:
		case http.MethodPost:
			var in struct {
				Advance string `json:"advance"`
			}
			if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096)).Decode(&in); err != nil {
				reply(http.StatusBadRequest, map[string]string{"message": "body must be JSON like {\"advance\": \"168h\"}: " + err.Error()})
				return
			}
			d, err := time.ParseDuration(in.Advance)
			if err != nil || d < 0 {
				reply(http.StatusBadRequest, map[string]string{"message": fmt.Sprintf("advance: %q is not a non-negative Go duration such as \"168h\"", in.Advance)})
				return
			}
			if err := dev.Advance(d); err != nil {
				status := http.StatusInternalServerError // the store refused the new offset
				if errors.Is(err, clock.ErrAdvanceBounds) {
					status = http.StatusBadRequest
				}
				reply(status, map[string]string{"message": "advance: " + err.Error()})
				return
			}
		default:
			reply(http.StatusMethodNotAllowed, map[string]string{"message": "use GET or POST"})
			return
		}
		reply(http.StatusOK, map[string]string{"now": dev.Now().UTC().Format(time.RFC3339), "offset": dev.Offset().String()})
	})
}

// statusCollector exports capstan_endpoints{status}.
type statusCollector struct {
	svc  *endpoint.Service
	desc *prometheus.Desc
}

func newStatusCollector(svc *endpoint.Service) *statusCollector {
	return &statusCollector{svc: svc, desc: prometheus.NewDesc("capstan_endpoints", "Endpoints by status.", []string{"status"}, nil)}
}

func (c *statusCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *statusCollector) Collect(ch chan<- prometheus.Metric) {
	eps, err := c.svc.ListEndpoints(context.Background())
	if err != nil {
		return
	}
	counts := map[string]int{}
	for _, s := range []string{endpoint.StatusCreating, endpoint.StatusInService, endpoint.StatusUpdating, endpoint.StatusDeleting, endpoint.StatusFailed} {
		counts[s] = 0
	}
	for _, e := range eps {
		counts[e.Status]++
	}
	for s, n := range counts {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n), s)
	}
}

// metricsStore is capstan's own metric store: the Prometheus API over it
// (promdb.Path), the dashboards' index (dashboards.ServePath) and the
// scraper's loop. Disabled, both handlers answer 404 and the loop does
// nothing.
func metricsStore(c config.MetricsStore, reg prometheus.Gatherer, rt observability.Lister, gw *gateway.Gateway, clk clock.Clock, addr string,
	log *slog.Logger, skipClusters func() map[string]bool) (api, index http.Handler, run func(context.Context)) {
	if c.Disabled {
		off := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "capstan's metrics store is off (metricsStore.disabled in capstan.yaml)", http.StatusNotFound)
		})
		return off, off, func(context.Context) {}
	}
	db := promdb.NewDB(c.Retention.Duration, c.MaxSeries)
	// The replicas' metrics are the gateway's reads: one read of each
	// engine's /metrics serves routing, autoscaling, the KV report and this
	// store.
	reads := func(id string) (promdb.ReplicaRead, bool) {
		rd, ok := gw.LastEngineRead(id)
		return promdb.ReplicaRead{Families: rd.Stats.Families, Took: rd.Took, Err: rd.Err}, ok
	}
	sc := &promdb.Scraper{DB: db, Clock: clk, Interval: c.ScrapeInterval.Duration, Server: reg, Instance: addr, Replicas: rt, Reads: reads,
		SkipClusters: skipClusters, Log: log}
	every, keep := c.ScrapeInterval.Duration, c.Retention.Duration
	if every == 0 {
		every = promdb.DefaultScrapeInterval
	}
	if keep == 0 {
		keep = promdb.DefaultRetention
	}
	return promdb.NewAPI(db, clk).Handler(), dashboards.Handler(strings.TrimSuffix(promdb.Path, "/"), every, keep), sc.Run
}
