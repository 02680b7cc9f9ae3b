// Package procenv decides which environment variables a client (a HyperPod
// manifest's environmentVariables, a space's env) may hand to a process
// capstan starts. It is the one deny-list: the manifest and workspace
// validators refuse these names at the door with a field path, and the local
// runtime refuses them again before it launches anything (defence in depth),
// so neither can drift from the other.
//
// A name is refused when it changes how a process is loaded or how its
// language runtime behaves, rather than what the program computes, or when
// capstan sets it:
//
//   - the dynamic loader and libc: LD_*, DYLD_*, GCONV_PATH, GETCONF_DIR,
//     GLIBC_TUNABLES, LOCPATH, NLSPATH, TZDIR (they load a shared library,
//     module or data file of the caller's choosing into the process, or
//     retune libc);
//   - libc's allocator: MALLOC_* (MALLOC_CHECK_, MALLOC_PERTURB_,
//     MALLOC_TRACE, …: they retune it, fill freed memory with a pattern, or
//     write a trace file where the caller says);
//   - libc's resolver: HOSTALIASES, RESOLV_HOST_CONF, RES_OPTIONS,
//     LOCALDOMAIN, NIS_PATH (name lookups then read a hosts file or options
//     of the caller's choosing, so a host the process contacts may resolve
//     elsewhere);
//   - the Go runtime of the engine: GODEBUG, GOTRACEBACK, GOGC, GOMEMLIMIT,
//     GOMAXPROCS, GORACE, GOCOVERDIR (they switch runtime behaviour, turn off
//     garbage collection, write core dumps or coverage files; the engine's
//     runtime is capstan's to tune, not a manifest's);
//   - what the runtime itself sets: PATH, HOME, TMPDIR (a client value would
//     undo the replica's confinement to its own directory) and CAPSTAN_*
//     (capstan's own variables, such as a space's CAPSTAN_SPACE_TOKEN; a
//     client value must not pass for capstan's);
//   - shells and interpreters: BASH_ENV, ENV, SHELLOPTS, BASHOPTS, PS4, IFS,
//     CDPATH, PYTHONPATH, PYTHONHOME, PYTHONSTARTUP, PYTHONUSERBASE,
//     PYTHONBREAKPOINT, PYTHONINSPECT, NODE_OPTIONS, NODE_PATH, PERL5OPT,
//     PERL5LIB, PERLLIB, RUBYOPT, RUBYLIB, JAVA_TOOL_OPTIONS, _JAVA_OPTIONS,
//     JDK_JAVA_OPTIONS (they run or load code at start-up; today's engine runs
//     none of these, an engine that wraps a real server would).
//
// The libc names cover glibc's own list of variables it drops before it runs
// a set-uid program (unsecvars.h), plus the allocator's.
//
// Matching ignores case, so ld_preload is refused too. Every other valid name
// passes through unchanged.
package procenv

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
)

// Limits on what a client may set. MaxVars matches SageMaker's limit on a
// container's Environment map and the manifest validator's list limit.
const (
	MaxVars       = 100
	MaxNameBytes  = 1024
	MaxValueBytes = 4096
)

// ErrNotAllowed is wrapped by every refusal, so callers can tell a refused
// environment from other start failures.
var ErrNotAllowed = errors.New("environment variable not allowed")

var reName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

var deniedPrefixes = []struct{ prefix, why string }{
	{"LD_", "it steers the dynamic loader into loading other code"},
	{"DYLD_", "it steers the dynamic loader into loading other code"},
	{"MALLOC_", "it retunes or traces libc's memory allocator"},
	{"CAPSTAN_", "capstan sets CAPSTAN_* variables itself"},
}

var deniedNames = func() map[string]string {
	m := map[string]string{}
	add := func(why string, names ...string) {
		for _, n := range names {
			m[n] = why
		}
	}
	add("it makes libc load modules or files of the caller's choosing, or retune itself",
		"GCONV_PATH", "GETCONF_DIR", "GLIBC_TUNABLES", "LOCPATH", "NLSPATH", "TZDIR")
	add("it points libc's name resolution at files or options of the caller's choosing",
		"HOSTALIASES", "RESOLV_HOST_CONF", "RES_OPTIONS", "LOCALDOMAIN", "NIS_PATH")
	add("it changes the engine's Go runtime, which capstan tunes",
		"GODEBUG", "GOTRACEBACK", "GOGC", "GOMEMLIMIT", "GOMAXPROCS", "GORACE", "GOCOVERDIR")
	add("the runtime sets it to confine the replica", "PATH", "HOME", "TMPDIR")
	add("it makes a shell or interpreter run code at start-up",
		"BASH_ENV", "ENV", "SHELLOPTS", "BASHOPTS", "PS4", "IFS", "CDPATH",
		"PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONUSERBASE", "PYTHONBREAKPOINT", "PYTHONINSPECT",
		"NODE_OPTIONS", "NODE_PATH", "PERL5OPT", "PERL5LIB", "PERLLIB", "RUBYOPT", "RUBYLIB",
		"JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS")
	return m
}()

// CheckName reports why name may not be set for an engine process, or nil.
func CheckName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: empty name", ErrNotAllowed)
	case len(name) > MaxNameBytes:
		return fmt.Errorf("%w: name longer than %d bytes", ErrNotAllowed, MaxNameBytes)
	case !reName.MatchString(name):
		return fmt.Errorf("%w: %q is not a variable name ([A-Za-z_][A-Za-z0-9_]*)", ErrNotAllowed, name)
	}
	up := strings.ToUpper(name)
	if why, ok := deniedNames[up]; ok {
		return fmt.Errorf("%w: %s: %s", ErrNotAllowed, name, why)
	}
	for _, d := range deniedPrefixes {
		if strings.HasPrefix(up, d.prefix) {
			return fmt.Errorf("%w: %s: %s", ErrNotAllowed, name, d.why)
		}
	}
	return nil
}

// CheckValue reports why value cannot be an environment value, or nil.
func CheckValue(value string) error {
	switch {
	case len(value) > MaxValueBytes:
		return fmt.Errorf("%w: value longer than %d bytes", ErrNotAllowed, MaxValueBytes)
	case strings.IndexByte(value, 0) >= 0:
		return fmt.Errorf("%w: value contains a NUL byte", ErrNotAllowed)
	}
	return nil
}

// Check validates a whole client environment: its size, every name and
// every value.
func Check(env map[string]string) error {
	if len(env) > MaxVars {
		return fmt.Errorf("%w: %d variables, at most %d", ErrNotAllowed, len(env), MaxVars)
	}
	var errs []error
	for _, k := range slices.Sorted(maps.Keys(env)) {
		v := env[k]
		if err := CheckName(k); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := CheckValue(v); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", k, err))
		}
	}
	return errors.Join(errs...)
}
