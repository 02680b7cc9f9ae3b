// Package sandbox runs the programs capstan starts for its users — spaces
// (a WorkspaceTemplate's command) and replicas (engines a manifest or a
// SageMaker model selects) — where they cannot reach the server: its
// environment and process tree, its config file and data directory (the
// store, every other space's home, every other replica's files), or each
// other.
//
// It uses bubblewrap (Debian's bubblewrap package), the sandbox that
// Flatpak is built on:
//
//   - a PID namespace with its own /proc: the server, its environment
//     (/proc/<pid>/environ) and every other sandbox are invisible;
//   - the host's root read-only; fresh empty /tmp, /var/tmp, /home, /root
//     and /run/user; the data directory, the config file and any other
//     hidden path replaced by an empty tmpfs or /dev/null; then only the
//     program's own directories bound back: its home writable, its binary
//     and model read-only;
//   - when capstan runs as root, the program runs under a user of its own
//     (a uid derived from its name, no capabilities, no_new_privs), so a
//     set-uid binary, root-owned files and the cgroup files stay out of its
//     reach too; otherwise it runs as the server's user in a user namespace.
//
// The network is shared: capstan reaches a replica or a space on a loopback
// port, and a space installs packages. Without bubblewrap (or where the
// kernel refuses its namespaces), programs run only when the admin opts in
// with sandbox.allowProcessesToReadServerSecrets.
package sandbox

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/procfs"
)

// ErrUnavailable: no sandbox can be used here and the admin has not opted
// in to running programs without one.
var ErrUnavailable = errors.New("no sandbox")

// searchPath is where bwrap and setpriv are looked for: never the server's
// own PATH, which may list user-writable directories.
const searchPath = "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"

// The users programs get when capstan runs as root: uidBase plus a hash of
// the program's name, below 2^31 and far above the ranges Debian gives to
// accounts (up to 60000) and to subordinate ids (from 100000, 65536 each).
const (
	uidBase = 2_000_000_000
	uidSpan = 1 << 24
)

// Always hidden: other users' and the server's own files (an AWS profile,
// an SSH agent's socket), and shared scratch space.
var scratch = []string{"/tmp", "/var/tmp", "/home", "/root", "/run/user"}

// Options configure a Sandbox.
type Options struct {
	// Bubblewrap is the bwrap binary; "" looks for it on the system path.
	// A path that is set but unusable is an error.
	Bubblewrap string
	// Hide are paths no program sees: the data directory, the config file,
	// model caches. Relative paths are taken from the working directory.
	Hide []string
	// AllowUnsandboxed lets programs run without a sandbox when none works
	// here (sandbox.allowProcessesToReadServerSecrets).
	AllowUnsandboxed bool
	Logger           *slog.Logger
}

// Sandbox starts programs in bubblewrap. The zero value is not usable; a
// nil *Sandbox runs programs unsandboxed (tests of other packages).
type Sandbox struct {
	bwrap   string // "" when none works here
	setpriv string // set when capstan runs as root
	hide    []string
	asRoot  bool
	allow   bool
	why     error // why there is no sandbox
}

// New finds bubblewrap and checks, by running it once, that this kernel
// lets it build a sandbox.
func New(o Options) (*Sandbox, error) {
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Sandbox{allow: o.AllowUnsandboxed, asRoot: os.Geteuid() == 0}
	for _, h := range o.Hide {
		if h == "" {
			continue
		}
		abs, err := filepath.Abs(h)
		if err != nil {
			return nil, fmt.Errorf("sandbox: hide %s: %w", h, err)
		}
		s.hide = append(s.hide, abs)
	}
	bwrap, err := find(o.Bubblewrap, "bwrap")
	if err == nil && s.asRoot {
		s.setpriv, err = find("", "setpriv")
	}
	if err == nil {
		err = s.probe(bwrap)
	}
	switch {
	case err == nil:
		s.bwrap = bwrap
		log.Info("programs run sandboxed", "bubblewrap", bwrap, "ownUsers", s.asRoot)
	case o.Bubblewrap != "":
		return nil, fmt.Errorf("sandbox.bubblewrap: %w", err)
	case s.allow:
		s.why = err
		log.Warn("no sandbox: spaces and engines run as the server's user and can read its environment, config and data (sandbox.allowProcessesToReadServerSecrets is set)", "why", err)
	default:
		s.why = err
		log.Warn("no sandbox: spaces and real engines will not start (install bubblewrap, or set sandbox.allowProcessesToReadServerSecrets)", "why", err)
	}
	return s, nil
}

// find is path when set, else name on searchPath.
func find(path, name string) (string, error) {
	if path != "" {
		if !executable(path) {
			return "", fmt.Errorf("%s is not an executable file", path)
		}
		return path, nil
	}
	if p, ok := LookPath(name, searchPath); ok {
		return p, nil
	}
	return "", fmt.Errorf("%s is not installed (looked in %s; Debian: apt-get install bubblewrap)", name, searchPath)
}

// LookPath finds the executable file name in the directories of path (a
// PATH-style list) rather than the environment's PATH: the programs capstan
// starts search a fixed path. A name with a slash is taken as it is.
func LookPath(name, path string) (string, bool) {
	if strings.Contains(name, "/") {
		return name, executable(name)
	}
	for _, d := range filepath.SplitList(path) {
		if p := filepath.Join(d, name); executable(p) {
			return p, true
		}
	}
	return "", false
}

func executable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// probe runs /bin/true in the sandbox every program gets.
func (s *Sandbox) probe(bwrap string) error {
	// Once, at start: the real clock is right.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bwrap, s.args(Program{Argv: []string{"/bin/true"}, Dir: "/", Name: "probe"})...)
	cmd.Env = []string{"PATH=" + searchPath}
	out, err := cmd.CombinedOutput()
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("%s did not finish a trial run in 10s", bwrap)
	case err != nil:
		return fmt.Errorf("%s cannot build a sandbox here: %v: %s", bwrap, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Available is nil when programs run sandboxed, else why they do not.
func (s *Sandbox) Available() error {
	if s == nil {
		return errors.New("no sandbox configured")
	}
	if s.bwrap == "" {
		return s.why
	}
	return nil
}

// Refuses is an error wrapping ErrUnavailable when a program that is not
// Trusted would not start: no sandbox works here and the admin has not
// opted in. A nil Sandbox refuses nothing.
func (s *Sandbox) Refuses() error {
	if s == nil || s.bwrap != "" || s.allow {
		return nil
	}
	return fmt.Errorf("%w: %v; install bubblewrap, or set sandbox.allowProcessesToReadServerSecrets in capstan.yaml to run it unconfined", ErrUnavailable, s.why)
}

// Program is one thing to run.
type Program struct {
	// Argv[0] is an absolute path.
	Argv []string
	// Env is the program's whole environment.
	Env []string
	// Dir is its working directory; it should be in Writable.
	Dir string
	// Writable are the directories it may write (its home), bound at the
	// same paths; when it runs under a user of its own they are given to
	// that user.
	Writable []string
	// ReadOnly are files and directories it reads that may be hidden (its
	// binary's installation, its model), bound read-only at the same paths.
	// Argv[0] is always bound.
	ReadOnly []string
	// Name identifies the program ("space/ns/name"); when capstan runs as
	// root it selects the program's user.
	Name string
	// Trusted programs run no user-supplied code (capstan's own simulated
	// engine): where no sandbox works they start unconfined without the
	// admin's opt-in.
	Trusted bool
}

// Cmd is a program ready to start; the caller adds output and process
// attributes.
type Cmd struct {
	*exec.Cmd
	// Sandboxed: the process started is bubblewrap, the program its
	// grandchild.
	Sandboxed bool
}

// Command prepares p: in the sandbox, or — when none works here and the
// admin opted in or p is Trusted — as a plain child. Otherwise it returns
// an error wrapping ErrUnavailable.
func (s *Sandbox) Command(p Program) (*Cmd, error) {
	if len(p.Argv) == 0 || !filepath.IsAbs(p.Argv[0]) {
		return nil, fmt.Errorf("sandbox: program %q is not an absolute path", strings.Join(p.Argv, " "))
	}
	if s == nil || s.bwrap == "" {
		if err := s.Refuses(); err != nil && !p.Trusted {
			return nil, err
		}
		cmd := exec.Command(p.Argv[0], p.Argv[1:]...)
		cmd.Dir, cmd.Env = p.Dir, p.Env
		return &Cmd{Cmd: cmd}, nil
	}
	if s.asRoot {
		uid := UID(p.Name)
		for _, w := range p.Writable {
			if err := chownTree(w, uid); err != nil {
				return nil, fmt.Errorf("sandbox: give %s to uid %d: %w", w, uid, err)
			}
		}
		p.Env = withUser(p.Env)
	}
	cmd := exec.Command(s.bwrap, s.args(p)...)
	cmd.Env = p.Env
	return &Cmd{Cmd: cmd, Sandboxed: true}, nil
}

// UID is the user a program named name runs as when capstan runs as root.
// Two names may share one (a 2^-24 chance per pair); each still sees only
// its own directories.
func UID(name string) int {
	h := fnv.New32a()
	h.Write([]byte(name))
	return uidBase + int(h.Sum32()%uidSpan)
}

// withUser names the user for programs that ask (getpass, shells): the
// uid has no /etc/passwd entry.
func withUser(env []string) []string {
	out := slices.Clone(env)
	for _, k := range []string{"USER", "LOGNAME"} {
		if !slices.ContainsFunc(env, func(e string) bool { return strings.HasPrefix(e, k+"=") }) {
			out = append(out, k+"=capstan")
		}
	}
	return out
}

// args is bwrap's command line for p.
func (s *Sandbox) args(p Program) []string {
	a := []string{"--die-with-parent", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"}
	if !s.asRoot {
		a = append(a, "--unshare-user")
	}
	a = append(a, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc")
	// GPUs: the devices exist only where the driver is; CUDA_VISIBLE_DEVICES
	// still picks among them.
	gpus, _ := filepath.Glob("/dev/nvidia*")
	for _, d := range gpus {
		a = append(a, "--dev-bind-try", d, d)
	}
	var mounts []mount
	for _, d := range scratch {
		if fi, err := os.Stat(d); err == nil && fi.IsDir() {
			mounts = append(mounts, mount{kind: "--tmpfs", dst: d})
		}
	}
	for _, h := range s.hide {
		fi, err := os.Stat(h)
		switch {
		case err != nil:
			continue // nothing there to hide
		case fi.IsDir():
			mounts = append(mounts, mount{kind: "--tmpfs", dst: h})
		default:
			mounts = append(mounts, mount{kind: "--ro-bind", src: "/dev/null", dst: h})
		}
	}
	shown := append(slices.Clone(p.Writable), p.ReadOnly...)
	shown = append(shown, p.Argv[0], p.Dir)
	if s.asRoot {
		// A directory the program's user may not search (a 0700 parent of
		// the data directory, a test's temporary directory) would keep it
		// from its own files: put an empty tmpfs there, in which bwrap
		// makes the path's directories afresh.
		for _, d := range unsearchable(shown, mounts) {
			mounts = append(mounts, mount{kind: "--tmpfs", dst: d})
		}
	}
	for _, r := range p.ReadOnly {
		r = filepath.Clean(r)
		mounts = append(mounts, mount{kind: "--ro-bind-try", src: r, dst: r})
	}
	if target, err := os.Readlink(p.Argv[0]); err == nil {
		// bwrap can neither bind onto a symbolic link of the read-only
		// root (/usr/local/bin/code-server → its npm package) nor make one
		// where it exists: the host's link is seen as it is, unless a
		// tmpfs hides it; then the same link is made there. What it points
		// to is shown through ReadOnly.
		if underTmpfs(mounts, p.Argv[0]) {
			mounts = append(mounts, mount{kind: "--symlink", src: target, dst: p.Argv[0]})
		}
	} else {
		mounts = append(mounts, mount{kind: "--ro-bind-try", src: p.Argv[0], dst: p.Argv[0]})
	}
	for _, w := range p.Writable {
		w = filepath.Clean(w)
		mounts = append(mounts, mount{kind: "--bind", src: w, dst: w})
	}
	mounts = append(mounts, parents(mounts)...)
	// Parents before children, and of one path, the later-listed (writable)
	// bind last: bwrap mounts in order, each over what is there.
	slices.SortStableFunc(mounts, func(x, y mount) int { return depth(x.dst) - depth(y.dst) })
	for _, m := range mounts {
		if m.perms != "" {
			a = append(a, "--perms", m.perms)
		}
		a = append(a, m.kind)
		if m.src != "" {
			a = append(a, m.src)
		}
		a = append(a, m.dst)
	}
	if p.Dir != "" {
		a = append(a, "--chdir", p.Dir)
	}
	a = append(a, "--")
	if s.asRoot {
		uid := strconv.Itoa(UID(p.Name))
		a = append(a, s.setpriv, "--reuid", uid, "--regid", uid, "--clear-groups", "--no-new-privs",
			"--inh-caps=-all", "--bounding-set=-all", "--")
	}
	return append(a, p.Argv...)
}

type mount struct{ kind, src, dst, perms string }

// parents are the directories bwrap must make inside a tmpfs on the way to
// each mount: it would make them 0700, which a program of another user
// cannot search; these are 0755 (and empty: nothing of the host shows).
func parents(mounts []mount) []mount {
	var out []mount
	seen := map[string]bool{}
	for _, m := range mounts {
		for d := filepath.Dir(m.dst); d != "/" && !seen[d]; d = filepath.Dir(d) {
			if c := cover(mounts, d); c == nil || c.kind != "--tmpfs" || c.dst == d {
				break
			}
			seen[d] = true
			out = append(out, mount{kind: "--dir", dst: d, perms: "0755"})
		}
	}
	return out
}

// cover is the deepest mount that holds p (p itself included), if any.
func cover(mounts []mount, p string) *mount {
	var best *mount
	for i := range mounts {
		if within(p, mounts[i].dst) && (best == nil || depth(mounts[i].dst) > depth(best.dst)) {
			best = &mounts[i]
		}
	}
	return best
}

func depth(p string) int { return strings.Count(filepath.Clean(p), "/") }

// unsearchable are the directories on the way to paths that only their
// owner (or group) may search and that no tmpfs in mounts already covers.
func unsearchable(paths []string, mounts []mount) []string {
	covered := func(d string) bool {
		for _, m := range mounts {
			if m.kind == "--tmpfs" && within(d, m.dst) {
				return true
			}
		}
		return false
	}
	var out []string
	for _, p := range paths {
		if p == "" {
			continue
		}
		for d := filepath.Dir(filepath.Clean(p)); d != "/"; d = filepath.Dir(d) {
			fi, err := os.Stat(d)
			if err != nil || fi.Mode().Perm()&0o001 != 0 || covered(d) {
				continue
			}
			// The outermost one wins: it covers what lies under it.
			out = slices.DeleteFunc(out, func(o string) bool { return within(o, d) })
			if !slices.ContainsFunc(out, func(o string) bool { return within(d, o) }) {
				out = append(out, d)
			}
		}
	}
	return out
}

// within: p is dir or under it.
func within(p, dir string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && filepath.IsLocal(rel) || rel == "."
}

// chownTree gives dir and what it holds to uid (as its group too), unless
// dir already belongs to it. Symlinks are changed, never followed.
func chownTree(dir string, uid int) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) == uid {
		return nil
	}
	return filepath.WalkDir(dir, func(path string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(path, uid, uid)
	})
}

// SignalGroup sends sig to the process group pgid that cmd started. A
// sandbox's bubblewrap ends at once on SIGTERM and takes the program with
// it (it runs with --die-with-parent), so a graceful signal skips it: the
// program gets the signal, and its sandbox ends when it exits.
func (c *Cmd) SignalGroup(sig syscall.Signal) {
	if c == nil || c.Process == nil {
		return
	}
	SignalGroup(c.Process.Pid, sig, c.Sandboxed)
}

// SignalGroup is Cmd.SignalGroup for a group whose leader's pid is known;
// sandboxed says whether the leader is bubblewrap.
func SignalGroup(pgid int, sig syscall.Signal, sandboxed bool) {
	if !sandboxed || sig == syscall.SIGKILL {
		_ = syscall.Kill(-pgid, sig)
		return
	}
	for _, pid := range groupMembers(pgid) {
		if pid != pgid {
			_ = syscall.Kill(pid, sig)
		}
	}
}

// groupMembers are the processes in process group pgid, from /proc.
func groupMembers(pgid int) []int {
	procs, err := procfs.AllProcs()
	if err != nil {
		return nil
	}
	var out []int
	for _, p := range procs {
		if st, err := p.Stat(); err == nil && st.PGRP == pgid {
			out = append(out, p.PID)
		}
	}
	return out
}

// underTmpfs reports whether path lies under one of mounts' tmpfs.
func underTmpfs(mounts []mount, path string) bool {
	for _, m := range mounts {
		if m.kind == "--tmpfs" && strings.HasPrefix(path, strings.TrimSuffix(m.dst, "/")+"/") {
			return true
		}
	}
	return false
}

// Installation is what a sandbox must show for bin to run: the binary
// (symlinks followed) and the directory it sits in — the prefix above a
// bin/ directory, since a Python virtualenv's lib/ sits beside its bin/.
// The system's own directories are visible anyway and are left out.
func Installation(bin string) []string {
	real, err := filepath.EvalSymlinks(bin)
	if err != nil {
		return nil
	}
	dir := filepath.Dir(real)
	if filepath.Base(dir) == "bin" {
		dir = filepath.Dir(dir)
	}
	switch dir {
	case "/", "/usr", "/usr/local", "/opt":
		return []string{real}
	}
	return []string{real, dir}
}
