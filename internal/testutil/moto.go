package testutil

import (
	"bytes"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// StartMotoS3 runs moto's standalone server (a real S3-compatible HTTP
// server) on a free port for the duration of the test and returns its
// endpoint URL. It uses `moto_server`, or `python3 -m moto.server` when that
// is not on PATH.
func StartMotoS3(t testing.TB) string {
	t.Helper()
	port := FreePort(t)
	args := []string{"-H", "127.0.0.1", "-p", strconv.Itoa(port)}
	var cmd *exec.Cmd
	if p, err := exec.LookPath("moto_server"); err == nil {
		cmd = exec.Command(p, args...)
	} else {
		cmd = exec.Command("python3", append([]string{"-m", "moto.server"}, args...)...)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting moto S3 server (pip install 'moto[server]'): %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	})
	addr := "127.0.0.1:" + strconv.Itoa(port)
	select {
	case <-done:
		t.Fatalf("moto server exited at once:\n%s", out.String())
	default:
	}
	WaitTCP(t, addr, 30*time.Second)
	return "http://" + addr
}
