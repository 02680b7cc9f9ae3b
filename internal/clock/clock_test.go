package clock

import (
	"context"
	"testing"
	"time"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestFakeTimerFiresOnlyWhenStepped(t *testing.T) {
	f := NewFake(epoch)
	tm := f.NewTimer(10 * time.Second)
	f.Step(9 * time.Second)
	select {
	case <-tm.C():
		t.Fatal("timer fired early")
	default:
	}
	f.Step(time.Second)
	select {
	case got := <-tm.C():
		if !got.Equal(epoch.Add(10 * time.Second)) {
			t.Fatalf("fired at %v", got)
		}
	default:
		t.Fatal("timer did not fire")
	}
	if f.Waiters() != 0 {
		t.Fatalf("waiters = %d", f.Waiters())
	}
}

func TestFakeTickerAndStop(t *testing.T) {
	f := NewFake(epoch)
	tk := f.NewTicker(time.Minute)
	for i := 1; i <= 3; i++ {
		f.Step(time.Minute)
		select {
		case got := <-tk.C():
			if want := epoch.Add(time.Duration(i) * time.Minute); !got.Equal(want) {
				t.Fatalf("tick %d at %v, want %v", i, got, want)
			}
		default:
			t.Fatalf("tick %d missing", i)
		}
	}
	tk.Stop()
	f.Step(time.Hour)
	select {
	case <-tk.C():
		t.Fatal("stopped ticker ticked")
	default:
	}
}

func TestFakeSleepWithBlockUntil(t *testing.T) {
	f := NewFake(epoch)
	done := make(chan error)
	go func() { done <- Sleep(context.Background(), f, time.Hour) }()
	f.BlockUntil(1)
	f.Step(time.Hour)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestDevAdvanceFiresTimer(t *testing.T) {
	d := NewDev()
	before := d.Now()
	tm := d.NewTimer(168 * time.Hour)
	d.Advance(169 * time.Hour)
	select {
	case <-tm.C():
	case <-time.After(5 * time.Second):
		t.Fatal("advanced dev clock did not fire timer")
	}
	if got := d.Now().Sub(before); got < 169*time.Hour {
		t.Fatalf("dev clock moved only %v", got)
	}
	if tm.Stop() {
		t.Fatal("Stop after fire reported pending")
	}
}
