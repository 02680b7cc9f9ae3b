package events

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/internal/testutil"
)

// TestBindHostKeepsEventsOnLoopback: a publisher told to bind "tcp://*:P"
// on 127.0.0.1 serves subscribers on loopback and nobody on the host's
// other addresses.
func TestBindHostKeepsEventsOnLoopback(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	port := testutil.FreePort(t)
	p := newPub(t, ctx, PublisherOptions{Endpoint: "tcp://*:" + strconv.Itoa(port), BindHost: "127.0.0.1", Topic: "t"})
	s := newSub(t, ctx, "tcp://127.0.0.1:"+strconv.Itoa(port), "")
	warmUp(t, ctx, p, s)

	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok || ipn.IP.IsLoopback() || ipn.IP.To4() == nil {
			continue
		}
		c, err := net.DialTimeout("tcp", net.JoinHostPort(ipn.IP.String(), strconv.Itoa(port)), time.Second)
		if err == nil {
			c.Close()
			t.Fatalf("the publisher accepts connections on %s; it must listen on loopback only", ipn.IP)
		}
		if !strings.Contains(err.Error(), "refused") {
			t.Logf("dial %s: %v", ipn.IP, err)
		}
	}
}
