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

	"github.com/capstan-dev/capstan/internal/procenv"
	"github.com/capstan-dev/capstan/internal/runtime"
)

// TestReplicaGetsAllowListedEnvironment is the reproduction of a replica
// reading the server's credentials: the server's environment holds an AWS
// secret, an admin token and a loader variable, and the running engine's
// /proc/<pid>/environ must show none of them, only the allow-list and the
// spec's own variables, with HOME, TMPDIR and the working directory inside
// the replica's own directory.
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
	rt, dir := newRuntime(t, nil)
	ev := subscribe(t, rt)
	pidfile := filepath.Join(t.TempDir(), "pid")
	s := spec("env.AllTraffic.gen1.0")
	s.Env = map[string]string{"HELPER_PIDFILE": pidfile, "HF_MODEL_ID": "meta-llama/Llama-3.1-8B-Instruct", "TZ": "Europe/Paris"}
	if err := rt.Start(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	ev.waitFor(t, s.ID, "Healthy", state(runtime.StateHealthy))
	pid := readPid(t, pidfile)
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
	home := filepath.Join(dir, s.ID)
	want := map[string]string{
		"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": home, "TMPDIR": filepath.Join(home, "tmp"),
		"TZ": "Europe/Paris", "HELPER_PIDFILE": pidfile, "HF_MODEL_ID": "meta-llama/Llama-3.1-8B-Instruct",
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
}
