package sim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/kv/events"
	"github.com/capstan-dev/capstan/internal/kv/tier"
)

// ErrCrashed is returned by Run when --crash-after-requests fired; the
// command maps it to exit status 1.
var ErrCrashed = errors.New("crashing on purpose after --crash-after-requests completed requests")

// shutdownGrace is how long in-flight requests may run after SIGTERM.
const shutdownGrace = 5 * time.Second

// eventSink adapts the engine's events to internal/kv/events.
type eventSink struct{ p *events.Publisher }

var (
	_ EventSink    = eventSink{}
	_ L1Cache      = (*tier.L1)(nil)
	_ L2Cache      = (*tier.Redis)(nil)
	_ L2Cache      = (*tier.MemoryL2)(nil)
	_ L2Cache      = (*tier.Disk)(nil)
	_ http.Handler = (*Server)(nil)
)

func (s eventSink) Publish(b EventBatch) {
	out := events.Batch{TS: b.TS, Events: make([]events.Event, 0, len(b.Events))}
	for _, ev := range b.Events {
		switch ev.Kind {
		case BlockStored:
			out.Events = append(out.Events, events.BlockStored{BlockHashes: ev.Hashes, ParentBlockHash: ev.Parent, TokenIDs: ev.TokenIDs, BlockSize: ev.BlockSize, Medium: ev.Medium})
		case BlockRemoved:
			out.Events = append(out.Events, events.BlockRemoved{BlockHashes: ev.Hashes, Medium: ev.Medium})
		case AllBlocksCleared:
			out.Events = append(out.Events, events.AllBlocksCleared{})
		}
	}
	s.p.Publish(out)
}

// Run serves one simulated engine until ctx ends (graceful shutdown, nil
// error) or a crash fault fires (ErrCrashed). It prints exactly one line,
// "listening on http://HOST:PORT", to stdout once the listener is bound.
func Run(ctx context.Context, opts Options, stdout io.Writer, log *slog.Logger) error {
	if log == nil {
		log = slog.Default()
	}
	clk := clock.Clock(clock.Real{})
	e, err := NewEngine(opts, Deps{Clock: clk, Log: log})
	if err != nil {
		return err
	}
	opts = e.opts
	if opts.CPUCacheBytes > 0 {
		l1 := tier.NewL1(opts.CPUCacheBytes, e.kvBlock)
		e.l1 = l1
		e.metrics.setCPUBlocks(opts, e.NumGPUBlocks(), l1.CapacityBlocks())
		blockBytes := e.kvBlock
		e.metrics.SetL1Stats(func() (int64, int64) {
			return int64(l1.Len()) * blockBytes, int64(l1.CapacityBlocks()) * blockBytes
		})
	}
	// Interfaces stay nil (not typed nils) for tiers that are off.
	var disk, redis L2Cache
	if opts.TieredStorageBytes > 0 {
		d, err := tier.OpenDisk(tier.DiskOptions{Dir: opts.TieredStorageDir, CapacityBytes: opts.TieredStorageBytes,
			BlockBytes: e.kvBlock, Namespace: e.model.ID})
		if err != nil {
			return fmt.Errorf("--tiered-storage-dir %s: %w", opts.TieredStorageDir, err)
		}
		defer d.Close()
		disk = d
		e.metrics.SetTieredStorageStats(d.Stats)
	} else if opts.TieredStorageDir != "" {
		log.Info("tieredstorage off: --tiered-storage-dir is set but --tiered-storage-bytes is 0")
	}
	if opts.SharedCache != "" {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		l2, err := tier.NewRedis(cctx, opts.SharedCache, e.model.ID, 0)
		cancel()
		if err != nil {
			return fmt.Errorf("--shared-cache: %w", err)
		}
		defer l2.Close()
		redis = l2
	}
	e.setShared(disk, redis)
	ln, err := net.Listen("tcp", net.JoinHostPort(opts.Host, strconv.Itoa(opts.Port)))
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	addr := ln.Addr().(*net.TCPAddr)
	hostPort := net.JoinHostPort(opts.Host, strconv.Itoa(addr.Port))
	fmt.Fprintf(stdout, "listening on http://%s\n", hostPort)

	engCtx, stopEngine := context.WithCancel(context.Background())
	defer stopEngine()
	if opts.KVEvents != "" {
		topic := opts.KVEventsTopic
		if topic == "" {
			topic = "kv@" + hostPort + "@" + opts.ServedModelName
		}
		// The publisher binds on the HTTP server's interface: a replica on
		// loopback keeps its KV events (token ids) on loopback too.
		bindHost := opts.Host
		if ip := net.ParseIP(bindHost); ip != nil && ip.IsUnspecified() {
			bindHost = ""
		}
		pub, err := events.NewPublisherWithOptions(engCtx, events.PublisherOptions{Endpoint: opts.KVEvents,
			ReplayEndpoint: opts.KVEventsReplay, Topic: topic, BindHost: bindHost})
		if err != nil {
			ln.Close()
			return fmt.Errorf("--kv-events: %w", err)
		}
		defer pub.Close()
		e.events = eventSink{pub}
	}
	log.Info("engine sim ready", "addr", hostPort, "model", e.model.ID, "layers", e.model.Layers, "params", e.model.Params, "gpu", opts.GPU, "tp", opts.TensorParallel,
		"mig", opts.MIGProfile, "num_gpu_blocks", e.NumGPUBlocks(), "max_model_len", e.maxLen, "time_scale", opts.TimeScale,
		"cpu_cache_bytes", opts.CPUCacheBytes, "tiered_storage_bytes", opts.TieredStorageBytes, "shared_cache", opts.SharedCache != "")

	engDone := make(chan struct{})
	go func() {
		defer close(engDone)
		_ = e.Run(engCtx)
	}()
	srv := NewServer(e)
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second, MaxHeaderBytes: 64 << 10}
	serveErr := make(chan error, 1)
	go func() { serveErr <- hs.Serve(ln) }()

	select {
	case <-ctx.Done():
		log.Info("shutting down", "grace", shutdownGrace)
		sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
		defer cancel()
		if err := hs.Shutdown(sctx); err != nil {
			// Grace over: abort what is left.
			stopEngine()
			_ = hs.Close()
		}
		stopEngine()
		<-engDone
		return nil
	case <-srv.Crashed():
		log.Error("crash fault fired", "after_requests", opts.CrashAfterRequests)
		_ = hs.Close()
		return ErrCrashed
	case err := <-serveErr:
		stopEngine()
		<-engDone
		return fmt.Errorf("http server: %w", err)
	}
}
