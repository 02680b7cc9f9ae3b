package events

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/go-zeromq/zmq4"
)

// Publisher defaults, after vLLM's KVEventsConfig where it has one.
const (
	DefaultQueueSize   = 10000  // batches waiting for the sender goroutine
	DefaultBufferSteps = 10000  // batches kept for replay (vLLM buffer_steps)
	DefaultHWM         = 100000 // ZMQ send high-water mark (vLLM hwm)

	// MaxTopicLen bounds the topic, which travels in every message.
	MaxTopicLen = 1024
	// maxBuffer bounds the queue, replay buffer and HWM, which are
	// allocated or may fill up front.
	maxBuffer = 1 << 22
)

// PublisherOptions configures NewPublisherWithOptions. Zero values take the
// defaults.
type PublisherOptions struct {
	Endpoint string // "tcp://*:5557" binds; anything without "*" connects
	// BindHost, when set, is the interface a binding Endpoint listens on
	// instead of every interface ("127.0.0.1": loopback only).
	BindHost       string
	ReplayEndpoint string // optional ROUTER endpoint for replay (always binds)
	Topic          string
	QueueSize      int
	BufferSteps    int
	HWM            int
	Logger         *slog.Logger

	// skipSend, set only by this package's tests, makes the sender leave a
	// sequence number off the PUB socket (still buffering it for replay), as
	// a lossy network would; it may also block to stall the sender.
	skipSend func(seq uint64) bool
}

// Publisher sends KV event batches on a ZMQ PUB socket in vLLM's wire format.
// Publish never blocks: batches go through a bounded queue to one sender
// goroutine, and when the queue is full the batch is dropped, counted, and
// its sequence number skipped, so subscribers see the loss as a gap.
type Publisher struct {
	topic []byte
	log   *slog.Logger
	pub   zmq4.Socket
	rep   zmq4.Socket // nil without a replay endpoint

	mu      sync.Mutex // orders sequence assignment with enqueueing
	nextSeq uint64
	closed  bool
	queue   chan queued

	dropped atomic.Uint64
	ring    *ring

	senderDone chan struct{}
	replayDone chan struct{}
	cancel     context.CancelFunc

	skipSend func(seq uint64) bool // see PublisherOptions.skipSend
}

type queued struct {
	seq   uint64
	batch Batch
}

// NewPublisher starts a publisher with default options. See
// PublisherOptions for the endpoint rules.
func NewPublisher(ctx context.Context, endpoint, replayEndpoint, topic string) (*Publisher, error) {
	return NewPublisherWithOptions(ctx, PublisherOptions{Endpoint: endpoint, ReplayEndpoint: replayEndpoint, Topic: topic})
}

// NewPublisherWithOptions starts a publisher. ctx bounds the sockets' life;
// Close releases them.
func NewPublisherWithOptions(ctx context.Context, o PublisherOptions) (*Publisher, error) {
	if err := checkEndpoint(o.Endpoint); err != nil {
		return nil, err
	}
	if o.ReplayEndpoint != "" {
		if err := checkEndpoint(o.ReplayEndpoint); err != nil {
			return nil, fmt.Errorf("replay: %w", err)
		}
	}
	if len(o.Topic) > MaxTopicLen {
		return nil, fmt.Errorf("events: topic longer than %d bytes", MaxTopicLen)
	}
	if o.QueueSize > maxBuffer || o.BufferSteps > maxBuffer || o.HWM > maxBuffer {
		return nil, fmt.Errorf("events: queue size, buffer steps and hwm must be at most %d", maxBuffer)
	}
	if o.QueueSize <= 0 {
		o.QueueSize = DefaultQueueSize
	}
	if o.BufferSteps <= 0 {
		o.BufferSteps = DefaultBufferSteps
	}
	if o.HWM <= 0 {
		o.HWM = DefaultHWM
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	ctx, cancel := context.WithCancel(ctx)
	p := &Publisher{
		topic:      []byte(o.Topic),
		log:        o.Logger.With("component", "kv-events-publisher", "topic", o.Topic),
		queue:      make(chan queued, o.QueueSize),
		ring:       newRing(o.BufferSteps),
		senderDone: make(chan struct{}),
		replayDone: make(chan struct{}),
		cancel:     cancel,
		skipSend:   o.skipSend,
	}
	var opts []zmq4.Option
	if !binds(o.Endpoint) {
		opts = dialOptions()
	}
	p.pub = zmq4.NewPub(ctx, opts...)
	if err := p.pub.SetOption(zmq4.OptionHWM, o.HWM); err != nil {
		cancel()
		_ = p.pub.Close()
		return nil, fmt.Errorf("events: set hwm: %w", err)
	}
	if err := attach(ctx, p.pub, o.Endpoint, o.BindHost, p.log); err != nil {
		cancel()
		_ = p.pub.Close()
		return nil, err
	}
	if o.ReplayEndpoint != "" {
		p.rep = zmq4.NewRouter(ctx)
		if err := p.rep.Listen(o.ReplayEndpoint); err != nil {
			cancel()
			_ = p.pub.Close()
			_ = p.rep.Close()
			return nil, fmt.Errorf("events: bind replay %s: %w", o.ReplayEndpoint, err)
		}
		go p.serveReplay(ctx)
	} else {
		close(p.replayDone)
	}
	go p.send(ctx)
	return p, nil
}

// Publish queues b under the next sequence number and returns at once. If
// the queue is full or the publisher is closed, b is dropped and counted.
func (p *Publisher) Publish(b Batch) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		p.dropped.Add(1)
		return
	}
	seq := p.nextSeq
	p.nextSeq++
	select {
	case p.queue <- queued{seq: seq, batch: b}:
	default:
		p.dropped.Add(1)
	}
}

// Dropped is the number of batches dropped because the queue was full, the
// batch could not be encoded, or the publisher was closed (or its context
// ended).
func (p *Publisher) Dropped() uint64 { return p.dropped.Load() }

// Addr is the bound address of the PUB socket (nil when it connects), useful
// with "tcp://*:0".
func (p *Publisher) Addr() string {
	if a := p.pub.Addr(); a != nil {
		return a.String()
	}
	return ""
}

// ReplayAddr is the bound address of the replay socket ("" without one).
func (p *Publisher) ReplayAddr() string {
	if p.rep == nil {
		return ""
	}
	if a := p.rep.Addr(); a != nil {
		return a.String()
	}
	return ""
}

// Close sends what is already queued, then closes the sockets. Later
// Publish calls drop their batch.
func (p *Publisher) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	close(p.queue)
	p.mu.Unlock()
	<-p.senderDone
	p.cancel()
	err := p.pub.Close()
	if p.rep != nil {
		err = errors.Join(err, p.rep.Close())
	}
	<-p.replayDone
	return err
}

// send is the sender goroutine: encode, put on the wire, keep for replay.
func (p *Publisher) send(ctx context.Context) {
	defer close(p.senderDone)
	for q := range p.queue {
		if ctx.Err() != nil {
			// The caller's context ended the sockets before Close: nothing
			// can be sent any more.
			p.dropped.Add(1)
			continue
		}
		payload, err := Encode(q.batch)
		if err != nil {
			// Only an Event from outside this package can fail to encode;
			// the sequence number is lost like a dropped batch.
			p.dropped.Add(1)
			p.log.Error("kv events: encode failed, batch dropped", "seq", q.seq, "err", err)
			continue
		}
		seq := seqBytes(q.seq)
		p.ring.add(q.seq, payload)
		if p.skipSend != nil && p.skipSend(q.seq) {
			continue
		}
		// PUB sends queue internally up to the HWM and do not block.
		if err := p.pub.Send(zmq4.NewMsgFrom(p.topic, seq, payload)); err != nil {
			p.log.Warn("kv events: send failed", "seq", q.seq, "err", err)
		}
	}
}

// serveReplay answers replay requests on the ROUTER socket: a request is
// [identity, "", start seq (8 bytes BE)] (the empty delimiter may be
// missing); the answer is one [identity, "", seq, payload] message per
// buffered batch from start on, then [identity, "", -1, ""].
func (p *Publisher) serveReplay(ctx context.Context) {
	defer close(p.replayDone)
	for {
		msg, err := p.rep.Recv()
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			p.log.Warn("kv events: replay recv", "err", err)
			continue
		}
		f := msg.Frames
		if len(f) == 3 && len(f[1]) == 0 {
			f = [][]byte{f[0], f[2]}
		}
		if len(f) != 2 || len(f[1]) != 8 {
			p.log.Warn("kv events: invalid replay request", "frames", len(msg.Frames))
			continue
		}
		id := f[0]
		start := binary.BigEndian.Uint64(f[1])
		for _, e := range p.ring.since(start) {
			if err := p.rep.Send(zmq4.NewMsgFrom(id, nil, seqBytes(e.seq), e.payload)); err != nil {
				p.log.Warn("kv events: replay send", "err", err)
				break
			}
		}
		if err := p.rep.Send(zmq4.NewMsgFrom(id, nil, endSeq[:], nil)); err != nil && ctx.Err() == nil {
			p.log.Warn("kv events: replay end send", "err", err)
		}
	}
}

// ring keeps the last n encoded batches for replay.
type ring struct {
	mu    sync.Mutex
	items []ringItem
	start int // index of the oldest item once full
}

type ringItem struct {
	seq     uint64
	payload []byte
}

func newRing(n int) *ring { return &ring{items: make([]ringItem, 0, n)} }

func (r *ring) add(seq uint64, payload []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.items) < cap(r.items) {
		r.items = append(r.items, ringItem{seq, payload})
		return
	}
	r.items[r.start] = ringItem{seq, payload}
	r.start = (r.start + 1) % len(r.items)
}

// since returns the buffered items with seq >= start, oldest first.
func (r *ring) since(start uint64) []ringItem {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]ringItem, 0, len(r.items))
	for i := range r.items {
		e := r.items[(r.start+i)%len(r.items)]
		if e.seq >= start {
			out = append(out, e)
		}
	}
	return out
}

// nextSeqForTest is the sequence number the next Publish will take.
func (p *Publisher) nextSeqForTest() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.nextSeq
}
