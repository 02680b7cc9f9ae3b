package runtimeapi

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/internal/gateway"
)

// TestThrottledPastMaxConcurrency: a request past the route's MaxConcurrency
// (a serverless endpoint's) gets 400 ThrottlingException, which every SDK
// retries; requests within it are served.
func TestThrottledPastMaxConcurrency(t *testing.T) {
	h := newHarness(t, Options{})
	release := make(chan struct{})
	inside := make(chan struct{}, 1)
	addr := engine(t, func(w http.ResponseWriter, r *http.Request) {
		inside <- struct{}{}
		<-release
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok":true}`))
	})
	h.gw.SetRoute(gateway.Route{Endpoint: "sl", MaxConcurrency: 1, Variants: []gateway.VariantRoute{variant("AllTraffic", addr)}})
	post := func() (*http.Response, error) {
		return http.Post(h.srv.URL+"/endpoints/sl/invocations", "application/json", strings.NewReader(`{"inputs":"hi"}`))
	}
	first := make(chan *http.Response, 1)
	go func() {
		resp, err := post()
		if err != nil {
			t.Error(err)
			close(first)
			return
		}
		first <- resp
	}()
	select {
	case <-inside:
	case <-time.After(10 * time.Second):
		t.Fatal("first request never reached the engine")
	}
	resp, err := post()
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var msg struct{ Message string }
	_ = json.Unmarshal(body, &msg)
	if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("X-Amzn-ErrorType") != "ThrottlingException" ||
		!strings.Contains(msg.Message, "Endpoint sl is serving its maximum number of concurrent requests") {
		t.Fatalf("second request: %d %s %s", resp.StatusCode, resp.Header.Get("X-Amzn-ErrorType"), body)
	}
	close(release)
	r1, ok := <-first
	if !ok {
		return
	}
	defer r1.Body.Close()
	if r1.StatusCode != http.StatusOK {
		t.Fatalf("request within MaxConcurrency: %d", r1.StatusCode)
	}
}
