package spaces

import (
	"errors"
	"testing"
)

func TestExpand(t *testing.T) {
	env := map[string]string{"CAPSTAN_SPACE_PORT": "8888", "HOME": "/h"}
	for _, tc := range []struct{ in, want string }{
		{"--port=$(CAPSTAN_SPACE_PORT)", "--port=8888"},
		{"$(HOME)/x:$(HOME)", "/h/x:/h"},
		{"$$(HOME)", "$(HOME)"},
		{"$(UNKNOWN)", "$(UNKNOWN)"},
		{"cost $5", "cost $5"},
		{"$(HOME", "$(HOME"},
		{"trailing $", "trailing $"},
		{"", ""},
	} {
		if got := expand(tc.in, env); got != tc.want {
			t.Errorf("expand(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestLookPath(t *testing.T) {
	if p, err := lookPath("sh"); err != nil || p == "" {
		t.Errorf("lookPath(sh) = %q, %v", p, err)
	}
	for _, prog := range []string{"no-such-program-capstan", "bin/sh", "/no/such/file", "/etc/passwd"} {
		if _, err := lookPath(prog); !errors.Is(err, ErrProgramNotFound) {
			t.Errorf("lookPath(%q): %v, want ErrProgramNotFound", prog, err)
		}
	}
}
