package observability

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs (go test -update rewrites it); got:\n%s", path, got)
	}
}

func TestConfigGolden(t *testing.T) {
	tests := []struct {
		golden string
		o      ConfigOptions
	}{
		{"prometheus.yml", ConfigOptions{Server: "http://127.0.0.1:8080", RuleFiles: []string{"/data/capstan-rules.yml"}}},
		{"prometheus-token.yml", ConfigOptions{Server: "https://capstan.internal:8443/", TokenFile: "/data/admin-token",
			RuleFiles: []string{"/data/capstan-rules.yml"}, ScrapeInterval: 15 * time.Second}},
	}
	for _, tc := range tests {
		t.Run(tc.golden, func(t *testing.T) {
			b, err := Config(tc.o)
			if err != nil {
				t.Fatal(err)
			}
			golden(t, tc.golden, b)
		})
	}
}

func TestConfigRefusesBadInput(t *testing.T) {
	tests := []struct {
		name string
		o    ConfigOptions
		want string
	}{
		{"no scheme", ConfigOptions{Server: "127.0.0.1:8080"}, "want http://host:port"},
		{"ftp", ConfigOptions{Server: "ftp://h:1"}, "want http://host:port"},
		{"path", ConfigOptions{Server: "http://h:1/x"}, "without a path"},
		{"query", ConfigOptions{Server: "http://h:1?a=b"}, "without a path"},
		{"sub-second interval", ConfigOptions{Server: "http://h:1", ScrapeInterval: 100 * time.Millisecond}, "at least 1s"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Config(tc.o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// Setup writes the rules capstan generates, the token only into a 0600
// file (never into the config), and removes a token file left by an
// earlier run with a token.
func TestSetupWrite(t *testing.T) {
	dir := t.TempDir()
	path, err := Setup{Dir: dir, Server: "http://127.0.0.1:8080", Token: "s3cret"}.Write()
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ := os.ReadFile(path)
	if bytes.Contains(cfg, []byte("s3cret")) || !bytes.Contains(cfg, []byte("credentials_file: "+filepath.Join(dir, TokenName))) {
		t.Fatalf("config:\n%s", cfg)
	}
	st, err := os.Stat(filepath.Join(dir, TokenName))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("token file: %v %v", st, err)
	}
	if rules, _ := os.ReadFile(filepath.Join(dir, RulesName)); !bytes.Contains(rules, []byte("CapstanTTFTBudgetBurnPage")) {
		t.Fatalf("rules file:\n%s", rules)
	}
	if _, err := (Setup{Dir: dir, Server: "http://127.0.0.1:8080"}).Write(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, TokenName)); !os.IsNotExist(err) {
		t.Fatalf("token file left behind: %v", err)
	}
	if cfg, _ := os.ReadFile(path); bytes.Contains(cfg, []byte("authorization")) {
		t.Fatalf("config without a token still authorizes:\n%s", cfg)
	}
}

func TestEnvIsAllowListed(t *testing.T) {
	env := map[string]string{"PATH": "/usr/bin", "HOME": "/h", "AWS_SECRET_ACCESS_KEY": "x", "CAPSTAN_TOKEN": "t", "LD_PRELOAD": "/evil.so"}
	got := Env(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if strings.Join(got, " ") != "PATH=/usr/bin HOME=/h" {
		t.Fatalf("env = %v", got)
	}
}

func TestResolveListen(t *testing.T) {
	if got, err := resolveListen("127.0.0.1:9090"); err != nil || got != "127.0.0.1:9090" {
		t.Fatalf("%q %v", got, err)
	}
	got, err := resolveListen("127.0.0.1:0")
	if err != nil || !strings.HasPrefix(got, "127.0.0.1:") || got == "127.0.0.1:0" {
		t.Fatalf("port 0: %q %v", got, err)
	}
	if _, err := resolveListen("9090"); err == nil || !strings.Contains(err.Error(), "want host:port") {
		t.Fatalf("no host: %v", err)
	}
}
