package events

import (
	"context"
	"encoding/binary"
	"reflect"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
)

// TestSubscriberGapDetection feeds a subscriber hand-made frames from a bare
// PUB socket: chosen sequence numbers on two topics, plus a malformed one.
func TestSubscriberGapDetection(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	bind, conn := tcpBind(t)
	pub := zmq4.NewPub(ctx)
	defer pub.Close()
	if err := pub.Listen(bind); err != nil {
		t.Fatal(err)
	}
	s := newSub(t, ctx, conn, "")
	send := func(topic string, seq uint64, payload []byte) {
		var b [8]byte
		binary.BigEndian.PutUint64(b[:], seq)
		if err := pub.Send(zmq4.NewMsgFrom([]byte(topic), b[:], payload)); err != nil {
			t.Fatal(err)
		}
	}
	// Slow joiner: probe on a topic of its own until one arrives.
	for {
		send("probe", 0, mustEncode(t, batchN(-1)))
		rctx, c := context.WithTimeout(ctx, 50*time.Millisecond)
		_, err := s.Recv(rctx)
		c()
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("subscription never went through")
		}
	}
	drain(ctx, s)

	feed := []struct {
		topic   string
		seq     uint64
		bad     bool
		wantGap bool
	}{
		{"a", 0, false, false},
		{"a", 1, false, false},
		{"b", 5, false, true}, // first on a topic, not from 0: missed 0..4
		{"a", 3, false, true}, // 2 lost
		{"b", 6, false, false},
		{"a", 4, true, false}, // malformed: skipped, not delivered
		{"a", 5, false, true}, // follows a skipped batch
		{"a", 6, false, false},
		{"b", 0, false, true}, // publisher restarted
	}
	var want []Message
	for _, f := range feed {
		if f.bad {
			send(f.topic, f.seq, []byte{0xc1})
			continue
		}
		b := batchN(int(f.seq))
		send(f.topic, f.seq, mustEncode(t, b))
		want = append(want, Message{Topic: f.topic, Seq: f.seq, Batch: b, Gap: f.wantGap})
	}
	got := recvN(t, ctx, s, len(want))
	for i := range want {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Fatalf("message %d:\n got %+v\nwant %+v", i, got[i], want[i])
		}
	}
	if s.Malformed() != 1 {
		t.Fatalf("Malformed = %d, want 1", s.Malformed())
	}
}

// TestReplayFillsGap loses one batch on the wire (the sender hook skips it,
// the replay buffer still has it), lets the subscriber notice the gap, and
// fills it from the replay socket.
func TestReplayFillsGap(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	bind, conn := tcpBind(t)
	rbind, rconn := tcpBind(t)
	const lost = 7 // counted from the first batch after warm-up
	var base uint64
	skip := make(chan uint64, 1)
	p := newPub(t, ctx, PublisherOptions{Endpoint: bind, ReplayEndpoint: rbind, Topic: "kv", skipSend: func(seq uint64) bool {
		select {
		case s := <-skip:
			if s == seq {
				return true
			}
			skip <- s
		default:
		}
		return false
	}})
	s := newSub(t, ctx, conn, "kv")
	warmUp(t, ctx, p, s)
	drain(ctx, s)
	// Every probe was published before this point and nothing else is in
	// flight, so the next Publish gets seq = probes published so far.
	base = p.nextSeqForTest()
	skip <- base + lost
	const n = 12
	for i := range n {
		p.Publish(batchN(i))
	}
	got := recvN(t, ctx, s, n-1)
	var gapAt int = -1
	for i, m := range got {
		if m.Gap {
			if gapAt >= 0 {
				t.Fatalf("second gap at %d", i)
			}
			gapAt = i
		}
	}
	if gapAt != lost || got[gapAt].Seq != base+lost+1 {
		t.Fatalf("gap at message %d (seq %d), want message %d with seq %d", gapAt, got[max(gapAt, 0)].Seq, lost, base+lost+1)
	}

	// The gap is [previous+1, this): ask the replay socket from its start.
	missing := got[gapAt-1].Seq + 1
	replayed, err := Replay(ctx, rconn, missing)
	if err != nil {
		t.Fatal(err)
	}
	if len(replayed) != n-lost {
		t.Fatalf("replay returned %d batches, want %d", len(replayed), n-lost)
	}
	for i, m := range replayed {
		if m.Seq != missing+uint64(i) || m.Gap {
			t.Fatalf("replayed %d: seq %d gap %v", i, m.Seq, m.Gap)
		}
		if !reflect.DeepEqual(m.Batch, batchN(lost+i)) {
			t.Fatalf("replayed %d: batch %#v, want %#v", i, m.Batch, batchN(lost+i))
		}
	}

	t.Run("start beyond buffer end returns only the end marker", func(t *testing.T) {
		out, err := Replay(ctx, rconn, base+1000)
		if err != nil || len(out) != 0 {
			t.Fatalf("Replay = %d messages, %v", len(out), err)
		}
	})
	t.Run("bounded by context when nobody answers", func(t *testing.T) {
		_, dead := tcpBind(t)
		rctx, c := context.WithTimeout(ctx, 300*time.Millisecond)
		defer c()
		if _, err := Replay(rctx, dead, 0); err == nil {
			t.Fatal("Replay from a dead endpoint succeeded")
		}
	})
}

func TestReplayBufferBounded(t *testing.T) {
	r := newRing(3)
	for i := range 5 {
		r.add(uint64(i), []byte{byte(i)})
	}
	got := r.since(0)
	var seqs []uint64
	for _, e := range got {
		seqs = append(seqs, e.seq)
	}
	if !reflect.DeepEqual(seqs, []uint64{2, 3, 4}) {
		t.Fatalf("ring kept %v, want [2 3 4]", seqs)
	}
	if got := r.since(4); len(got) != 1 || got[0].payload[0] != 4 {
		t.Fatalf("since(4) = %v", got)
	}
}

// TestPublishNeverBlocks stalls the sender goroutine and checks that Publish
// drops and counts instead of waiting, and that the drop is a visible gap.
func TestPublishNeverBlocks(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	bind, _ := tcpBind(t)
	stall := make(chan struct{})
	stalled := make(chan struct{})
	sent := make(chan uint64, 100)
	p := newPub(t, ctx, PublisherOptions{Endpoint: bind, QueueSize: 2, skipSend: func(seq uint64) bool {
		if seq == 0 {
			close(stalled)
			<-stall
		}
		sent <- seq
		return false
	}})
	p.Publish(batchN(0))
	<-stalled // the sender holds seq 0; the queue is empty
	done := make(chan struct{})
	go func() {
		defer close(done)
		// 1 and 2 fill the queue, 3..9 are dropped.
		for i := 1; i < 10; i++ {
			p.Publish(batchN(i))
		}
	}()
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatal("Publish blocked while the sender was stalled")
	}
	close(stall)
	var seqs []uint64
	for len(seqs) < 3 {
		seqs = append(seqs, <-sent)
	}
	p.Publish(batchN(10))
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	close(sent)
	for s := range sent {
		seqs = append(seqs, s)
	}
	if p.Dropped() != 7 {
		t.Fatalf("Dropped = %d, want 7", p.Dropped())
	}
	if !reflect.DeepEqual(seqs, []uint64{0, 1, 2, 10}) {
		t.Fatalf("sent seqs %v, want [0 1 2 10]: a dropped batch must use up its seq", seqs)
	}
}

func TestEndpointErrors(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	tests := []struct{ name, ep string }{
		{"empty", ""},
		{"no transport", "127.0.0.1:5557"},
		{"unknown transport", "udp://127.0.0.1:5557"},
		{"no port", "tcp://127.0.0.1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if p, err := NewPublisher(ctx, tt.ep, "", "t"); err == nil {
				_ = p.Close()
				t.Fatal("NewPublisher accepted it")
			}
			if s, err := NewSubscriber(ctx, tt.ep, ""); err == nil {
				_ = s.Close()
				t.Fatal("NewSubscriber accepted it")
			}
			if _, err := Replay(ctx, tt.ep, 0); err == nil {
				t.Fatal("Replay accepted it")
			}
		})
	}
	t.Run("bad options", func(t *testing.T) {
		bind, _ := tcpBind(t)
		for name, o := range map[string]PublisherOptions{
			"topic too long":      {Endpoint: bind, Topic: string(make([]byte, MaxTopicLen+1))},
			"queue too large":     {Endpoint: bind, QueueSize: maxBuffer + 1},
			"bad replay endpoint": {Endpoint: bind, ReplayEndpoint: "tcp://nope"},
		} {
			if p, err := NewPublisherWithOptions(ctx, o); err == nil {
				_ = p.Close()
				t.Fatalf("%s: accepted", name)
			}
		}
	})
	t.Run("port in use", func(t *testing.T) {
		bind, _ := tcpBind(t)
		p := newPub(t, ctx, PublisherOptions{Endpoint: bind})
		_ = p
		if p2, err := NewPublisher(ctx, bind, "", ""); err == nil {
			_ = p2.Close()
			t.Fatal("second bind on one port succeeded")
		}
	})
}

func TestSubscriberClose(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	_, conn := tcpBind(t)
	s, err := NewSubscriber(ctx, conn, "")
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := s.Recv(ctx)
		errc <- err
	}()
	time.Sleep(20 * time.Millisecond)
	_ = s.Close()
	select {
	case err := <-errc:
		if err != ErrClosed {
			t.Fatalf("Recv after Close: %v, want ErrClosed", err)
		}
	case <-ctx.Done():
		t.Fatal("Recv did not return after Close")
	}
}

func TestPublisherContextEnded(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	bind, _ := tcpBind(t)
	p, err := NewPublisherWithOptions(ctx, PublisherOptions{Endpoint: bind, QueueSize: 4})
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	for i := range 10 {
		p.Publish(batchN(i)) // must neither block nor panic
	}
	done := make(chan error, 1)
	go func() { done <- p.Close() }()
	select {
	case <-done:
	case <-time.After(testTimeout):
		t.Fatal("Close hung after the context ended")
	}
	if p.Dropped() != 10 {
		t.Fatalf("Dropped = %d, want 10", p.Dropped())
	}
}
