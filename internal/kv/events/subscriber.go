package events

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zeromq/zmq4"
)

// ErrClosed is returned by Recv after Close.
var ErrClosed = errors.New("events: subscriber closed")

// MaxReplayMessages bounds one Replay answer.
const MaxReplayMessages = 1 << 20

// maxTopics bounds the per-topic sequence state a subscriber keeps; past it
// the state is forgotten (the next message of each topic may then be
// reported as a gap), so a flood of topics cannot grow memory without end.
const maxTopics = 1 << 16

// Message is one received batch. Gap is true when Seq is not the previous
// sequence number on the same topic plus one, i.e. batches were lost in
// between (or the publisher restarted); the first message on a topic is a gap
// unless its Seq is 0. A malformed batch is skipped and makes the next
// message on its topic a gap.
type Message struct {
	Topic string
	Seq   uint64
	Batch Batch
	Gap   bool
}

// Subscriber connects a SUB socket (or binds one, for an endpoint with "*":
// central-collector mode, where many publishers connect in), filters by topic
// prefix, decodes batches, and detects gaps per topic: in collector mode each
// publisher numbers its own batches from 0.
type Subscriber struct {
	sock   zmq4.Socket
	log    *slog.Logger
	msgs   chan Message
	done   chan struct{} // closed when the reader goroutine exits
	cancel context.CancelFunc
	once   sync.Once

	malformed atomic.Uint64
}

// NewSubscriber subscribes to endpoint with the topic prefix filter ("" for
// every topic). A connecting subscriber retries in the background until the
// publisher appears.
func NewSubscriber(ctx context.Context, endpoint, topicPrefix string) (*Subscriber, error) {
	if err := checkEndpoint(endpoint); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	var opts []zmq4.Option
	if !binds(endpoint) {
		opts = dialOptions()
	}
	s := &Subscriber{
		sock:   zmq4.NewSub(ctx, opts...),
		log:    slog.Default().With("component", "kv-events-subscriber", "endpoint", endpoint),
		msgs:   make(chan Message, 1024),
		done:   make(chan struct{}),
		cancel: cancel,
	}
	// Subscribe before attaching, so every connection learns the filter.
	if err := s.sock.SetOption(zmq4.OptionSubscribe, topicPrefix); err != nil {
		cancel()
		_ = s.sock.Close()
		return nil, fmt.Errorf("events: subscribe: %w", err)
	}
	if err := attach(ctx, s.sock, endpoint, "", s.log); err != nil {
		cancel()
		_ = s.sock.Close()
		return nil, err
	}
	go s.read(ctx)
	return s, nil
}

// Addr is the bound address in collector mode ("" when connecting).
func (s *Subscriber) Addr() string {
	if a := s.sock.Addr(); a != nil {
		return a.String()
	}
	return ""
}

// Malformed counts received messages that were not valid KV event batches.
func (s *Subscriber) Malformed() uint64 { return s.malformed.Load() }

// Recv returns the next batch, blocking until one arrives, ctx ends, or the
// subscriber is closed (ErrClosed).
func (s *Subscriber) Recv(ctx context.Context) (Message, error) {
	select {
	case m := <-s.msgs:
		return m, nil
	case <-ctx.Done():
		return Message{}, ctx.Err()
	case <-s.done:
		// Drain what was read before closing.
		select {
		case m := <-s.msgs:
			return m, nil
		default:
			return Message{}, ErrClosed
		}
	}
}

// Close stops the subscriber.
func (s *Subscriber) Close() error {
	var err error
	s.once.Do(func() {
		s.cancel()
		err = s.sock.Close()
		<-s.done
	})
	return err
}

func (s *Subscriber) read(ctx context.Context) {
	defer close(s.done)
	// last holds, per topic, the previous sequence number plus one; a topic
	// whose previous message was malformed is forced to report a gap.
	type state struct {
		next   uint64
		broken bool
	}
	last := make(map[string]state)
	for {
		msg, err := s.sock.Recv()
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			// One per lost connection (a publisher went away); the socket
			// drops it and, when connecting, redials.
			s.log.Info("kv events: connection lost", "err", err)
			continue
		}
		if len(msg.Frames) != 3 || len(msg.Frames[1]) != 8 {
			s.malformed.Add(1)
			s.log.Warn("kv events: message is not [topic, seq, payload]", "frames", len(msg.Frames))
			continue
		}
		topic := string(msg.Frames[0])
		seq := binary.BigEndian.Uint64(msg.Frames[1])
		prev, seen := last[topic]
		gap := seq != prev.next || prev.broken || (!seen && seq != 0)
		b, err := Decode(msg.Frames[2])
		if err != nil {
			s.malformed.Add(1)
			s.log.Warn("kv events: bad payload", "topic", topic, "seq", seq, "err", err)
			last[topic] = state{next: seq + 1, broken: true}
			continue
		}
		if !seen && len(last) >= maxTopics {
			clear(last)
		}
		last[topic] = state{next: seq + 1}
		select {
		case s.msgs <- Message{Topic: topic, Seq: seq, Batch: b, Gap: gap}:
		case <-ctx.Done():
			return
		}
	}
}

// Replay asks a publisher's replay endpoint for its buffered batches from
// startSeq on and returns them in order (Topic is empty: replay does not
// carry it; Gap marks a hole inside the answer, the first message is never
// one). Bound it with ctx.
func Replay(ctx context.Context, replayEndpoint string, startSeq uint64) ([]Message, error) {
	if err := checkEndpoint(replayEndpoint); err != nil {
		return nil, err
	}
	if binds(replayEndpoint) {
		return nil, fmt.Errorf("events: replay endpoint %q must be an address to connect to, not a bind pattern", replayEndpoint)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sock := zmq4.NewDealer(ctx, zmq4.WithDialerRetry(50*time.Millisecond), zmq4.WithDialerMaxRetries(-1))
	defer sock.Close()
	if err := sock.Dial(replayEndpoint); err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("events: replay connect %s: %w", replayEndpoint, ctx.Err())
		}
		return nil, fmt.Errorf("events: replay connect %s: %w", replayEndpoint, err)
	}
	if err := sock.Send(zmq4.NewMsgFrom(nil, seqBytes(startSeq))); err != nil {
		return nil, fmt.Errorf("events: replay request: %w", err)
	}
	var out []Message
	for {
		msg, err := sock.Recv()
		if ctx.Err() != nil {
			return nil, fmt.Errorf("events: replay from %s: %w", replayEndpoint, ctx.Err())
		}
		if err != nil {
			return nil, fmt.Errorf("events: replay recv: %w", err)
		}
		f := msg.Frames
		if len(f) == 3 && len(f[0]) == 0 {
			f = f[1:]
		}
		if len(f) != 2 || len(f[0]) != 8 {
			return nil, fmt.Errorf("%w: replay message with %d frames", ErrMalformed, len(msg.Frames))
		}
		if [8]byte(f[0]) == endSeq {
			return out, nil
		}
		if len(out) >= MaxReplayMessages {
			return nil, fmt.Errorf("events: replay answer longer than %d batches", MaxReplayMessages)
		}
		seq := binary.BigEndian.Uint64(f[0])
		b, err := Decode(f[1])
		if err != nil {
			return nil, fmt.Errorf("replay seq %d: %w", seq, err)
		}
		gap := len(out) > 0 && seq != out[len(out)-1].Seq+1
		out = append(out, Message{Seq: seq, Batch: b, Gap: gap})
	}
}
