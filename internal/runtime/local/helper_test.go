package local_test

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/internal/runtime"
	"github.com/capstan-dev/capstan/internal/runtime/local"
	"github.com/capstan-dev/capstan/internal/sandbox"
)

// TestMain turns the test binary into a stand-in engine when it is run as
// `<test binary> engine sim …`: it mimics the `capstan engine sim` contract
// (announce line, /health 503→200, SIGTERM exit) plus test-only faults.
func TestMain(m *testing.M) {
	if len(os.Args) > 2 && os.Args[1] == "engine" && os.Args[2] == "sim" {
		os.Exit(fakeEngine(os.Args[3:]))
	}
	if len(os.Args) > 3 && os.Args[1] == "runtime-parent-sandboxed" {
		os.Exit(runtimeParentSandboxed(os.Args[2], os.Args[3]))
	}
	if len(os.Args) > 2 && os.Args[1] == "runtime-parent" {
		os.Exit(runtimeParent(os.Args[2]))
	}
	os.Exit(m.Run())
}

// runtimeParent plays capstan: it starts one replica through the local
// runtime (its pid lands in pidfile) and then waits to be killed.
func runtimeParent(pidfile string) int {
	exe, _ := os.Executable()
	rt, err := local.New(local.Options{Binary: exe, LogDir: filepath.Dir(pidfile)})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	err = rt.Start(context.Background(), runtime.ReplicaSpec{ID: "orphan", Model: "llama-3.1-8b", GPU: "h100",
		Env: map[string]string{"HELPER_PIDFILE": pidfile}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	select {}
}

// runtimeParentSandboxed plays capstan with a sandbox: it starts one
// replica marked with HELPER_MARK=mark (its pid inside the sandbox means
// nothing outside it; the mark finds it) and waits to be killed.
func runtimeParentSandboxed(dir, mark string) int {
	exe, _ := os.Executable()
	sb, err := sandbox.New(sandbox.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	rt, err := local.New(local.Options{Binary: exe, LogDir: dir, Sandbox: sb})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	err = rt.Start(context.Background(), runtime.ReplicaSpec{ID: "orphan", Model: "llama-3.1-8b", GPU: "h100",
		Env: map[string]string{"HELPER_MARK": mark}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	select {}
}

func fakeEngine(args []string) int {
	fs := flag.NewFlagSet("sim", flag.ContinueOnError)
	host := fs.String("host", "127.0.0.1", "")
	port := fs.Int("port", 0, "")
	fs.String("model", "", "")
	fs.String("gpu", "", "")
	fs.Int("tensor-parallel", 1, "")
	fs.String("mig-profile", "", "")
	served := fs.String("served-model-name", "", "")
	fs.Float64("time-scale", 1, "")
	startup := fs.Duration("startup-delay", 0, "503 on /health for this long")
	exitAfter := fs.Duration("exit-after", 0, "exit with --exit-code after this long")
	exitCode := fs.Int("exit-code", 3, "")
	unhealthyAfter := fs.Duration("unhealthy-after", 0, "/health answers 500 after this long")
	ignoreTerm := fs.Bool("ignore-sigterm", false, "")
	noAnnounce := fs.Bool("no-announce", false, "never print the announce line")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if p := os.Getenv("HELPER_PIDFILE"); p != "" {
		_ = os.WriteFile(p, []byte(strconv.Itoa(os.Getpid())), 0o644)
	}
	fmt.Fprintf(os.Stderr, "helper engine args=%q served=%q\n", args, *served)
	begin := time.Now()
	l, err := net.Listen("tcp", net.JoinHostPort(*host, strconv.Itoa(*port)))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/health", func(w http.ResponseWriter, r *http.Request) {
		age := time.Since(begin)
		switch {
		case age < *startup:
			w.WriteHeader(http.StatusServiceUnavailable)
		case *unhealthyAfter > 0 && age > *unhealthyAfter:
			w.WriteHeader(http.StatusInternalServerError)
		default:
			w.WriteHeader(http.StatusOK)
		}
	})
	mux.HandleFunc("/invocations", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `[{"generated_text":"pid %d env %s"}]`, os.Getpid(), os.Getenv("HELPER_ENV"))
	})
	// What a replica can see: its user, the processes in its /proc, and
	// each file HELPER_READ names (what a hostile engine would try).
	mux.HandleFunc("/view", func(w http.ResponseWriter, r *http.Request) {
		procs, _ := filepath.Glob("/proc/[0-9]*")
		fmt.Fprintf(w, "uid=%d procs=%d\n", os.Getuid(), len(procs))
		for _, p := range filepath.SplitList(os.Getenv("HELPER_READ")) {
			b, err := os.ReadFile(p)
			fmt.Fprintf(w, "read %s: %q %v\n", p, b, err)
		}
	})
	go func() { _ = http.Serve(l, mux) }()
	if !*noAnnounce {
		fmt.Printf("listening on http://%s\n", l.Addr())
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	var exitC <-chan time.Time
	if *exitAfter > 0 {
		exitC = time.After(*exitAfter)
	}
	for {
		select {
		case <-sig:
			if *ignoreTerm {
				fmt.Fprintln(os.Stderr, "ignoring SIGTERM")
				continue
			}
			fmt.Fprintln(os.Stderr, "helper engine: SIGTERM, exiting")
			return 0
		case <-exitC:
			fmt.Fprintln(os.Stderr, "helper engine crashing on purpose")
			return *exitCode
		case <-context.Background().Done():
		}
	}
}
