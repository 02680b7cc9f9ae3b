package store

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

type pair struct {
	Seq  int
	Data string
}

// TestKill9NeverLeavesHalfWrites runs a writer in a child process (this test
// binary, re-executed), kills it with SIGKILL mid-stream, and checks that every
// stored value decodes and that the two records each transaction writes
// together are never seen apart.
func TestKill9NeverLeavesHalfWrites(t *testing.T) {
	if path := os.Getenv("CAPSTAN_STORE_CRASH_WRITER"); path != "" {
		crashWriter(path)
		return
	}
	path := filepath.Join(t.TempDir(), "crash.db")
	cmd := exec.Command(os.Args[0], "-test.run=^TestKill9NeverLeavesHalfWrites$")
	cmd.Env = append(os.Environ(), "CAPSTAN_STORE_CRASH_WRITER="+path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Wait until the writer has committed something, then kill it mid-stream.
	buf := make([]byte, 64)
	if _, err := out.Read(buf); err != nil {
		t.Fatalf("writer printed nothing: %v", err)
	}
	time.Sleep(100 * time.Millisecond)
	_ = cmd.Process.Kill()
	_ = cmd.Wait()

	s, err := Open(path, time.Second)
	if err != nil {
		t.Fatalf("reopen after kill -9: %v", err)
	}
	defer s.Close()
	err = s.View(func(tx *Tx) error {
		var a, b pair
		if _, err := tx.Get("a", "x", &a); err != nil {
			return err
		}
		if _, err := tx.Get("b", "x", &b); err != nil {
			return err
		}
		if a.Seq == 0 || a.Seq != b.Seq {
			return fmt.Errorf("records written in one transaction disagree: a=%d b=%d", a.Seq, b.Seq)
		}
		return tx.Each("log", func(name string, raw []byte) error {
			var p pair
			if err := json.Unmarshal(raw, &p); err != nil {
				return fmt.Errorf("log/%s does not decode: %w", name, err)
			}
			if p.Seq > a.Seq {
				return fmt.Errorf("log/%s has seq %d beyond the last committed %d", name, p.Seq, a.Seq)
			}
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
}

func crashWriter(path string) {
	s, err := Open(path, time.Second)
	if err != nil {
		os.Exit(2)
	}
	data := string(make([]byte, 4096))
	for i := 1; ; i++ {
		err := s.Update(func(tx *Tx) error {
			p := pair{Seq: i, Data: data}
			if err := tx.Put("a", "x", p); err != nil {
				return err
			}
			if err := tx.Put("log", strconv.Itoa(i), p); err != nil {
				return err
			}
			return tx.Put("b", "x", p)
		})
		if err != nil {
			os.Exit(3)
		}
		if i == 1 {
			fmt.Println("committed")
		}
	}
}
