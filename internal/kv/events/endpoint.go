package events

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/go-zeromq/zmq4"
)

// MaxEndpointLen bounds endpoint strings from configuration.
const MaxEndpointLen = 512

// endSeq is the replay end marker: sequence number -1 as 8 big-endian bytes.
var endSeq = [8]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// binds reports whether endpoint is bound rather than connected, vLLM's rule:
// an endpoint containing "*" binds ("tcp://*:5557"), any other connects.
func binds(endpoint string) bool { return strings.Contains(endpoint, "*") }

// checkEndpoint validates an endpoint up front so that a typo fails at start
// with a clear error instead of in a background dial loop.
func checkEndpoint(endpoint string) error {
	if endpoint == "" {
		return fmt.Errorf("events: empty endpoint")
	}
	if len(endpoint) > MaxEndpointLen {
		return fmt.Errorf("events: endpoint longer than %d bytes", MaxEndpointLen)
	}
	scheme, addr, ok := strings.Cut(endpoint, "://")
	if !ok {
		return fmt.Errorf("events: endpoint %q is not transport://address", endpoint)
	}
	switch scheme {
	case "tcp":
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return fmt.Errorf("events: endpoint %q: %w", endpoint, err)
		}
	case "ipc", "inproc":
		if addr == "" {
			return fmt.Errorf("events: endpoint %q has no address", endpoint)
		}
	default:
		return fmt.Errorf("events: endpoint %q: unsupported transport %q (want tcp, ipc or inproc)", endpoint, scheme)
	}
	return nil
}

// attach binds or connects sock per vLLM's rule. A bind listens on every
// interface, or on bindHost when it is set (the "*" of the endpoint becomes
// bindHost), so a replica on loopback does not publish its token ids to
// the network. A connect happens in the background with endless retries and
// automatic reconnection, as libzmq's lazy connect does, so a publisher may
// start before its collector (and a subscriber before its engine).
func attach(ctx context.Context, sock zmq4.Socket, endpoint, bindHost string, log *slog.Logger) error {
	if binds(endpoint) {
		addr := endpoint
		if bindHost != "" {
			if strings.Contains(bindHost, ":") {
				bindHost = "[" + bindHost + "]"
			}
			addr = strings.Replace(endpoint, "*", bindHost, 1)
		}
		if err := sock.Listen(addr); err != nil {
			return fmt.Errorf("events: bind %s: %w", endpoint, err)
		}
		return nil
	}
	go func() {
		if err := sock.Dial(endpoint); err != nil && ctx.Err() == nil {
			log.Warn("kv events: connect failed", "endpoint", endpoint, "err", err)
		}
	}()
	return nil
}

// dialOptions make a connecting socket behave like libzmq: retry forever
// until the peer appears, reconnect when it goes away.
func dialOptions() []zmq4.Option {
	return []zmq4.Option{
		zmq4.WithDialerRetry(100 * time.Millisecond),
		zmq4.WithDialerMaxRetries(-1),
		zmq4.WithAutomaticReconnect(true),
		zmq4.WithDialerTimeout(5 * time.Second),
	}
}

func seqBytes(seq uint64) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint64(b, seq)
	return b
}
