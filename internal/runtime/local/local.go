package local

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/capstan-dev/capstan/internal/catalog"
	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/engines"
	"github.com/capstan-dev/capstan/internal/procenv"
	"github.com/capstan-dev/capstan/internal/runtime"
	"github.com/capstan-dev/capstan/internal/sandbox"
)

var _ runtime.Runtime = (*Runtime)(nil)

// Options configure the local runtime. Zero values get the defaults noted.
type Options struct {
	Binary string // path to the capstan binary; default os.Executable()
	// LogDir is the replicas directory (the server passes <data-dir>/replicas):
	// each replica logs to LogDir/<id>.log (stdout+stderr) and runs in
	// LogDir/<id>/, its HOME. Default os.TempDir()/capstan-replicas.
	LogDir string
	Host   string // address engines bind; default 127.0.0.1
	Clock  clock.Clock
	Logger *slog.Logger
	// HealthInterval is the check period while starting (default 50ms).
	HealthInterval time.Duration
	// HealthyInterval is the check period once healthy (default 1s).
	HealthyInterval time.Duration
	// UnhealthyThreshold consecutive failed checks of a healthy replica make
	// it Failed and restart it (default 3).
	UnhealthyThreshold int
	// StartTimeout: not healthy by then → Failed, restart (default 2m).
	// Counted in HealthInterval periods, so a dev-clock jump does not expire it.
	StartTimeout time.Duration
	// MaxBackoff caps the restart backoff, exponential from 100ms (default 30s).
	MaxBackoff time.Duration
	// StopGrace is how long Stop waits after SIGTERM before SIGKILL (default 10s).
	StopGrace time.Duration
	// EngineArgs are appended to every simulated replica's command line,
	// before spec.Args.
	EngineArgs []string
	// Engines say where each real engine lives (capstan.yaml engines);
	// an engine not named here is looked up on PATH by its default name.
	Engines map[string]engines.Installed
	// Catalog validates model and GPU names (default catalog.Default()).
	Catalog *catalog.Catalog
	// Sandbox confines each replica to its work dir, its binary and its
	// model; nil runs replicas as plain children (tests of other packages).
	Sandbox *sandbox.Sandbox
}

const (
	initialBackoff = 100 * time.Millisecond
	announcePrefix = "listening on http://"
	healthTimeout  = 2 * time.Second
)

// Runtime runs replicas as child processes of this process.
type Runtime struct {
	opts   Options
	log    *slog.Logger
	client *http.Client

	mu     sync.Mutex
	reps   map[string]*replica
	subs   map[*subscriber]struct{}
	closed bool
}

type replica struct {
	spec     runtime.ReplicaSpec
	apiKey   string // the engine's API key, the same for every run (runtime.Replica.APIKey)
	logPath  string
	stop     chan struct{} // closed by Stop
	stopOnce sync.Once
	done     chan struct{}   // closed when the supervisor has returned
	view     runtime.Replica // guarded by Runtime.mu
}

// New validates opts and returns a runtime with no replicas.
func New(opts Options) (*Runtime, error) {
	if opts.Binary == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("local runtime: find own binary: %w", err)
		}
		opts.Binary = exe
	}
	// Absolute, because each replica runs in its own directory, where a
	// relative path (engine.binary: ./bin/capstan) would name another file.
	bin, err := filepath.Abs(opts.Binary)
	if err != nil {
		return nil, fmt.Errorf("local runtime: engine binary: %w", err)
	}
	opts.Binary = bin
	if _, err := os.Stat(opts.Binary); err != nil {
		return nil, fmt.Errorf("local runtime: engine binary: %w", err)
	}
	if opts.LogDir == "" {
		opts.LogDir = filepath.Join(os.TempDir(), "capstan-replicas")
	}
	// Absolute, because it becomes each replica's HOME and working directory.
	abs, err := filepath.Abs(opts.LogDir)
	if err != nil {
		return nil, fmt.Errorf("local runtime: log dir: %w", err)
	}
	opts.LogDir = abs
	if err := os.MkdirAll(opts.LogDir, 0o755); err != nil {
		return nil, fmt.Errorf("local runtime: log dir: %w", err)
	}
	if opts.Host == "" {
		opts.Host = "127.0.0.1"
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.HealthInterval <= 0 {
		opts.HealthInterval = 50 * time.Millisecond
	}
	if opts.HealthyInterval <= 0 {
		opts.HealthyInterval = time.Second
	}
	if opts.UnhealthyThreshold <= 0 {
		opts.UnhealthyThreshold = 3
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 2 * time.Minute
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = 30 * time.Second
	}
	if opts.StopGrace <= 0 {
		opts.StopGrace = 10 * time.Second
	}
	if opts.Catalog == nil {
		opts.Catalog = catalog.Default()
	}
	removeLeftWorkDirs(opts.LogDir, opts.Logger)
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil
	return &Runtime{
		opts:   opts,
		log:    opts.Logger,
		client: &http.Client{Transport: t, Timeout: healthTimeout},
		reps:   map[string]*replica{},
		subs:   map[*subscriber]struct{}{},
	}, nil
}

// removeLeftWorkDirs removes the work dirs a server killed with SIGKILL
// left in dir: its replicas died with it (parent-death signal), and no
// replica of this runtime runs yet, so every directory there is a leftover.
// The logs, files, stay.
func removeLeftWorkDirs(dir string, log *slog.Logger) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	n := 0
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			log.Warn("replica work dir of a previous run not removed", "dir", filepath.Join(dir, e.Name()), "err", err)
			continue
		}
		n++
	}
	if n > 0 {
		log.Info("removed the work dirs of a previous run's replicas", "dirs", n)
	}
}

// replicaIDRE keeps ids safe as log file and directory names.
var replicaIDRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$`)

func (r *Runtime) validate(spec runtime.ReplicaSpec) error {
	if !replicaIDRE.MatchString(spec.ID) || strings.Contains(spec.ID, "..") {
		return fmt.Errorf("replica id %q: want 1-200 of [A-Za-z0-9._-], starting alphanumeric, no \"..\"", spec.ID)
	}
	if _, err := r.workDir(spec.ID); err != nil {
		return err
	}
	if err := procenv.Check(spec.Env); err != nil {
		return fmt.Errorf("replica %s: env: %w", spec.ID, err)
	}
	a, err := engines.ByName(spec.Engine)
	if err != nil {
		return fmt.Errorf("replica %s: %w", spec.ID, err)
	}
	switch {
	case spec.Model == "" && spec.ModelDir == "":
		return fmt.Errorf("replica %s: neither a model nor a model folder", spec.ID)
	case spec.ModelDir != "" && !filepath.IsAbs(spec.ModelDir):
		return fmt.Errorf("replica %s: model folder %q is not an absolute path", spec.ID, spec.ModelDir)
	case a.Format == engines.FormatGGUF && spec.ModelDir == "":
		return fmt.Errorf("replica %s: engine %s loads a .gguf file and the replica has no model folder", spec.ID, a.Name)
	case a.Name == engines.Sim && spec.Model != "" && spec.ModelDir == "":
		// With a folder the engine reads the architecture from its
		// config.json; Model then only names it.
		if _, err := r.opts.Catalog.Model(spec.Model); err != nil {
			return fmt.Errorf("replica %s: model: %w", spec.ID, err)
		}
	}
	if a.Name != engines.Sim {
		if _, err := a.Resolve(r.opts.Engines[a.Name]); err != nil {
			return fmt.Errorf("replica %s: %w", spec.ID, err)
		}
		if spec.ModelDir != "" {
			if _, err := a.ModelPath(spec.ModelDir); err != nil {
				return fmt.Errorf("replica %s: %w", spec.ID, err)
			}
		}
	}
	gpu, err := r.opts.Catalog.GPU(spec.GPU)
	if err != nil {
		return fmt.Errorf("replica %s: gpu: %w", spec.ID, err)
	}
	if spec.TensorParallel < 0 {
		return fmt.Errorf("replica %s: tensor parallel %d < 0", spec.ID, spec.TensorParallel)
	}
	if spec.MIGProfile != "" {
		if _, err := gpu.MIGProfile(spec.MIGProfile); err != nil {
			return fmt.Errorf("replica %s: mig profile: %w", spec.ID, err)
		}
	}
	return nil
}

// workDir is the replica's own directory, LogDir/<id>. The id comes from a
// controller that may have built it from client input, so it must name one
// entry directly under LogDir; anything else is refused rather than cleaned.
func (r *Runtime) workDir(id string) (string, error) {
	dir := filepath.Join(r.opts.LogDir, id)
	rel, err := filepath.Rel(r.opts.LogDir, dir)
	if err != nil || !filepath.IsLocal(rel) || rel != id || rel == "." || filepath.Base(rel) != rel {
		return "", fmt.Errorf("replica id %q: not a single name inside %s", id, r.opts.LogDir)
	}
	return dir, nil
}

// prepareWorkDir creates the replica's directory and its tmp/. A symlink in
// its place (planted by anyone with access to the data dir) would move the
// replica's files elsewhere, so it is refused.
func (r *Runtime) prepareWorkDir(id string) (string, error) {
	dir, err := r.workDir(id)
	if err != nil {
		return "", err
	}
	// Lstat before MkdirAll, which would follow a symlink and create tmp/
	// wherever it points.
	if fi, err := os.Lstat(dir); err == nil && !fi.IsDir() {
		return "", fmt.Errorf("replica %s: work dir %s is not a directory (%s)", id, dir, fi.Mode().Type())
	}
	if err := os.MkdirAll(filepath.Join(dir, "tmp"), 0o700); err != nil {
		return "", fmt.Errorf("replica %s: work dir: %w", id, err)
	}
	return dir, nil
}

// safePath is the engine's PATH. It never comes from the server, whose PATH
// may list user-writable directories; the engine runs no other program.
const safePath = "/usr/local/bin:/usr/bin:/bin"

// inherited are the only variables of the server's own environment a replica
// gets: locale and time zone change formatting, never loading or credentials.
var inherited = []string{"LANG", "LC_ALL", "TZ"}

// env is the replica's whole environment: an allow-list, not the server's
// environment minus a deny-list, so no credential (AWS_*, CAPSTAN_*, HF_TOKEN)
// or loader variable of the server ever reaches a replica. spec.Env comes
// last and so wins over the inherited locale; validate has already refused
// any name that could override PATH, HOME or TMPDIR.
func (r *Runtime) env(spec runtime.ReplicaSpec, engineEnv map[string]string, apiKeyEnv, apiKey, dir string) []string {
	env := []string{"PATH=" + safePath, "HOME=" + dir, "TMPDIR=" + filepath.Join(dir, "tmp")}
	for _, k := range inherited {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	// The engine's own (device selection) before the spec's, which wins.
	for _, m := range []map[string]string{engineEnv, spec.Env} {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			env = append(env, k+"="+m[k])
		}
	}
	if apiKeyEnv != "" && apiKey != "" {
		// Last: the spec's variables cannot replace the key (the last of
		// a name wins).
		env = append(env, apiKeyEnv+"="+apiKey)
	}
	return env
}

// command is the replica's executable and arguments, listening on port,
// its engine's variables, and what it reads that a sandbox must show it:
// the engine's installation and the model.
func (r *Runtime) command(spec runtime.ReplicaSpec, port int) (string, []string, map[string]string, []string, error) {
	a, err := engines.ByName(spec.Engine)
	if err != nil {
		return "", nil, nil, nil, err
	}
	l := engines.Launch{Spec: spec, Host: r.opts.Host, Port: port}
	if a.Name == engines.Sim {
		l.Binary = r.opts.Binary
		l.ExtraArgs = append(append([]string(nil), r.opts.EngineArgs...), spec.Args...)
	} else {
		inst := r.opts.Engines[a.Name]
		if l.Binary, err = a.Resolve(inst); err != nil {
			return "", nil, nil, nil, err
		}
		l.ModelPath = spec.Model
		if spec.ModelDir != "" {
			if l.ModelPath, err = a.ModelPath(spec.ModelDir); err != nil {
				return "", nil, nil, nil, err
			}
		}
		l.ExtraArgs = append(append([]string(nil), inst.Args...), spec.Args...)
	}
	var reads []string
	if a.Name != engines.Sim {
		reads = sandbox.Installation(l.Binary)
	}
	for _, m := range []string{spec.ModelDir, l.ModelPath} {
		if filepath.IsAbs(m) {
			reads = append(reads, m)
		}
	}
	return l.Binary, a.Args(l), a.Env(l), reads, nil
}

// newAPIKey makes a replica's API key: 32 random bytes, hex; "" for an
// engine that takes none (engines.Adapter.APIKeyEnv).
func newAPIKey(engine string) (string, error) {
	if engines.MustByName(engine).APIKeyEnv == "" {
		return "", nil
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("make its API key: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// Start validates spec and launches the replica's supervisor. Starting an id
// that is Stopped starts it afresh; an id that is still running is an error.
func (r *Runtime) Start(ctx context.Context, spec runtime.ReplicaSpec) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := r.validate(spec); err != nil {
		return err
	}
	if spec.Engine == "" || spec.Engine == engines.Sim {
		if _, err := os.Stat(r.opts.Binary); err != nil {
			return fmt.Errorf("replica %s: engine binary: %w", spec.ID, err)
		}
	}
	if _, err := r.prepareWorkDir(spec.ID); err != nil {
		return err
	}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return fmt.Errorf("replica %s: runtime closed", spec.ID)
	}
	if old, ok := r.reps[spec.ID]; ok && old.view.State != runtime.StateStopped {
		r.mu.Unlock()
		return fmt.Errorf("replica %s: already running", spec.ID)
	}
	key, err := newAPIKey(spec.Engine)
	if err != nil {
		r.mu.Unlock()
		return fmt.Errorf("replica %s: %w", spec.ID, err)
	}
	rep := &replica{
		spec:    spec,
		apiKey:  key,
		logPath: filepath.Join(r.opts.LogDir, spec.ID+".log"),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
	}
	rep.view = runtime.Replica{Spec: spec, APIKey: key, State: runtime.StateStarting, Message: "launching", Since: r.opts.Clock.Now()}
	r.reps[spec.ID] = rep
	r.publishLocked(rep.view)
	r.mu.Unlock()
	go r.supervise(rep)
	return nil
}

// Stop terminates the replica (SIGTERM, then SIGKILL after StopGrace) and
// returns once its process has exited or ctx is done. Unknown and already
// stopped ids are not an error.
func (r *Runtime) Stop(ctx context.Context, id string) error {
	r.mu.Lock()
	rep, ok := r.reps[id]
	r.mu.Unlock()
	if !ok {
		return nil
	}
	rep.stopOnce.Do(func() { close(rep.stop) })
	select {
	case <-rep.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("stop replica %s: %w", id, ctx.Err())
	}
}

// Get returns the replica's current view.
func (r *Runtime) Get(id string) (runtime.Replica, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rep, ok := r.reps[id]
	if !ok {
		return runtime.Replica{}, fmt.Errorf("replica %s: %w", id, runtime.ErrNotFound)
	}
	return rep.view, nil
}

// List returns every replica (Stopped ones included), sorted by id.
func (r *Runtime) List() []runtime.Replica {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]runtime.Replica, 0, len(r.reps))
	for _, rep := range r.reps {
		out = append(out, rep.view)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Spec.ID < out[j].Spec.ID })
	return out
}

// Subscribe calls fn, serialised, on every later state change until ctx is done.
func (r *Runtime) Subscribe(ctx context.Context, fn func(runtime.Replica)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var s *subscriber
	s = newSubscriber(ctx, fn, func() {
		r.mu.Lock()
		delete(r.subs, s)
		r.mu.Unlock()
	})
	r.subs[s] = struct{}{}
}

// Close stops every replica and refuses later Starts.
func (r *Runtime) Close(ctx context.Context) error {
	r.mu.Lock()
	r.closed = true
	ids := make([]string, 0, len(r.reps))
	for id := range r.reps {
		ids = append(ids, id)
	}
	r.mu.Unlock()
	errs := make(chan error, len(ids))
	for _, id := range ids {
		go func() { errs <- r.Stop(ctx, id) }()
	}
	var all []error
	for range ids {
		if err := <-errs; err != nil {
			all = append(all, err)
		}
	}
	return errors.Join(all...)
}

func (r *Runtime) publishLocked(v runtime.Replica) {
	for s := range r.subs {
		s.push(v)
	}
}

// update applies fn to the replica's view and publishes the result.
func (r *Runtime) update(rep *replica, fn func(v *runtime.Replica)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	before := rep.view.State
	fn(&rep.view)
	if rep.view.State != before {
		rep.view.Since = r.opts.Clock.Now()
	}
	r.publishLocked(rep.view)
}

func (r *Runtime) setState(rep *replica, st runtime.State, msg string) {
	r.update(rep, func(v *runtime.Replica) { v.State, v.Message = st, msg })
}

// outcome is how one process run ended.
type outcome struct {
	stopped    bool   // ended because Stop was called
	wasHealthy bool   // it reached Healthy before failing
	msg        string // why it failed
}

// supervise runs the replica until Stop, restarting it with backoff.
func (r *Runtime) supervise(rep *replica) {
	defer close(rep.done)
	log := r.log.With("replica", rep.spec.ID, "endpoint", rep.spec.Endpoint, "variant", rep.spec.Variant)
	failures := 0
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			r.update(rep, func(v *runtime.Replica) {
				v.Restarts++
				v.State, v.Message, v.Addr = runtime.StateStarting, "restarting", ""
			})
		}
		out := r.runOnce(rep, log, attempt)
		if out.stopped {
			r.setStopped(rep, log)
			log.Info("replica stopped")
			return
		}
		if out.wasHealthy {
			failures = 0
		}
		failures++
		delay := backoff(failures, r.opts.MaxBackoff)
		log.Warn("replica failed; restarting after backoff", "reason", out.msg, "backoff", delay)
		r.update(rep, func(v *runtime.Replica) {
			v.State, v.Message, v.Failures, v.LastFailure = runtime.StateFailed, out.msg, failures, out.msg
		})
		t := r.opts.Clock.NewTimer(delay)
		select {
		case <-rep.stop:
			t.Stop()
			r.setStopped(rep, log)
			return
		case <-t.C():
		}
	}
}

// setStopped removes the replica's work dir (replica ids carry a generation,
// so stopped ones would pile up) and then marks it Stopped. In that order:
// Stopped lets a Start of the same id through, which recreates the dir.
func (r *Runtime) setStopped(rep *replica, log *slog.Logger) {
	if dir, err := r.workDir(rep.spec.ID); err == nil {
		if err := os.RemoveAll(dir); err != nil {
			log.Warn("replica work dir not removed", "dir", dir, "err", err)
		}
	}
	r.update(rep, func(v *runtime.Replica) { v.State, v.Message, v.Addr = runtime.StateStopped, "stopped", "" })
}

// backoff is 100ms·2^(n-1), capped.
func backoff(n int, maxDelay time.Duration) time.Duration {
	d := initialBackoff
	for i := 1; i < n && d < maxDelay; i++ {
		d *= 2
	}
	return min(d, maxDelay)
}

// runOnce launches the process and watches it until it ends, fails, or is stopped.
func (r *Runtime) runOnce(rep *replica, log *slog.Logger, attempt int) outcome {
	logf, err := os.OpenFile(rep.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return outcome{msg: fmt.Sprintf("open log %s: %v", rep.logPath, err)}
	}
	defer logf.Close()
	a := engines.MustByName(rep.spec.Engine)
	// An engine that announces the port it bound gets port 0; the others
	// are handed a free port, taken afresh on every attempt.
	port := 0
	if !a.AnnouncesPort {
		if port, err = freePort(r.opts.Host); err != nil {
			return outcome{msg: fmt.Sprintf("no free port: %v", err)}
		}
	}
	bin, args, engineEnv, reads, err := r.command(rep.spec, port)
	if err != nil {
		return outcome{msg: err.Error()}
	}
	// Where this attempt's output begins: a failure quotes the engine's own
	// last lines from here on.
	logStart, _ := logf.Seek(0, io.SeekEnd)
	fmt.Fprintf(logf, "--- capstan: launch attempt %d at %s: %s %s\n", attempt+1,
		r.opts.Clock.Now().UTC().Format(time.RFC3339Nano), bin, strings.Join(args, " "))

	dir, err := r.prepareWorkDir(rep.spec.ID)
	if err != nil {
		return outcome{msg: err.Error()}
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return outcome{msg: fmt.Sprintf("pipe: %v", err)}
	}
	prog := sandbox.Program{Argv: append([]string{bin}, args...),
		Env: r.env(rep.spec, engineEnv, a.APIKeyEnv, rep.apiKey, dir), Dir: dir, Writable: []string{dir},
		ReadOnly: reads, Name: "replica/" + rep.spec.ID, Trusted: a.Name == engines.Sim}
	if shared := rep.spec.KVTiers.StorageDir; shared != "" && rep.spec.KVTiers.StorageBytes > 0 {
		// The node's tieredstorage store is written and evicted by every
		// replica on the node: they share it, so they share its user too.
		err = os.MkdirAll(shared, 0o755)
		prog.Writable = append(prog.Writable, shared)
		prog.Name = "tieredstorage/" + shared
	}
	var cmd *sandbox.Cmd
	if err == nil {
		cmd, err = r.opts.Sandbox.Command(prog)
	}
	if err != nil {
		pr.Close()
		pw.Close()
		return outcome{msg: fmt.Sprintf("launch %s: %v", bin, err)}
	}
	cmd.Stdout, cmd.Stderr = pw, logf
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		pr.Close()
		pw.Close()
		return outcome{msg: fmt.Sprintf("launch %s: %v (log: %s)", bin, err, rep.logPath)}
	}
	pw.Close()
	pid := cmd.Process.Pid
	signal := func(sig syscall.Signal) { sandbox.SignalGroup(pid, sig, cmd.Sandboxed) }
	log.Info("replica launched", "pid", pid, "attempt", attempt+1, "log", rep.logPath)

	announce := make(chan string, 1)
	go copyStdout(pr, logf, announce, a.AnnouncesPort)
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-rep.stop:
			cancel()
		case <-ctx.Done():
		}
	}()

	// kill ends the run: SIGTERM the group, SIGKILL after the grace period.
	kill := func(graceful bool) {
		if graceful {
			signal(syscall.SIGTERM)
			t := r.opts.Clock.NewTimer(r.opts.StopGrace)
			select {
			case <-exited:
				t.Stop()
				signal(syscall.SIGKILL) // stragglers in the group
				return
			case <-t.C():
				log.Warn("replica ignored SIGTERM; killing", "grace", r.opts.StopGrace)
			}
		}
		signal(syscall.SIGKILL)
		<-exited
	}

	// The start timeout is counted in health-check periods rather than with
	// one long timer: a dev clock jumped forward by a week fires a timer at
	// once and would kill every replica that is still loading, while a
	// ticker jumped over fires once.
	maxStartTicks := max(1, int((r.opts.StartTimeout+r.opts.HealthInterval-1)/r.opts.HealthInterval))
	startTicks := 0
	ticker := r.opts.Clock.NewTicker(r.opts.HealthInterval)
	defer func() { ticker.Stop() }()
	addr := ""
	if !a.AnnouncesPort {
		addr = net.JoinHostPort(r.opts.Host, strconv.Itoa(port))
		r.update(rep, func(v *runtime.Replica) { v.Addr, v.Message = addr, "waiting for "+a.HealthPath })
	}
	healthy := false
	fails := 0
	for {
		select {
		case <-rep.stop:
			kill(true)
			return outcome{stopped: true}
		case err := <-exited:
			signal(syscall.SIGKILL)
			msg := fmt.Sprintf("engine %s (log: %s)", exitText(err), rep.logPath)
			if last := lastLines(rep.logPath, logStart, failureLines); last != "" {
				msg = fmt.Sprintf("engine %s: %s (log: %s)", exitText(err), last, rep.logPath)
			}
			return outcome{wasHealthy: healthy, msg: msg}
		case a, ok := <-announce:
			if !ok {
				announce = nil // stdout closed; exit is reported by the exited case
				continue
			}
			addr = a
			r.update(rep, func(v *runtime.Replica) { v.Addr, v.Message = a, "waiting for /health" })
		case <-ticker.C():
			var err error = errNotAnnounced
			if addr != "" {
				err = r.check(ctx, addr, a.HealthPath)
			}
			switch {
			case err == nil && !healthy:
				healthy, fails = true, 0
				ticker.Stop()
				ticker = r.opts.Clock.NewTicker(r.opts.HealthyInterval)
				r.setState(rep, runtime.StateHealthy, "")
				log.Info("replica healthy", "addr", addr)
			case err == nil:
				fails = 0
			case ctx.Err() != nil:
				// Being stopped; the stop case handles it.
			case !healthy:
				if startTicks++; startTicks >= maxStartTicks {
					kill(false)
					return outcome{msg: fmt.Sprintf("not healthy within %v, last: %v (log: %s)", r.opts.StartTimeout, err, rep.logPath)}
				}
			default:
				fails++
				if fails >= r.opts.UnhealthyThreshold {
					kill(true)
					return outcome{wasHealthy: true, msg: fmt.Sprintf("unhealthy: %d consecutive failed health checks, last: %v (log: %s)", fails, err, rep.logPath)}
				}
			}
		}
	}
}

var errNotAnnounced = errors.New("no announce line (\"" + announcePrefix + "HOST:PORT\") on stdout yet")

// check GETs the engine's health path; only 200 counts as healthy.
func (r *Runtime) check(ctx context.Context, addr, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		return err
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s answered %d", path, resp.StatusCode)
	}
	return nil
}

// copyStdout copies the engine's stdout into its log and, for an engine
// that announces its port, sends the address from the first announce line.
func copyStdout(pr *os.File, logf *os.File, announce chan<- string, announces bool) {
	defer pr.Close()
	defer close(announce)
	sc := bufio.NewScanner(pr)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	found := !announces
	for sc.Scan() {
		line := sc.Text()
		_, _ = logf.WriteString(line + "\n")
		if !found {
			if i := strings.Index(line, announcePrefix); i >= 0 {
				found = true
				announce <- strings.TrimRight(strings.TrimSpace(line[i+len(announcePrefix):]), "/")
			}
		}
	}
	// Drain anything after a scanner error so the child never blocks on a full pipe.
	_, _ = io.Copy(logf, pr)
}

func exitText(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return "exited: " + ee.ProcessState.String()
	}
	if err == nil {
		return "exited: exit status 0"
	}
	return "wait failed: " + err.Error()
}

// failureLines is how many of the engine's last log lines a failure quotes.
const failureLines = 3

// lastLines returns the last n non-empty lines written to the log at path
// since offset, joined with " | ", reading at most 16 KiB.
func lastLines(path string, offset int64, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return ""
	}
	const window = 16 << 10
	start := max(offset, fi.Size()-window)
	b := make([]byte, fi.Size()-start)
	if _, err := f.ReadAt(b, start); err != nil && !errors.Is(err, io.EOF) {
		return ""
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "--- capstan:") {
			out = append(out, l)
		}
	}
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return strings.Join(out, " | ")
}

// freePort asks the kernel for a free TCP port on host, for an engine that
// cannot bind port 0 and say which port it got.
func freePort(host string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
