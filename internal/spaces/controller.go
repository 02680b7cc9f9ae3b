package spaces

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/capstan-dev/capstan/internal/catalog"
	"github.com/capstan-dev/capstan/internal/cluster"
	"github.com/capstan-dev/capstan/internal/manifest"
	"github.com/capstan-dev/capstan/internal/reconcile"
	"github.com/capstan-dev/capstan/internal/sandbox"
	"github.com/capstan-dev/capstan/internal/store"
	"github.com/capstan-dev/capstan/internal/workspace"
)

// Condition reasons.
const (
	ReasonUnschedulable   = "Unschedulable"
	ReasonProgramNotFound = "ProgramNotFound"
	ReasonProcessExited   = "ProcessExited"
	ReasonStartTimeout    = "StartTimeout"
	ReasonInvalid         = "InvalidSpec"
	ReasonIdleShutdown    = "IdleShutdown"
	ReasonEvicted         = "Evicted"
	ReasonNoSandbox       = "NoSandbox"
)

// restartDelay is how long a failed space waits before capstan tries it
// again (its resync may come sooner; this bounds a crash loop).
const restartDelay = 10 * time.Second

var probeClient = &http.Client{Timeout: 3 * time.Second}

// placementID is the space's id in the node pool, beside replica ids.
func placementID(k string) string { return "space:" + k }

// Run reconciles spaces on changes, on the node pool's changes and on a
// resync tick, and reads running spaces' activity, until ctx is done; then
// it stops every space (their files stay) and waits.
func (s *Service) Run(ctx context.Context) {
	s.mu.Lock()
	s.ctx = ctx
	s.mu.Unlock()
	s.queue.Start(ctx)
	poolCh := s.o.Pool.Watch()
	activity := s.o.Clock.NewTicker(s.o.ActivityInterval)
	defer activity.Stop()
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-poolCh:
				s.resync()
			case <-activity.C():
				s.readActivity(ctx)
			}
		}
	}()
	tick := s.o.Clock.NewTicker(s.o.Resync)
	defer tick.Stop()
	reconcile.Loop(ctx, s.queue, make(chan struct{}), func(struct{}) {}, tick.C(), s.resync)
	s.stopAll()
}

func (s *Service) resync() {
	_ = s.o.Store.View(func(tx *store.Tx) error {
		return tx.Each(bucketSpaces, func(k string, _ []byte) error {
			s.queue.Enqueue(k)
			return nil
		})
	})
}

// stopAll stops every space process at shutdown; their records say
// Running, so the next start brings them back.
func (s *Service) stopAll() {
	s.mu.Lock()
	procs := make([]*proc, 0, len(s.procs))
	for _, p := range s.procs {
		procs = append(procs, p)
	}
	s.procs = map[string]*proc{}
	s.mu.Unlock()
	// In parallel: each may take StopGrace, and the server's stop is bounded.
	var wg sync.WaitGroup
	for _, p := range procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.kill(p)
			s.o.Pool.Release(p.id)
		}()
	}
	wg.Wait()
	sweep(s.o.Dir, "")
	s.cgroups.release()
}

// free releases what a stopped or deleted space holds, or forgets it as
// pending; a release that freed room wakes what waits for it now rather
// than at its next resync. (A space that keeps failing to start does not
// loop on it: it is tried again restartDelay later.)
func (s *Service) free(id string) {
	_, held := s.o.Pool.NodeOf(id)
	s.o.Pool.Release(id)
	if held {
		s.o.Pool.NotifyFreed()
	}
}

func (s *Service) dir(k string) string {
	ns, name := splitKey(k)
	return filepath.Join(s.o.Dir, ns, name)
}

func (s *Service) reconcile(ctx context.Context, k string) error {
	var rec record
	found := false
	if err := s.o.Store.View(func(tx *store.Tx) error {
		var err error
		found, err = tx.Get(bucketSpaces, k, &rec)
		return err
	}); err != nil {
		return err
	}
	s.mu.Lock()
	p := s.procs[k]
	s.mu.Unlock()
	id := placementID(k)
	if !found || rec.Deleting {
		if p != nil {
			s.stop(k, p)
		}
		s.free(id)
		s.mu.Lock()
		delete(s.failedAt, k)
		s.mu.Unlock()
		if !found {
			return nil
		}
		if err := os.RemoveAll(s.dir(k)); err != nil {
			return fmt.Errorf("remove %s: %w", s.dir(k), err)
		}
		s.log.Info("space deleted", "space", k)
		return s.o.Store.Update(func(tx *store.Tx) error { return tx.Delete(bucketSpaces, k) })
	}
	w := &rec.Workspace
	now := s.o.Clock.Now().UTC()
	running := w.Spec.DesiredStatus == workspace.StatusRunning
	if p != nil {
		select {
		case <-p.done:
			s.stop(k, p)
			msg := fmt.Sprintf("the space's program exited (%v)", *p.exitErr)
			if tail := logTail(p.log, 5); tail != "" {
				msg += ": " + tail
			}
			s.setFailed(k, w.Metadata.Generation, ReasonProcessExited, msg)
			return nil
		default:
		}
		_, placed := s.o.Pool.NodeOf(id)
		switch {
		case !running:
			s.stop(k, p)
		case p.gen != w.Metadata.Generation:
			s.stop(k, p)
			s.record(k, manifest.EventNormal, "Restarting", "the spec changed; restarting the space with it")
		case !placed:
			// Its node left the pool (scale-in, failure, plan end).
			s.stop(k, p)
			s.record(k, manifest.EventWarning, ReasonEvicted, "the space's node left the cluster; placing it again")
		default:
			return nil
		}
	}
	if !running {
		s.free(id)
		return s.writeStatus(k, func(st *workspace.WorkspaceStatus) {
			*st = workspace.WorkspaceStatus{Phase: workspace.PhaseStopped, Conditions: st.Conditions, LastActivity: st.LastActivity}
			setCondition(st, workspace.ConditionStopped, "True", "DesiredStatusStopped", "stopped; its files are kept", now)
			setCondition(st, workspace.ConditionAvailable, "False", "Stopped", "the space is stopped", now)
			setCondition(st, workspace.ConditionProgressing, "False", "Stopped", "", now)
			setCondition(st, workspace.ConditionDegraded, "False", "Stopped", "", now)
		})
	}
	s.mu.Lock()
	failedAt, failed := s.failedAt[k]
	s.mu.Unlock()
	if failed && failedAt.gen == w.Metadata.Generation && now.Sub(failedAt.at) < restartDelay {
		return nil
	}
	var r workspace.Resolved
	co := s.offersOf(ctx, w)
	if err := s.o.Store.View(func(tx *store.Tx) error {
		var err error
		r, err = s.check(tx, w, co)
		return err
	}); err != nil {
		if len(manifest.FieldErrors(err)) == 0 {
			return err
		}
		s.o.Pool.Release(id)
		s.setFailed(k, w.Metadata.Generation, ReasonInvalid, err.Error())
		return nil
	}
	// A missing program fails before placement: a space that cannot start
	// never holds, and frees, a slice.
	if len(r.Command) == 0 {
		s.setFailed(k, w.Metadata.Generation, ReasonProgramNotFound, "no program to run")
		return nil
	}
	prog, err := lookPath(r.Command[0])
	if err != nil {
		s.o.Pool.Release(id)
		s.setFailed(k, w.Metadata.Generation, ReasonProgramNotFound, err.Error())
		return nil
	}
	if err := s.o.Sandbox.Refuses(); err != nil {
		s.o.Pool.Release(id)
		s.setFailed(k, w.Metadata.Generation, ReasonNoSandbox, err.Error())
		return nil
	}
	node, err := s.place(k, w, r)
	if err != nil {
		msg := err.Error()
		s.record(k, manifest.EventWarning, "FailedScheduling", msg)
		return s.writeStatus(k, func(st *workspace.WorkspaceStatus) {
			st.Phase, st.Node, st.InstanceType, st.GPUs, st.MIGSlice, st.AccessURL = workspace.PhasePending, "", "", 0, "", ""
			st.ObservedGeneration = w.Metadata.Generation
			setCondition(st, workspace.ConditionProgressing, "True", ReasonUnschedulable, msg, now)
			setCondition(st, workspace.ConditionAvailable, "False", ReasonUnschedulable, "waiting for room on a node", now)
			setCondition(st, workspace.ConditionStopped, "False", ReasonUnschedulable, "", now)
		})
	}
	p, err = s.start(k, w, prog, r, node)
	if err != nil {
		s.o.Pool.Release(id)
		s.setFailed(k, w.Metadata.Generation, ReasonProcessExited, err.Error())
		return nil
	}
	s.mu.Lock()
	delete(s.failedAt, k)
	s.mu.Unlock()
	s.mu.Lock()
	s.procs[k] = p
	s.mu.Unlock()
	slice := sliceOf(node, id)
	s.record(k, manifest.EventNormal, "Started", fmt.Sprintf("started %s on node %s (%s)", r.Command[0], node.Name, holds(r.Request, slice)))
	if err := s.writeStatus(k, func(st *workspace.WorkspaceStatus) {
		st.Phase, st.Node, st.InstanceType = workspace.PhaseStarting, node.Name, node.InstanceType
		st.GPUs, st.MIGSlice, st.AccessURL = r.Request.GPUs, slice.name(), ""
		st.ApplicationBasePath = p.base
		st.ObservedGeneration = w.Metadata.Generation
		setCondition(st, workspace.ConditionProgressing, "True", "Starting", "waiting for the app to answer", now)
		setCondition(st, workspace.ConditionAvailable, "False", "Starting", "", now)
		setCondition(st, workspace.ConditionStopped, "False", "Starting", "", now)
		setCondition(st, workspace.ConditionDegraded, "False", "Starting", "", now)
	}); err != nil {
		return err
	}
	go s.awaitReady(k, p)
	return nil
}

// place puts the space on a node of its cluster: the selected instance
// type, or any of the cluster's; pending for the node autoscaler otherwise.
func (s *Service) place(k string, w *workspace.Workspace, r workspace.Resolved) (cluster.Node, error) {
	id, cl := placementID(k), ClusterOf(w)
	req := cluster.Resources{GPUs: r.Request.GPUs, MilliCPU: r.Request.MilliCPU, MemoryBytes: r.Request.MemoryBytes, MIGProfile: r.Request.MIGProfile}
	types := []string{r.InstanceType}
	if r.InstanceType == "" {
		types = s.o.Pool.InstanceTypes(cl)
	}
	var reasons []string
	for _, t := range types {
		name, err := s.o.Pool.Place(id, cl, t, req)
		if err != nil {
			reasons = append(reasons, fmt.Sprintf("%s: %v", t, err))
			continue
		}
		for _, n := range s.o.Pool.Nodes() {
			if n.Name == name {
				return n, nil
			}
		}
	}
	pend := cluster.Pending{ReplicaID: id, Cluster: cl, Request: req}
	if r.InstanceType != "" {
		pend.InstanceTypes = []string{r.InstanceType}
	}
	s.o.Pool.SetPending(pend)
	if len(reasons) == 0 {
		return cluster.Node{}, fmt.Errorf("0/0 nodes are available in cluster %s", cl)
	}
	msg := "no node has room: " + reasons[0]
	for _, x := range reasons[1:] {
		msg += "; " + x
	}
	return cluster.Node{}, errors.New(msg)
}

// heldSlice is the MIG slice a placement holds.
type heldSlice struct {
	profile  string
	gpu, idx int // idx: among that GPU's slices
}

func (h heldSlice) name() string {
	if h.profile == "" {
		return ""
	}
	return fmt.Sprintf("%s (GPU %d, slice %d)", h.profile, h.gpu, h.idx)
}

func sliceOf(n cluster.Node, id string) heldSlice {
	idx := map[int]int{}
	for _, sl := range n.Slices {
		if sl.ReplicaID == id {
			return heldSlice{profile: sl.Profile, gpu: sl.GPU, idx: idx[sl.GPU]}
		}
		idx[sl.GPU]++
	}
	return heldSlice{}
}

func holds(r workspace.Request, sl heldSlice) string {
	switch {
	case sl.profile != "":
		return "MIG " + sl.name()
	case r.GPUs > 0:
		return fmt.Sprintf("%d GPUs", r.GPUs)
	default:
		return "no GPU"
	}
}

// start launches the space's program prog on node.
func (s *Service) start(k string, w *workspace.Workspace, prog string, r workspace.Resolved, node cluster.Node) (*proc, error) {
	dir := s.dir(k)
	if rel, err := filepath.Rel(s.o.Dir, dir); err != nil || !filepath.IsLocal(rel) {
		return nil, fmt.Errorf("space directory %s is outside %s", dir, s.o.Dir)
	}
	home := filepath.Join(dir, "home")
	for _, d := range []string{home, filepath.Join(home, ".tmp")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	ns, name := splitKey(k)
	p := &proc{key: k, id: placementID(k), gen: w.Metadata.Generation, port: port, token: newToken(),
		base: BasePath(ns, name), appType: r.AppType, idle: r.IdleTimeout, log: filepath.Join(dir, "space.log")}
	extra := map[string]string{}
	id := placementID(k)
	sl := sliceOf(node, id)
	for k, v := range map[string]string{
		"PATH": safePath, "HOME": home, "TMPDIR": filepath.Join(home, ".tmp"),
		envSpacesDir: s.o.Dir, envSpace: k,
		workspace.EnvPort: strconv.Itoa(port), workspace.EnvBaseURL: p.base, workspace.EnvToken: p.token,
		// Notebooks call capstan's APIs (SageMaker, manifests, OpenAI) here.
		"CAPSTAN_URL":  s.o.URL,
		"CAPSTAN_NODE": node.Name, "CAPSTAN_INSTANCE_TYPE": node.InstanceType, "CAPSTAN_GPU_MODEL": node.GPU,
		"CAPSTAN_GPUS": strconv.Itoa(r.Request.GPUs),
	} {
		extra[k] = v
	}
	if sl.profile != "" {
		dev := fmt.Sprintf("MIG-%s-GPU%d-%d", node.Name, sl.gpu, sl.idx)
		extra["CAPSTAN_MIG_PROFILE"] = sl.profile
		extra["CAPSTAN_MIG_SLICE"] = sl.name()
		extra["NVIDIA_VISIBLE_DEVICES"], extra["CUDA_VISIBLE_DEVICES"] = dev, dev
	} else if r.Request.GPUs == 0 {
		extra["NVIDIA_VISIBLE_DEVICES"], extra["CUDA_VISIBLE_DEVICES"] = "void", ""
	}
	// The user's variables may refer to capstan's ($(CAPSTAN_SPACE_TOKEN)),
	// and cannot override them: validation refuses CAPSTAN_* names.
	own := maps.Clone(extra)
	for k, v := range r.Env {
		extra[k] = expand(v, own)
	}
	env, envMap := environ(extra)
	argv := []string{prog}
	for _, a := range r.Command[1:] {
		argv = append(argv, expand(a, envMap))
	}
	cgroup, err := s.cgroups.enter(k)
	if err != nil {
		return nil, err
	}
	program := sandbox.Program{Argv: argv, Env: env, Dir: home, Writable: []string{home},
		ReadOnly: sandbox.Installation(argv[0]), Name: "space/" + k}
	cmd, done, exitErr, err := launch(s.o.Sandbox, program, p.log, cgroup)
	_ = closeFD(cgroup)
	if err != nil && cgroup >= 0 && !errors.Is(err, sandbox.ErrUnavailable) {
		// A kernel without clone3's CLONE_INTO_CGROUP (before Linux 5.7)
		// refuses the launch itself: start the space untracked.
		s.log.Warn("space started outside its cgroup", "space", k, "err", err)
		cmd, done, exitErr, err = launch(s.o.Sandbox, program, p.log, -1)
	}
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", prog, err)
	}
	p.cmd, p.done, p.exitErr = cmd, done, exitErr
	go func() {
		<-done
		s.queue.Enqueue(k)
	}()
	now := s.o.Clock.Now()
	p.since, p.lastActivity = now, now
	if it, err := s.o.Catalog.InstanceType(node.InstanceType); err == nil {
		p.pricePerHour = it.PricePerHour
		p.share = s.share(it, node.Capacity, r.Request, sl)
	}
	s.log.Info("space started", "space", k, "node", node.Name, "pid", cmd.Process.Pid, "port", port)
	return p, nil
}

// share is the part of its node a space holds, for its cost: its GPUs (a
// MIG slice by its compute slices of the GPU's seven), or its CPUs on a CPU
// node.
func (s *Service) share(it catalog.InstanceType, capacity cluster.Resources, req workspace.Request, sl heldSlice) float64 {
	switch {
	case sl.profile != "" && it.GPUCount > 0:
		frac := 1.0 / 7
		if g, err := s.o.Catalog.GPU(it.GPU); err == nil {
			if mp, err := g.MIGProfile(sl.profile); err == nil {
				frac = mp.ComputeFraction()
			}
		}
		return frac / float64(it.GPUCount)
	case req.GPUs > 0 && it.GPUCount > 0:
		return float64(req.GPUs) / float64(it.GPUCount)
	case capacity.MilliCPU > 0:
		return min(float64(req.MilliCPU)/float64(capacity.MilliCPU), 1)
	}
	return 0
}

// kill stops p's process group: SIGTERM, SIGKILL after StopGrace, then
// anything of the space outside the group (Jupyter's kernels), by its
// environment and by its cgroup.
func (s *Service) kill(p *proc) {
	p.cmd.SignalGroup(syscall.SIGTERM)
	t := s.o.Clock.NewTimer(s.o.StopGrace)
	select {
	case <-p.done:
		t.Stop()
	case <-t.C():
		p.cmd.SignalGroup(syscall.SIGKILL)
		<-p.done
	}
	p.cmd.SignalGroup(syscall.SIGKILL)
	sweep(s.o.Dir, p.key)
	s.cgroups.kill(p.key)
}

// stop ends p, frees its placement and forgets it.
func (s *Service) stop(k string, p *proc) {
	s.kill(p)
	s.free(p.id)
	s.mu.Lock()
	if s.procs[k] == p {
		delete(s.procs, k)
	}
	s.mu.Unlock()
	s.cost.add(p, s.o.Clock.Now())
	s.log.Info("space stopped", "space", k)
}

// awaitReady polls the app until it answers, then marks the space Running;
// past StartTimeout it stops it as failed.
func (s *Service) awaitReady(k string, p *proc) {
	tick := s.o.Clock.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	deadline := s.o.Clock.Now().Add(s.o.StartTimeout)
	s.mu.Lock()
	ctx := s.ctx
	s.mu.Unlock()
	for {
		select {
		case <-p.done:
			return // the reconcile the exit enqueued reports it
		case <-ctx.Done():
			return
		case <-tick.C():
		}
		if _, err := s.probe(p); err == nil {
			break
		}
		if s.o.Clock.Now().After(deadline) {
			s.stop(k, p)
			s.setFailed(k, p.gen, ReasonStartTimeout, fmt.Sprintf("the app did not answer within %s: %s", s.o.StartTimeout, logTail(p.log, 5)))
			return
		}
	}
	now := s.o.Clock.Now().UTC()
	s.mu.Lock()
	p.healthy = true
	s.mu.Unlock()
	url := s.o.URL + p.base
	s.record(k, manifest.EventNormal, "Running", "the space answers at "+url)
	_ = s.writeStatus(k, func(st *workspace.WorkspaceStatus) {
		st.Phase, st.AccessURL = workspace.PhaseRunning, url
		st.LastActivity = &now
		setCondition(st, workspace.ConditionAvailable, "True", "Running", "", now)
		setCondition(st, workspace.ConditionProgressing, "False", "Running", "", now)
		setCondition(st, workspace.ConditionDegraded, "False", "Running", "", now)
		setCondition(st, workspace.ConditionStopped, "False", "Running", "", now)
	})
}

// codeServerCookie is the cookie code-server takes its session in.
const codeServerCookie = "code-server-session"

// probe asks the app whether it is up; for Jupyter it returns the
// server's last_activity.
func (s *Service) probe(p *proc) (string, error) {
	u := fmt.Sprintf("http://127.0.0.1:%d%s", p.port, p.base)
	switch p.appType {
	case workspace.AppJupyter:
		u += "api/status"
	case workspace.AppCodeEditor:
		u = fmt.Sprintf("http://127.0.0.1:%d/healthz", p.port)
	}
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "token "+p.token)
	resp, err := probeClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if p.appType != workspace.AppJupyter {
		if resp.StatusCode >= 500 {
			return "", fmt.Errorf("HTTP %d", resp.StatusCode)
		}
		return "", nil
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	var st struct {
		LastActivity string `json:"last_activity"`
	}
	if err := json.Unmarshal(body, &st); err != nil {
		return "", err
	}
	return st.LastActivity, nil
}

// readActivity reads each running space's activity, and stops one that has
// been idle past its timeout by setting its desiredStatus to Stopped.
func (s *Service) readActivity(ctx context.Context) {
	s.mu.Lock()
	var procs []*proc
	for _, p := range s.procs {
		if p.healthy {
			procs = append(procs, p)
		}
	}
	s.mu.Unlock()
	now := s.o.Clock.Now()
	for _, p := range procs {
		if ctx.Err() != nil {
			return
		}
		s.cost.add(p, now)
		if p.appType == workspace.AppJupyter {
			if v, err := s.probe(p); err == nil {
				s.mu.Lock()
				if v != p.lastSeen {
					p.lastSeen, p.lastActivity = v, now
				}
				s.mu.Unlock()
			}
		}
		s.mu.Lock()
		last, idle := p.lastActivity, p.idle
		s.mu.Unlock()
		if idle > 0 && now.Sub(last) >= idle {
			s.idleStop(p.key, now.Sub(last).Truncate(time.Second))
		}
	}
}

// Touch records activity through capstan's proxy (what counts for apps
// other than Jupyter, whose own last activity is read instead).
func (s *Service) Touch(ns, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.procs[key(ns, name)]; p != nil && p.appType != workspace.AppJupyter {
		p.lastActivity = s.o.Clock.Now()
	}
}

func (s *Service) idleStop(k string, idleFor time.Duration) {
	now := s.o.Clock.Now().UTC()
	err := s.o.Store.Update(func(tx *store.Tx) error {
		var rec record
		found, err := tx.Get(bucketSpaces, k, &rec)
		if err != nil || !found || rec.Deleting || rec.Workspace.Spec.DesiredStatus != workspace.StatusRunning {
			return err
		}
		rec.Workspace.Spec.DesiredStatus = workspace.StatusStopped
		rec.Workspace.Metadata.Generation++
		rec.Workspace.Metadata.ResourceVersion = bump(rec.Workspace.Metadata.ResourceVersion)
		rec.event(now, manifest.EventNormal, ReasonIdleShutdown, fmt.Sprintf("no activity for %s: desiredStatus set to Stopped (files kept; set it to Running to start again)", idleFor))
		return tx.Put(bucketSpaces, k, &rec)
	})
	if err != nil {
		s.log.Error("idle shutdown", "space", k, "err", err)
		return
	}
	s.log.Info("space idle: stopping", "space", k, "idle", idleFor)
	s.queue.Enqueue(k)
}

// Target is where the proxy sends a running space's requests, and the
// token to send.
type Target struct {
	Port  int
	Token string
	// Cookie, when set, names the cookie the app takes the token in
	// (code-server's session) instead of 'Authorization: token'.
	Cookie string
	// Base, when set, is the path prefix the proxy strips: the app
	// serves at / (code-server) rather than under its base URL.
	Base string
}

// Target returns the running space ns/name's target.
func (s *Service) Target(ns, name string) (Target, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.procs[key(ns, name)]
	if p == nil || !p.healthy {
		return Target{}, false
	}
	t := Target{Port: p.port, Token: p.token}
	if p.appType == workspace.AppCodeEditor {
		t.Cookie, t.Base = codeServerCookie, strings.TrimSuffix(p.base, "/")
	}
	return t, true
}

// setFailed records a failure of generation gen: the space is tried
// again restartDelay later (or at once on a spec change).
func (s *Service) setFailed(k string, gen int64, reason, msg string) {
	now := s.o.Clock.Now().UTC()
	s.mu.Lock()
	s.failedAt[k] = failure{at: now, gen: gen}
	s.mu.Unlock()
	s.record(k, manifest.EventWarning, reason, msg)
	_ = s.writeStatus(k, func(st *workspace.WorkspaceStatus) {
		st.Phase, st.AccessURL, st.Node, st.InstanceType, st.GPUs, st.MIGSlice = workspace.PhaseFailed, "", "", "", 0, ""
		setCondition(st, workspace.ConditionDegraded, "True", reason, msg, now)
		setCondition(st, workspace.ConditionAvailable, "False", reason, "", now)
		setCondition(st, workspace.ConditionProgressing, "False", reason, "", now)
	})
}

// record appends an event to the space's record.
func (s *Service) record(k, typ, reason, msg string) {
	now := s.o.Clock.Now().UTC()
	_ = s.o.Store.Update(func(tx *store.Tx) error {
		var rec record
		found, err := tx.Get(bucketSpaces, k, &rec)
		if err != nil || !found {
			return err
		}
		rec.event(now, typ, reason, msg)
		return tx.Put(bucketSpaces, k, &rec)
	})
}

// writeStatus updates the stored status with fn, storing only a change.
func (s *Service) writeStatus(k string, fn func(*workspace.WorkspaceStatus)) error {
	return s.o.Store.Update(func(tx *store.Tx) error {
		var rec record
		found, err := tx.Get(bucketSpaces, k, &rec)
		if err != nil || !found || rec.Deleting {
			return err
		}
		before, _ := json.Marshal(rec.Workspace.Status)
		fn(&rec.Workspace.Status)
		after, _ := json.Marshal(rec.Workspace.Status)
		if string(before) == string(after) {
			return nil
		}
		return tx.Put(bucketSpaces, k, &rec)
	})
}

func findCondition(st *workspace.WorkspaceStatus, typ string) *workspace.Condition {
	i := slices.IndexFunc(st.Conditions, func(c workspace.Condition) bool { return c.Type == typ })
	if i < 0 {
		return nil
	}
	return &st.Conditions[i]
}

// setCondition sets a condition, keeping its transition time when its
// status does not change.
func setCondition(st *workspace.WorkspaceStatus, typ, status, reason, msg string, now time.Time) {
	if c := findCondition(st, typ); c != nil {
		if c.Status != status {
			c.LastTransitionTime = now
		}
		c.Status, c.Reason, c.Message = status, reason, msg
		return
	}
	st.Conditions = append(st.Conditions, workspace.Condition{Type: typ, Status: status, Reason: reason, Message: msg, LastTransitionTime: now})
}

// Phase is the stored phase of space ns/name.
func (s *Service) Phase(ns, name string) (string, bool) {
	var rec record
	found := false
	_ = s.o.Store.View(func(tx *store.Tx) error {
		var err error
		found, err = tx.Get(bucketSpaces, key(ns, name), &rec)
		return err
	})
	if rec.Deleting {
		return "Terminating", found
	}
	return rec.Workspace.Status.Phase, found
}
