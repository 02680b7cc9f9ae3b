package runtimeapi

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sagemakerruntime"
	"github.com/aws/aws-sdk-go-v2/service/sagemakerruntime/types"

	"github.com/capstan-dev/capstan/internal/gateway"
)

// TestSDKClient drives the handler with the real aws-sdk-go-v2 client.
func TestSDKClient(t *testing.T) {
	chunks := []string{`data: {"token":"Hel"}` + "\n\n", `data: {"token":"lo"}` + "\n\n"}
	eng := engine(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(string(body), `"fail"`) {
			http.Error(w, "input rejected", http.StatusUnprocessableEntity)
			return
		}
		if strings.Contains(string(body), `"stream":true`) {
			w.Header().Set("Content-Type", "text/event-stream")
			for _, c := range chunks {
				io.WriteString(w, c)
				w.(http.Flusher).Flush()
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `[{"generated_text":"Hello"}]`)
	})
	h := newHarness(t, Options{})
	h.route("sdk-ep", variant("AllTraffic", eng))
	h.gw.SetRoute(gateway.Route{Endpoint: "expired", Variants: []gateway.VariantRoute{variant("AllTraffic", eng)},
		Unavailable: gateway.UnavailableExpired})

	client := sagemakerruntime.New(sagemakerruntime.Options{
		Region:       testRegion,
		BaseEndpoint: aws.String(h.srv.URL),
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", ""),
		Retryer:      aws.NopRetryer{},
		HTTPClient:   SDKHTTPClient,
	})
	ctx := context.Background()

	t.Run("InvokeEndpoint", func(t *testing.T) {
		out, err := client.InvokeEndpoint(ctx, &sagemakerruntime.InvokeEndpointInput{
			EndpointName:     aws.String("sdk-ep"),
			Body:             []byte(`{"inputs":"hi"}`),
			ContentType:      aws.String("application/json"),
			CustomAttributes: aws.String("trace=1"),
		})
		if err != nil {
			t.Fatal(err)
		}
		if string(out.Body) != `[{"generated_text":"Hello"}]` || aws.ToString(out.InvokedProductionVariant) != "AllTraffic" ||
			aws.ToString(out.ContentType) != "application/json" {
			t.Fatalf("out = %s variant=%s ct=%s", out.Body, aws.ToString(out.InvokedProductionVariant), aws.ToString(out.ContentType))
		}
	})

	t.Run("InvokeEndpointWithResponseStream", func(t *testing.T) {
		out, err := client.InvokeEndpointWithResponseStream(ctx, &sagemakerruntime.InvokeEndpointWithResponseStreamInput{
			EndpointName: aws.String("sdk-ep"),
			Body:         []byte(`{"inputs":"hi"}`),
			ContentType:  aws.String("application/json"),
		})
		if err != nil {
			t.Fatal(err)
		}
		stream := out.GetStream()
		defer stream.Close()
		var got strings.Builder
		for ev := range stream.Events() {
			part, ok := ev.(*types.ResponseStreamMemberPayloadPart)
			if !ok {
				t.Fatalf("unexpected event %T", ev)
			}
			got.Write(part.Value.Bytes)
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if got.String() != strings.Join(chunks, "") {
			t.Fatalf("streamed %q", got.String())
		}
		if aws.ToString(out.InvokedProductionVariant) != "AllTraffic" || aws.ToString(out.ContentType) != "text/event-stream" {
			t.Fatalf("variant=%s ct=%s", aws.ToString(out.InvokedProductionVariant), aws.ToString(out.ContentType))
		}
	})

	t.Run("errors", func(t *testing.T) {
		tests := []struct {
			name     string
			endpoint string
			body     string
			check    func(t *testing.T, err error)
		}{
			{name: "unknown endpoint", endpoint: "missing", body: "{}", check: func(t *testing.T, err error) {
				var ve *types.ValidationError
				if !errors.As(err, &ve) || aws.ToString(ve.Message) != "Endpoint missing of account 123456789012 not found." {
					t.Fatalf("err = %v", err)
				}
			}},
			{name: "model error", endpoint: "sdk-ep", body: `{"inputs":"fail"}`, check: func(t *testing.T, err error) {
				var me *types.ModelError
				if !errors.As(err, &me) {
					t.Fatalf("err = %v", err)
				}
				if aws.ToInt32(me.OriginalStatusCode) != 422 || aws.ToString(me.OriginalMessage) != "input rejected" ||
					!strings.HasPrefix(aws.ToString(me.Message), `Received client error (422) from AllTraffic with message "input rejected"`) {
					t.Fatalf("model error %+v", me)
				}
			}},
			{name: "capacity expired", endpoint: "expired", body: "{}", check: func(t *testing.T, err error) {
				var me *types.ModelError
				if !errors.As(err, &me) || !strings.HasPrefix(aws.ToString(me.Message), "Endpoint capacity reservation has expired.") {
					t.Fatalf("err = %v", err)
				}
			}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				_, err := client.InvokeEndpoint(ctx, &sagemakerruntime.InvokeEndpointInput{
					EndpointName: aws.String(tt.endpoint), Body: []byte(tt.body), ContentType: aws.String("application/json"),
				})
				if err == nil {
					t.Fatal("want error")
				}
				tt.check(t, err)
			})
		}
	})
}
