package local_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/internal/engines"
	"github.com/capstan-dev/capstan/internal/procenv"
	"github.com/capstan-dev/capstan/internal/runtime"
	"github.com/capstan-dev/capstan/internal/runtime/local"
	"github.com/capstan-dev/capstan/internal/testutil"
)

// TestReplicaGetsAllowListedEnvironment is the reproduction of a replica
// reading the server's credentials: the server's environment holds an AWS
// secret, an admin token and a loader variable, and the running engine's
// /proc/<pid>/environ must show none of them, only the allow-list and the
// spec's own variables, with HOME, TMPDIR and the working directory inside
// the replica's own directory. It runs both the stand-in engine and the
// real `capstan engine sim`.
func TestReplicaGetsAllowListedEnvironment(t *testing.T) {
	if goruntime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	const secret = "wJalrXUtnFEMI-server-secret"
	t.Setenv("AWS_SECRET_ACCESS_KEY", secret)
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDSERVER")
	t.Setenv("CAPSTAN_TOKEN", secret+"-token")
	t.Setenv("HF_TOKEN", secret+"-hf")
	t.Setenv("LD_LIBRARY_PATH", "/server/libs")
	t.Setenv("TZ", "UTC")
	tests := []struct {
		name   string
		binary func(t *testing.T) string // nil: the test binary's stand-in engine
	}{
		{name: "stand-in engine"},
		{name: "capstan engine sim", binary: func(t *testing.T) string { return testutil.CapstanBinary(t) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt, dir := newRuntime(t, func(o *local.Options) {
				if tt.binary != nil {
					o.Binary = tt.binary(t)
				}
			})
			ev := subscribe(t, rt)
			s := spec("env.AllTraffic.gen1.0")
			s.Env = map[string]string{"HF_MODEL_ID": "meta-llama/Llama-3.1-8B-Instruct", "TZ": "Europe/Paris"}
			if err := rt.Start(context.Background(), s); err != nil {
				t.Fatal(err)
			}
			healthy := ev.waitFor(t, s.ID, "Healthy", state(runtime.StateHealthy))
			if len(healthy.APIKey) != 64 {
				t.Fatalf("replica API key %q, want 32 random bytes in hex", healthy.APIKey)
			}
			home := filepath.Join(dir, s.ID)
			pid := enginePid(t)
			raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Contains(raw, []byte(secret)) || bytes.Contains(raw, []byte("AKIDSERVER")) {
				t.Fatal("the server's credentials reached the replica's environment")
			}
			got := map[string]string{}
			for _, kv := range strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00") {
				k, v, _ := strings.Cut(kv, "=")
				if _, dup := got[k]; dup {
					t.Errorf("%s set twice", k)
				}
				got[k] = v
			}
			want := map[string]string{
				"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": home, "TMPDIR": filepath.Join(home, "tmp"),
				"TZ": "Europe/Paris", "HF_MODEL_ID": "meta-llama/Llama-3.1-8B-Instruct",
				// Its own API key, by environment: never on the command line,
				// which every local user can read.
				engines.SimAPIKeyEnv: healthy.APIKey,
			}
			if cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline"); err != nil || bytes.Contains(cmdline, []byte(healthy.APIKey)) {
				t.Errorf("the API key is on the replica's command line (%v)", err)
			}
			for _, k := range []string{"LANG", "LC_ALL"} { // inherited when the test's own environment has them
				if v, ok := os.LookupEnv(k); ok {
					want[k] = v
				}
			}
			for k, v := range got {
				if want[k] != v {
					t.Errorf("replica env %s=%q, want %q (absent if empty)", k, v, want[k])
				}
			}
			for k := range want {
				if _, ok := got[k]; !ok {
					t.Errorf("replica env lacks %s", k)
				}
			}
			if cwd, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/cwd"); err != nil || cwd != home {
				t.Errorf("replica cwd %q (%v), want %s", cwd, err, home)
			}
			if err := rt.Stop(context.Background(), s.ID); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(home); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("work dir of a stopped replica: %v, want it removed", err)
			}
			if _, err := os.Stat(filepath.Join(dir, s.ID+".log")); err != nil {
				t.Errorf("log of a stopped replica: %v, want it kept", err)
			}
		})
	}
}

// enginePid finds the one running engine this test process launched: a
// child whose command line starts with "engine sim".
func enginePid(t *testing.T) int {
	t.Helper()
	me := strconv.Itoa(os.Getpid())
	deadline := time.Now().Add(10 * time.Second)
	for {
		entries, err := os.ReadDir("/proc")
		if err != nil {
			t.Fatal(err)
		}
		var found []int
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			stat, err1 := os.ReadFile("/proc/" + e.Name() + "/stat")
			cmdline, err2 := os.ReadFile("/proc/" + e.Name() + "/cmdline")
			if err1 != nil || err2 != nil {
				continue
			}
			// "pid (comm) state ppid …"; comm may hold spaces and parentheses.
			fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
			args := strings.Split(string(cmdline), "\x00")
			if len(fields) > 2 && fields[1] == me && fields[0] != "Z" && len(args) > 2 && args[1] == "engine" && args[2] == "sim" {
				found = append(found, pid)
			}
		}
		switch {
		case len(found) == 1:
			return found[0]
		case len(found) > 1:
			t.Fatalf("%d engines running (%v), want one", len(found), found)
		case time.Now().After(deadline):
			t.Fatal("no engine process found")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestStartRefusesEnvironment checks the runtime itself refuses what the
// doors refuse, so a controller that forgets to validate cannot launch an
// engine with a preloaded library or a moved HOME.
func TestStartRefusesEnvironment(t *testing.T) {
	rt, dir := newRuntime(t, nil)
	tests := []struct {
		name string
		env  map[string]string
	}{
		{"LD_PRELOAD", map[string]string{"LD_PRELOAD": "/tmp/evil.so"}},
		{"lower-case ld_preload", map[string]string{"ld_preload": "/tmp/evil.so"}},
		{"LD_LIBRARY_PATH", map[string]string{"LD_LIBRARY_PATH": "/tmp"}},
		{"GODEBUG", map[string]string{"GODEBUG": "http2debug=2"}},
		{"HOME", map[string]string{"HOME": "/root"}},
		{"PATH", map[string]string{"PATH": "/tmp"}},
		{"bad name", map[string]string{"A=B": "c"}},
		{"NUL in value", map[string]string{"A": "b\x00LD_PRELOAD=/tmp/evil.so"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := spec("refused")
			s.Env = tt.env
			err := rt.Start(context.Background(), s)
			if !errors.Is(err, procenv.ErrNotAllowed) {
				t.Fatalf("Start = %v, want procenv.ErrNotAllowed", err)
			}
		})
	}
	if _, err := rt.Get("refused"); !errors.Is(err, runtime.ErrNotFound) {
		t.Fatalf("Get after refused starts: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "refused")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused replica got a work dir: %v", err)
	}
}

// TestStartRefusesSymlinkedWorkDir: a symlink where the replica's directory
// belongs would put its HOME outside the replicas directory.
func TestStartRefusesSymlinkedWorkDir(t *testing.T) {
	rt, dir := newRuntime(t, nil)
	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(dir, "linked")); err != nil {
		t.Fatal(err)
	}
	if err := rt.Start(context.Background(), spec("linked")); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Fatalf("Start over a symlinked work dir = %v, want refusal", err)
	}
	if entries, err := os.ReadDir(outside); err != nil || len(entries) != 0 {
		t.Fatalf("the symlink's target was written to: %v %v", entries, err)
	}
}
