package runtimeapi_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sagemakerruntime"
	"github.com/aws/aws-sdk-go-v2/service/sagemakerruntime/types"

	"github.com/capstan-dev/capstan/internal/gateway"
	"github.com/capstan-dev/capstan/internal/runtime"
	"github.com/capstan-dev/capstan/internal/runtime/local"
	"github.com/capstan-dev/capstan/internal/sagemaker/runtimeapi"
	"github.com/capstan-dev/capstan/internal/testutil"
)

// TestEndToEndRealEngine runs real `capstan engine sim` replicas through the
// local runtime, routes to them with the gateway and calls the handler with
// the AWS SDK: the whole data path of InvokeEndpoint(WithResponseStream).
func TestEndToEndRealEngine(t *testing.T) {
	bin := testutil.CapstanBinary(t)
	rt, err := local.New(local.Options{
		Binary: bin, LogDir: t.TempDir(),
		HealthInterval: 20 * time.Millisecond, StopGrace: 5 * time.Second,
		EngineArgs: []string{"--time-scale=0.01"},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	defer func() {
		if err := rt.Close(context.Background()); err != nil {
			t.Error(err)
		}
	}()
	healthy := make(chan runtime.Replica, 4)
	rt.Subscribe(ctx, func(r runtime.Replica) {
		if r.State == runtime.StateHealthy {
			healthy <- r
		}
	})
	for _, id := range []string{"e2e.AllTraffic.0", "e2e.AllTraffic.1"} {
		if err := rt.Start(ctx, runtime.ReplicaSpec{ID: id, Endpoint: "e2e", Variant: "AllTraffic", Engine: "sim",
			Model: "llama-3.1-8b", GPU: "h100", TensorParallel: 1}); err != nil {
			t.Fatal(err)
		}
	}
	var backends []gateway.Backend
	for len(backends) < 2 {
		select {
		case r := <-healthy:
			backends = append(backends, gateway.Backend{ID: r.Spec.ID, Addr: r.Addr, APIKey: r.APIKey})
		case <-ctx.Done():
			t.Fatalf("replicas not healthy: %+v", rt.List())
		}
	}
	gw := gateway.New(gateway.Options{Seed: 1})
	gw.SetRoute(gateway.Route{Endpoint: "e2e", Variants: []gateway.VariantRoute{{Name: "AllTraffic", Weight: 1, Backends: backends}}})
	srv := httptest.NewServer(runtimeapi.NewHandler(gw, runtimeapi.Options{AccountID: "123456789012", Region: "us-east-1"}))
	defer srv.Close()
	client := sagemakerruntime.New(sagemakerruntime.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(srv.URL),
		Credentials: credentials.NewStaticCredentialsProvider("AKID", "SECRET", ""),
		HTTPClient:  runtimeapi.SDKHTTPClient,
	})

	out, err := client.InvokeEndpoint(ctx, &sagemakerruntime.InvokeEndpointInput{
		EndpointName: aws.String("e2e"), ContentType: aws.String("application/json"),
		Body: []byte(`{"inputs":"Hello there","parameters":{"max_new_tokens":8}}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	var gen []struct {
		GeneratedText string `json:"generated_text"`
	}
	if err := json.Unmarshal(out.Body, &gen); err != nil || len(gen) != 1 || gen[0].GeneratedText == "" {
		t.Fatalf("InvokeEndpoint body %s (%v)", out.Body, err)
	}

	sout, err := client.InvokeEndpointWithResponseStream(ctx, &sagemakerruntime.InvokeEndpointWithResponseStreamInput{
		EndpointName: aws.String("e2e"), ContentType: aws.String("application/json"),
		Body: []byte(`{"inputs":"Hello there","parameters":{"max_new_tokens":8,"ignore_eos":true}}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	stream := sout.GetStream()
	var parts int
	var all strings.Builder
	for ev := range stream.Events() {
		p, ok := ev.(*types.ResponseStreamMemberPayloadPart)
		if !ok {
			t.Fatalf("event %T", ev)
		}
		parts++
		all.Write(p.Value.Bytes)
	}
	stream.Close()
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	// ignore_eos makes the engine emit exactly 8 SSE events; how they split
	// into PayloadParts depends on upstream reads, so only the bytes are checked.
	if parts < 1 || strings.Count(all.String(), "data:") != 8 {
		t.Fatalf("stream: %d parts, %q", parts, all.String())
	}

	// Stopping a replica and dropping it from the route leaves the endpoint serving.
	gw.SetRoute(gateway.Route{Endpoint: "e2e", Variants: []gateway.VariantRoute{{Name: "AllTraffic", Weight: 1, Backends: backends[1:]}}})
	if err := gw.Drain(ctx, backends[0].ID); err != nil {
		t.Fatal(err)
	}
	if err := rt.Stop(ctx, backends[0].ID); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := client.InvokeEndpoint(ctx, &sagemakerruntime.InvokeEndpointInput{
			EndpointName: aws.String("e2e"), ContentType: aws.String("application/json"),
			Body: []byte(`{"inputs":"again","parameters":{"max_new_tokens":2}}`),
		}); err != nil {
			t.Fatal(err)
		}
	}
}
