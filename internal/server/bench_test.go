package server

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	sm "github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"

	"github.com/capstan-dev/capstan/internal/config"
)

// BenchmarkDescribeEndpoint measures DescribeEndpoint over HTTP against an
// in-process server (store read + JSON encode + HTTP), with parallel clients.
func BenchmarkDescribeEndpoint(b *testing.B) {
	h := startHarnessTB(b)
	h.setupTB(b)
	if _, err := h.sm.CreateEndpoint(context.Background(), &sm.CreateEndpointInput{EndpointName: aws.String("ep"), EndpointConfigName: aws.String("c1")}); err != nil {
		b.Fatal(err)
	}
	body := `{"EndpointName":"ep"}`
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req, _ := http.NewRequest(http.MethodPost, h.url+"/", strings.NewReader(body))
			req.Header.Set("X-Amz-Target", "SageMaker.DescribeEndpoint")
			req.Header.Set("Content-Type", "application/x-amz-json-1.1")
			resp, err := client.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				b.Fatalf("status %d", resp.StatusCode)
			}
		}
	})
}

// BenchmarkCreateToInService measures CreateEndpoint → InService in process
// with the fake runtime (replicas healthy at once): the control-plane part of
// the latency; TestE2EEndpointLifecycle logs the same with real engines.
func BenchmarkCreateToInService(b *testing.B) {
	h := startHarnessTB(b)
	h.setupTB(b)
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		name := fmt.Sprintf("ep%d", i)
		if _, err := h.sm.CreateEndpoint(ctx, &sm.CreateEndpointInput{EndpointName: aws.String(name), EndpointConfigName: aws.String("c1")}); err != nil {
			b.Fatal(err)
		}
		for {
			out, err := h.sm.DescribeEndpoint(ctx, &sm.DescribeEndpointInput{EndpointName: aws.String(name)})
			if err != nil {
				b.Fatal(err)
			}
			if out.EndpointStatus == smtypes.EndpointStatusInService {
				break
			}
			time.Sleep(time.Millisecond)
		}
		b.StopTimer()
		if _, err := h.sm.DeleteEndpoint(ctx, &sm.DeleteEndpointInput{EndpointName: aws.String(name)}); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

func startHarnessTB(b *testing.B) *harness {
	return startHarness(b, config.Config{Fleet: map[string]map[string]int{"ml.g5.xlarge": {"us-east-1a": 1 << 20}}})
}

func (h *harness) setupTB(b *testing.B) { h.setup(b, "m1", "c1", 1) }

// BenchmarkRuntimeOverhead measures what the runtime path (SageMaker runtime
// API → gateway → replica) adds over calling the replica directly, with the
// two interleaved request by request in the same run so machine noise hits
// both alike. Reported: each path's p50 and the added p50 in µs.
func BenchmarkRuntimeOverhead(b *testing.B) {
	h := startHarnessTB(b)
	h.setupTB(b)
	if _, err := h.sm.CreateEndpoint(context.Background(), &sm.CreateEndpointInput{EndpointName: aws.String("ep"), EndpointConfigName: aws.String("c1")}); err != nil {
		b.Fatal(err)
	}
	var replica, key string
	for deadline := time.Now().Add(10 * time.Second); replica == ""; time.Sleep(5 * time.Millisecond) {
		if r, ok := h.srv.Gateway.Route("ep"); ok && len(r.Variants) > 0 && len(r.Variants[0].Backends) > 0 {
			replica, key = r.Variants[0].Backends[0].Addr, r.Variants[0].Backends[0].APIKey
		}
		if time.Now().After(deadline) {
			b.Fatal("endpoint never got a route")
		}
	}
	body := `{"inputs":"hello","parameters":{"max_new_tokens":1}}`
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	call := func(url, key string) time.Duration {
		start := time.Now()
		req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key) // the replica's own key, as the gateway sends it
		}
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("%s: status %d", url, resp.StatusCode)
		}
		return time.Since(start)
	}
	direct, via := make([]time.Duration, 0, b.N), make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		direct = append(direct, call("http://"+replica+"/invocations", key))
		via = append(via, call(h.url+"/endpoints/ep/invocations", ""))
	}
	b.StopTimer()
	p50 := func(d []time.Duration) float64 {
		slices.Sort(d)
		return float64(d[len(d)/2].Microseconds())
	}
	pd, pv := p50(direct), p50(via)
	b.ReportMetric(pd, "direct_p50_us")
	b.ReportMetric(pv, "runtime_p50_us")
	b.ReportMetric(pv-pd, "added_p50_us")
}
