package events

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"

	"github.com/capstan-dev/capstan/internal/testutil"
)

// testTimeout bounds every network test; generous because the CI machine is
// small and shared, never a performance assertion.
const testTimeout = 20 * time.Second

func tcpBind(t *testing.T) (bind, connect string) {
	port := testutil.FreePort(t)
	return fmt.Sprintf("tcp://*:%d", port), fmt.Sprintf("tcp://127.0.0.1:%d", port)
}

func newPub(t *testing.T, ctx context.Context, o PublisherOptions) *Publisher {
	t.Helper()
	p, err := NewPublisherWithOptions(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func newSub(t *testing.T, ctx context.Context, endpoint, prefix string) *Subscriber {
	t.Helper()
	s, err := NewSubscriber(ctx, endpoint, prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func batchN(i int) Batch {
	return Batch{TS: float64(i), Events: []Event{BlockStored{
		BlockHashes: []uint64{uint64(i) + 100}, TokenIDs: []uint32{uint32(i)}, BlockSize: 1, Medium: MediumGPU,
	}}}
}

// warmUp works around ZMQ's slow joiner: a PUB drops messages until the
// SUB's subscription has arrived, so publish probes until one is received.
// It returns the first message received.
func warmUp(t *testing.T, ctx context.Context, p *Publisher, s *Subscriber) Message {
	t.Helper()
	for i := 0; ; i++ {
		p.Publish(batchN(-1))
		rctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		m, err := s.Recv(rctx)
		cancel()
		if err == nil {
			return m
		}
		if ctx.Err() != nil {
			t.Fatalf("no message after %d probes: %v", i, ctx.Err())
		}
	}
}

// drain reads until no message arrives for a short while (the probes still
// in flight after warmUp).
func drain(ctx context.Context, s *Subscriber) []Message {
	var out []Message
	for {
		rctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		m, err := s.Recv(rctx)
		cancel()
		if err != nil {
			return out
		}
		out = append(out, m)
	}
}

// recvN returns the next n messages, skipping warm-up probes that arrive
// late on a loaded machine (probes have TS -1 or topic "probe"; ZMQ keeps
// order per connection, so they can only come before the test's data).
func recvN(t *testing.T, ctx context.Context, s *Subscriber, n int) []Message {
	t.Helper()
	out := make([]Message, 0, n)
	for len(out) < n {
		m, err := s.Recv(ctx)
		if err != nil {
			t.Fatalf("after %d of %d messages: %v", len(out), n, err)
		}
		if m.Batch.TS == -1 || m.Topic == "probe" {
			if len(out) > 0 {
				t.Fatalf("probe after data message %d", len(out))
			}
			continue
		}
		out = append(out, m)
	}
	return out
}

func TestPubSub(t *testing.T) {
	tests := []struct {
		name string
		// collector: the subscriber binds and the publisher connects.
		collector bool
	}{
		{name: "publisher binds"},
		{name: "central collector", collector: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			bind, conn := tcpBind(t)
			pubEP, subEP := bind, conn
			if tt.collector {
				pubEP, subEP = conn, bind
			}
			var p *Publisher
			var s *Subscriber
			if tt.collector {
				s = newSub(t, ctx, subEP, "kv@")
				p = newPub(t, ctx, PublisherOptions{Endpoint: pubEP, Topic: "kv@10.0.0.1@llama"})
			} else {
				p = newPub(t, ctx, PublisherOptions{Endpoint: pubEP, Topic: "kv@10.0.0.1@llama"})
				s = newSub(t, ctx, subEP, "kv@")
			}
			first := warmUp(t, ctx, p, s)
			if first.Topic != "kv@10.0.0.1@llama" {
				t.Fatalf("topic %q", first.Topic)
			}
			drain(ctx, s)
			for i := range 50 {
				p.Publish(batchN(i))
			}
			got := recvN(t, ctx, s, 50)
			for i, m := range got {
				if m.Gap {
					t.Fatalf("message %d (seq %d) flagged as gap", i, m.Seq)
				}
				if i > 0 && m.Seq != got[i-1].Seq+1 {
					t.Fatalf("seq %d after %d", m.Seq, got[i-1].Seq)
				}
				if !reflect.DeepEqual(m.Batch, batchN(i)) {
					t.Fatalf("message %d batch %#v", i, m.Batch)
				}
			}
			if p.Dropped() != 0 {
				t.Fatalf("dropped %d", p.Dropped())
			}
		})
	}
}

// TestSeqStartsAtZero reads the raw frames with a bare zmq4 SUB, so the test
// checks the wire framing, not our own subscriber.
func TestRawFraming(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	bind, conn := tcpBind(t)
	p := newPub(t, ctx, PublisherOptions{Endpoint: bind, Topic: "t1"})
	sub := zmq4.NewSub(ctx)
	defer sub.Close()
	if err := sub.SetOption(zmq4.OptionSubscribe, ""); err != nil {
		t.Fatal(err)
	}
	if err := sub.Dial(conn); err != nil {
		t.Fatal(err)
	}
	msgs := make(chan zmq4.Msg, 100)
	go func() {
		for ctx.Err() == nil {
			m, err := sub.Recv()
			if err != nil || ctx.Err() != nil {
				return
			}
			msgs <- m
		}
	}()
	// Probe until the subscription is through.
	var m zmq4.Msg
probe:
	for {
		p.Publish(batchN(0))
		select {
		case m = <-msgs:
			break probe
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
			t.Fatal("nothing received")
		}
	}
	if len(m.Frames) != 3 {
		t.Fatalf("%d frames, want 3", len(m.Frames))
	}
	if string(m.Frames[0]) != "t1" {
		t.Fatalf("topic frame %q", m.Frames[0])
	}
	if len(m.Frames[1]) != 8 {
		t.Fatalf("seq frame is %d bytes", len(m.Frames[1]))
	}
	want, _ := Encode(batchN(0))
	if !reflect.DeepEqual(m.Frames[2], want) {
		t.Fatalf("payload % x, want % x", m.Frames[2], want)
	}
	// Sequence numbers count every Publish from 0: the first probe that got
	// through carries seq = number of probes before it, and the next one is
	// exactly one more, big-endian.
	seq0 := m.Frames[1]
	p.Publish(batchN(1))
	var m2 zmq4.Msg
	for {
		select {
		case m2 = <-msgs:
		case <-ctx.Done():
			t.Fatal("second message lost")
		}
		if reflect.DeepEqual(m2.Frames[2], mustEncode(t, batchN(1))) {
			break
		}
		seq0 = m2.Frames[1] // a late probe
	}
	a, b := beU64(seq0), beU64(m2.Frames[1])
	if b != a+1 {
		t.Fatalf("seq %d after %d (frames % x, % x)", b, a, seq0, m2.Frames[1])
	}
}

func mustEncode(t *testing.T, b Batch) []byte {
	t.Helper()
	raw, err := Encode(b)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func beU64(b []byte) uint64 {
	var v uint64
	for _, x := range b {
		v = v<<8 | uint64(x)
	}
	return v
}

func TestFirstSeqIsZero(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	bind, _ := tcpBind(t)
	var mu sync.Mutex
	var sent []uint64
	p, err := NewPublisherWithOptions(ctx, PublisherOptions{Endpoint: bind, skipSend: func(seq uint64) bool {
		mu.Lock()
		sent = append(sent, seq)
		mu.Unlock()
		return false
	}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		p.Publish(batchN(i))
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !reflect.DeepEqual(sent, []uint64{0, 1, 2}) {
		t.Fatalf("sequence numbers %v, want [0 1 2]", sent)
	}
	p.Publish(batchN(3))
	if p.Dropped() != 1 {
		t.Fatalf("Publish after Close: Dropped = %d, want 1", p.Dropped())
	}
}
