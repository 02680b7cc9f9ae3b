//go:build linux

// Package chaos is the chaos and soak test of `capstan serve`: real server and
// engine processes under continuous load and control-plane writes, killed
// with SIGKILL at random, then checked for lost writes, stuck resources,
// orphan processes and failures outside the kill windows. See the "Chaos and
// soak" section of docs/reliability.md.
package chaos

import (
	"context"
	"flag"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	flagDuration = flag.Duration("chaos.duration", 40*time.Second, "length of the chaos phase (the short form runs in the test command)")
	flagSeed     = flag.Uint64("chaos.seed", 0, "seed of the random choices; 0 picks one from the clock (it is logged)")
	flagKill     = flag.Duration("chaos.kill-interval", 2*time.Second, "shortest pause between kills; each pause is drawn from [d, 2.5d)")
	flagLog      = flag.String("chaos.log", "", "copy the server log (every restart) to this file at the end")
	flagSettle   = flag.Duration("chaos.settle", 90*time.Second, "bound for every endpoint and deployment to reach a steady state after the chaos phase")
)

const (
	loadWorkers = 3
	// loadSM is created through the SageMaker API, loadJSM through the
	// manifests API; both take the load through both doors.
	loadSM  = "chaos-sm"
	loadJSM = "chaos-jsm"
	// recoverBound bounds the wait for the load endpoints to serve again
	// after a kill; past it the window closes and later failures count.
	recoverBound = 60 * time.Second
	// minWindow is the shortest kill window: the runtime sees a replica
	// exit at once and the controller takes it out of the route.
	minWindow = time.Second
)

func TestChaos(t *testing.T) {
	seed := *flagSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("chaos: seed=%d duration=%v (rerun with -chaos.seed=%d)", seed, *flagDuration, seed)

	bin := capstanBinary(t)
	srv := newServer(t, bin, t.TempDir())
	if err := srv.start(); err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, srv: srv, c: newClients(srv), j: newJournal(), w: newWrites()}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	h.setup(ctx)

	// The chaos phase: load, writes and kills until the deadline.
	until := time.Now().Add(*flagDuration)
	var wg sync.WaitGroup
	for i := range loadWorkers {
		wg.Go(func() { h.load(ctx, rand.New(rand.NewPCG(seed, uint64(i+1))), until) })
	}
	wg.Go(func() { h.writer(ctx, rand.New(rand.NewPCG(seed, 100)), until) })
	orphanN := h.killer(ctx, rand.New(rand.NewPCG(seed, 200)), until)
	wg.Wait()

	// The quiet phase: converge, check, stop.
	if srv.url() == "" {
		if err := srv.start(); err != nil {
			t.Fatal(err)
		}
	}
	stuck := h.settle(ctx, *flagSettle)
	h.finalRequests(ctx)
	lost := h.checkWrites(ctx)
	orphanN += h.strayEngines(ctx)
	pid := srv.pid()
	if !srv.stop(60 * time.Second) {
		t.Errorf("capstan serve (pid %d) did not exit within 60s of SIGTERM", pid)
	}
	if left := orphans(ctx, srv.dataDir, 0, 10*time.Second); len(left) > 0 {
		t.Errorf("after SIGTERM of the server: engine processes left %+v", left)
		orphanN += len(left)
	}

	leaked := leakedFiles(t, srv.dataDir)

	outside := h.j.outsideWindows()
	for i, f := range outside {
		if i == 20 {
			t.Logf("… %d more", len(outside)-i)
			break
		}
		t.Logf("failed outside a kill window: %s [%s–%s]: %v", f.what, f.start.Format("15:04:05.000"), f.end.Format("15:04:05.000"), f.err)
	}
	h.j.mu.Lock()
	kills, acked, ok, failed, ops := h.j.kills, h.j.acked, h.j.ok, len(h.j.failures), h.j.ops
	for _, w := range h.j.windows {
		t.Logf("kill window %s: %s–%s", w.what, w.start.Format("15:04:05.000"), w.end.Format("15:04:05.000"))
	}
	h.j.mu.Unlock()
	t.Logf("requests: %d ok, %d failed (all but %d inside kill windows); control-plane calls by outcome: %v",
		ok, failed, len(outside), ops)
	line := fmt.Sprintf("chaos: kills=%d acknowledged=%d lost=%d stuck=%d orphans=%d leaked_files=%d failed_outside_kill_window=%d",
		kills, acked, lost, stuck, orphanN, len(leaked), len(outside))
	fmt.Println(line)
	if lost != 0 || stuck != 0 || orphanN != 0 || len(leaked) != 0 || len(outside) != 0 {
		t.Errorf("%s (seed %d)", line, seed)
	}
	if kills == 0 || acked == 0 || ok == 0 {
		t.Errorf("the chaos phase did too little to prove anything: %s, %d requests ok", line, ok)
	}
}

type harness struct {
	t   *testing.T
	srv *server
	c   *clients
	j   *journal
	w   *writes
}

// load sends requests through both doors to both load endpoints until the deadline.
// send makes one request to ep through door ("chat", "chat-stream" or
// "invoke"), records it in the journal under prefix+door+" "+ep and returns
// its error.
func (h *harness) send(ctx context.Context, ep, door, prefix string) error {
	start := time.Now()
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var err error
	switch door {
	case "chat":
		err = h.c.chat(rctx, ep, false)
	case "chat-stream":
		err = h.c.chat(rctx, ep, true)
	default:
		err = h.c.invoke(rctx, ep)
	}
	h.j.request(prefix+door+" "+ep, start, err)
	return err
}

func (h *harness) load(ctx context.Context, rng *rand.Rand, until time.Time) {
	for ctx.Err() == nil && time.Now().Before(until) {
		ep := []string{loadSM, loadJSM}[rng.IntN(2)]
		door := []string{"chat", "chat-stream", "invoke"}[rng.IntN(3)]
		err := h.send(ctx, ep, door, "")
		pause := time.Duration(10+rng.IntN(40)) * time.Millisecond
		if err != nil {
			pause = 100 * time.Millisecond
		}
		sleep(ctx, pause)
	}
}

// killer kills the server or one engine at random until the deadline and
// returns the orphan engines it found after server kills.
func (h *harness) killer(ctx context.Context, rng *rand.Rand, until time.Time) int {
	orphanN := 0
	for ctx.Err() == nil {
		sleep(ctx, *flagKill+time.Duration(rng.Int64N(int64(*flagKill)*3/2)))
		if time.Now().After(until) || ctx.Err() != nil {
			return orphanN
		}
		if k := rng.IntN(10); k < 4 {
			what := "server"
			if k >= 2 {
				// Right after an acknowledged write: mid-create, mid-update.
				t := time.NewTimer(3 * time.Second)
				select {
				case ep := <-h.w.acked:
					what = "server after a write to " + ep
				case <-t.C:
				case <-ctx.Done():
				}
				t.Stop()
			}
			start := time.Now()
			h.srv.kill()
			// No server is live: every engine of our data dir must die with it.
			if left := orphans(ctx, h.srv.dataDir, 0, 5*time.Second); len(left) > 0 {
				h.t.Errorf("after kill -9 of the server: engine processes left %+v", left)
				orphanN += len(left)
				for _, e := range left {
					_ = syscall.Kill(e.pid, syscall.SIGKILL)
				}
			}
			if err := h.srv.start(); err != nil {
				h.t.Errorf("restart after kill -9: %v", err)
				return orphanN
			}
			h.j.kill(what, start, h.recovered(ctx, start))
			continue
		}
		pid := h.srv.pid()
		var mine []engine
		for _, e := range engines(h.srv.dataDir) {
			if e.ppid == pid {
				mine = append(mine, e)
			}
		}
		if pid == 0 || len(mine) == 0 {
			continue
		}
		e := mine[rng.IntN(len(mine))]
		start := time.Now()
		_ = syscall.Kill(e.pid, syscall.SIGKILL)
		h.j.kill(fmt.Sprintf("replica pid %d", e.pid), start, h.recovered(ctx, start))
	}
	return orphanN
}

// recovered returns when the kill window that began at start closes: once
// both load endpoints answer again, at least minWindow after the kill, plus
// a second for the route to settle.
func (h *harness) recovered(ctx context.Context, start time.Time) time.Time {
	deadline := start.Add(recoverBound)
	for _, ep := range []string{loadSM, loadJSM} {
		for time.Now().Before(deadline) && ctx.Err() == nil {
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			err := h.c.chat(rctx, ep, false)
			cancel()
			if err == nil {
				break
			}
			sleep(ctx, 100*time.Millisecond)
		}
	}
	end := time.Now()
	if end.After(deadline) {
		h.t.Logf("load endpoints did not answer within %v of the kill at %s", recoverBound, start.Format("15:04:05.000"))
		end = deadline
	}
	if end.Before(start.Add(minWindow)) {
		end = start.Add(minWindow)
	}
	return end.Add(time.Second)
}

// finalRequests sends a few requests through every door in the quiet phase.
func (h *harness) finalRequests(ctx context.Context) {
	for _, ep := range []string{loadSM, loadJSM} {
		for range 3 {
			for _, door := range []string{"chat", "chat-stream", "invoke"} {
				_ = h.send(ctx, ep, door, "quiet ")
			}
		}
	}
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// leakedFiles are what a stopped server should not have left in its data
// dir, however often it and its replicas were killed: a replica's work
// directory (removed when the replica stops; only its log stays) and a
// fetch's or extraction's .capstan-part-* leftover.
func leakedFiles(t *testing.T, dataDir string) []string {
	var out []string
	ents, _ := os.ReadDir(filepath.Join(dataDir, "replicas"))
	for _, e := range ents {
		if e.IsDir() {
			out = append(out, filepath.Join("replicas", e.Name()))
		}
	}
	_ = filepath.WalkDir(dataDir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), ".capstan-part-") {
			rel, _ := filepath.Rel(dataDir, p)
			out = append(out, rel)
		}
		return nil
	})
	for i, f := range out {
		if i == 20 {
			t.Logf("… %d more", len(out)-i)
			break
		}
		t.Logf("left in the data dir: %s", f)
	}
	return out
}
