package server

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/internal/testutil"
)

// TestServeRefusesUnsafeOrBadConfig: the binary exits with a clear error
// before listening.
func TestServeRefusesUnsafeOrBadConfig(t *testing.T) {
	bin := testutil.CapstanBinary(t)
	dir := t.TempDir()
	badYAML := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(badYAML, []byte("listen: 127.0.0.1:0\nfleet: {ml.nope: {a: 1}}\nbogus: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"non-loopback without credentials", []string{"--listen", "0.0.0.0:0"}, []string{"listen:", "--insecure-listen-any"}},
		{"unknown config field", []string{"--config", badYAML}, []string{"bogus"}},
		{"bad time scale", []string{"--listen", "127.0.0.1:0", "--engine-time-scale", "-1"}, []string{"engine.timeScale"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"serve", "--data-dir", filepath.Join(dir, tc.name)}, tc.args...)
			out, err := exec.Command(bin, args...).CombinedOutput()
			if err == nil {
				t.Fatalf("serve succeeded: %s", out)
			}
			for _, w := range tc.want {
				if !strings.Contains(string(out), w) {
					t.Fatalf("output %q does not mention %q", out, w)
				}
			}
		})
	}
}

func TestClockCommand(t *testing.T) {
	bin := testutil.CapstanBinary(t)
	dev := startServe(t, filepath.Join(t.TempDir(), "dev"), "--dev-clock")
	out, err := exec.Command(bin, "clock", "advance", "168h", "--server", dev.url).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "offset 168h0m0s") {
		t.Fatalf("clock advance: %v %s", err, out)
	}
	t.Setenv("CAPSTAN_SERVER", dev.url)
	out, err = exec.Command(bin, "clock", "now").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "offset 168h0m0s") {
		t.Fatalf("clock now via CAPSTAN_SERVER: %v %s", err, out)
	}
	plain := startServe(t, filepath.Join(t.TempDir(), "plain"))
	out, err = exec.Command(bin, "clock", "advance", "1h", "--server", plain.url).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--dev-clock") {
		t.Fatalf("clock on a server without --dev-clock: %v %s", err, out)
	}
}

// With adminTokens configured, `capstan clock` needs one (--token or
// CAPSTAN_TOKEN); an API key does not do, and the refusal names the field.
func TestClockCommandSendsAdminToken(t *testing.T) {
	bin := testutil.CapstanBinary(t)
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "capstan.yaml")
	if err := os.WriteFile(cfgPath, []byte("devClock: true\napiKeys: ["+testAPIKey+"]\nadminTokens: ["+testAdmin+"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := startServe(t, filepath.Join(dir, "data"), "--config", cfgPath)
	tests := []struct {
		name  string
		args  []string
		env   string
		okOut string // "" = must fail
	}{
		{"no token", nil, "", ""},
		{"api key", []string{"--token", testAPIKey}, "", ""},
		{"flag", []string{"--token", testAdmin}, "", "offset 1h0m0s"},
		{"env", nil, testAdmin, "offset 2h0m0s"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(bin, append([]string{"clock", "advance", "1h", "--server", srv.url}, tc.args...)...)
			cmd.Env = append(os.Environ(), "CAPSTAN_TOKEN="+tc.env)
			out, err := cmd.CombinedOutput()
			if tc.okOut == "" {
				if err == nil || !strings.Contains(string(out), "adminTokens") {
					t.Fatalf("advance without the admin token: %v %s", err, out)
				}
				return
			}
			if err != nil || !strings.Contains(string(out), tc.okOut) {
				t.Fatalf("advance: %v %s", err, out)
			}
		})
	}
}

// TestGetAgesByTheServersClock: `capstan get` measures AGE by the server's
// clock, so what `capstan clock advance` ages shows its age, not the 0s the
// CLI machine's wall clock would give.
func TestGetAgesByTheServersClock(t *testing.T) {
	bin := testutil.CapstanBinary(t)
	dir := t.TempDir()
	dev := startServe(t, filepath.Join(dir, "data"), "--dev-clock")
	run := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(bin, append(args, "--server", dev.url)...).CombinedOutput()
		if err != nil {
			t.Fatalf("capstan %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	// On a type the default cluster has no group of: it stays pending, and
	// starts nothing.
	jsm := filepath.Join(dir, "jsm.yaml")
	if err := os.WriteFile(jsm, []byte(clusterJSM("aged", "ml-cluster", "ml.g6.12xlarge")), 0o644); err != nil {
		t.Fatal(err)
	}
	run("apply", "-f", jsm)
	run("clock", "advance", "48h")
	// AGE is the last column of both tables.
	age := func(table, name string) string {
		t.Helper()
		lines := strings.Split(strings.TrimSpace(table), "\n")
		if f := strings.Fields(lines[0]); f[len(f)-1] != "AGE" {
			t.Fatalf("AGE is not the last column:\n%s", table)
		}
		for _, l := range lines[1:] {
			if f := strings.Fields(l); f[0] == name {
				return f[len(f)-1]
			}
		}
		t.Fatalf("no %s row in:\n%s", name, table)
		return ""
	}
	for _, tc := range []struct{ args []string }{{[]string{"get", "jsm"}}, {[]string{"get", "clusters"}}} {
		name := "aged"
		if tc.args[1] == "clusters" {
			name = "ml-cluster"
		}
		if got := age(run(tc.args...), name); got != "2d" {
			t.Errorf("capstan %s: %s AGE %s, want 2d (48h by the server's clock)", strings.Join(tc.args, " "), name, got)
		}
	}
}
