package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	smr "github.com/aws/aws-sdk-go-v2/service/sagemakerruntime"
	smrtypes "github.com/aws/aws-sdk-go-v2/service/sagemakerruntime/types"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/config"
	"github.com/capstan-dev/capstan/internal/engine/sim"
)

// simEngine serves the real simulated engine in-process (no simulated
// waiting): its /invocations and /v1/chat/completions answer with the
// usage objects the gateway's token metrics read.
func simEngine(t *testing.T) string {
	t.Helper()
	e, err := sim.NewEngine(sim.Options{Model: "llama-3.1-8b", GPU: "h100"}, sim.Deps{Clock: clock.Real{}, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = e.Run(ctx) }()
	srv := httptest.NewServer(sim.NewServer(e))
	t.Cleanup(func() { srv.Close(); cancel(); <-done })
	return strings.TrimPrefix(srv.URL, "http://")
}

// doorCounts are the gateway metrics of one endpoint variant that every
// front door must move alike.
type doorCounts struct {
	ok, refused     float64 // requests_total, status 200 and 400
	ttfb, ttft, itl float64 // histogram sample counts
	in, out         float64 // tokens_total by direction
}

func (c doorCounts) minus(o doorCounts) doorCounts {
	return doorCounts{c.ok - o.ok, c.refused - o.refused, c.ttfb - o.ttfb, c.ttft - o.ttft, c.itl - o.itl, c.in - o.in, c.out - o.out}
}

// scrapeDoorCounts reads /metrics for endpoint ep, variant AllTraffic.
func scrapeDoorCounts(t *testing.T, url, ep string) doorCounts {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var c doorCounts
	for name, fam := range fams {
		for _, m := range fam.GetMetric() {
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			if l["endpoint"] != ep || l["variant"] != "AllTraffic" {
				continue
			}
			switch name {
			case "capstan_gateway_requests_total":
				switch l["status"] {
				case "200":
					c.ok += m.GetCounter().GetValue()
				case "400":
					c.refused += m.GetCounter().GetValue()
				}
			case "capstan_gateway_time_to_first_byte_seconds":
				c.ttfb += float64(m.GetHistogram().GetSampleCount())
			case "capstan_gateway_time_to_first_token_seconds":
				c.ttft += float64(m.GetHistogram().GetSampleCount())
			case "capstan_gateway_inter_token_latency_seconds":
				c.itl += float64(m.GetHistogram().GetSampleCount())
			case "capstan_gateway_tokens_total":
				if l["direction"] == "in" {
					c.in += m.GetCounter().GetValue()
				} else {
					c.out += m.GetCounter().GetValue()
				}
			}
		}
	}
	return c
}

// Every front door records the same request, time-to-first-byte,
// time-to-first-token, inter-token, token and error metrics for the same
// generation: SageMaker traffic used to record only the request counter
// (a TimeToFirstToken trigger and dashboards missed it).
func TestDoorsRecordTheSameMetrics(t *testing.T) {
	h := startHarness(t, config.Config{})
	h.rt.SetDefaultAddr(simEngine(t))
	const ep = "parity-ep"
	h.serving(t, ep)

	const n, maxTokens = 3, 4
	// One chat generation, the same for every door: the OpenAI door takes
	// the model from the body, the SageMaker door from the path (and sets
	// "stream" itself on the streaming operation).
	gen := fmt.Sprintf(`"messages":[{"role":"user","content":"Explain paged attention in one line."}],"max_tokens":%d,"ignore_eos":true`, maxTokens)
	withUsage := `,"stream_options":{"include_usage":true}`
	refused := `"messages":[]` // the engine answers 400

	invoke := func(body string) error {
		_, err := h.smr.InvokeEndpoint(context.Background(), &smr.InvokeEndpointInput{EndpointName: aws.String(ep),
			ContentType: aws.String("application/json"), Body: []byte("{" + body + "}")})
		return err
	}
	invokeStream := func(body string) error {
		out, err := h.smr.InvokeEndpointWithResponseStream(context.Background(), &smr.InvokeEndpointWithResponseStreamInput{
			EndpointName: aws.String(ep), ContentType: aws.String("application/json"), Body: []byte("{" + body + "}")})
		if err != nil {
			return err
		}
		defer out.GetStream().Close()
		var got strings.Builder
		for ev := range out.GetStream().Events() {
			if pp, ok := ev.(*smrtypes.ResponseStreamMemberPayloadPart); ok {
				got.Write(pp.Value.Bytes)
			}
		}
		if err := out.GetStream().Err(); err != nil {
			return err
		}
		if !strings.HasSuffix(got.String(), "\n\n") {
			return fmt.Errorf("stream ended early: %q", got.String())
		}
		return nil
	}
	chat := func(body string) error {
		resp, err := http.Post(h.url+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"`+ep+`",`+body+"}"))
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d: %s", resp.StatusCode, b)
		}
		return nil
	}

	// TGI's own API, as SageMaker's TGI containers serve it: the stream's
	// last event reports the counts; a unary answer only with
	// parameters.details, and without the prompt's length.
	tgi := fmt.Sprintf(`"inputs":"Explain paged attention in one line.","parameters":{"max_new_tokens":%d,"ignore_eos":true`, maxTokens)

	// TTFT and inter-token gaps are stream measures: a non-streamed answer
	// arrives in one piece, so it records none on either door. A chat
	// stream has maxTokens token chunks and the finish chunk (one first
	// token, maxTokens gaps); its usage chunk carries no token. A TGI
	// stream has one event per token.
	stream := doorCounts{ok: n, ttfb: n, ttft: n, itl: n * maxTokens, out: n * maxTokens}
	unary := doorCounts{ok: n, ttfb: n, out: n * maxTokens}
	tgiStream := stream
	tgiStream.itl = n * (maxTokens - 1)
	refusal := doorCounts{refused: n, ttfb: n}
	tests := []struct {
		name   string
		send   func(string) error
		body   string
		want   doorCounts // in: checked apart, by prompt
		prompt string     // which prompt's token count "in" must be; "" none
	}{
		{"InvokeEndpoint", invoke, gen, unary, "chat"},
		{"InvokeEndpointWithResponseStream", invokeStream, gen + withUsage, stream, "chat"},
		{"chat/completions", chat, gen, unary, "chat"},
		{"chat/completions stream", chat, gen + `,"stream":true` + withUsage, stream, "chat"},
		{"InvokeEndpoint TGI details", invoke, tgi + `,"details":true}`, unary, ""},
		{"InvokeEndpointWithResponseStream TGI", invokeStream, tgi + "}", tgiStream, "tgi"},
		{"InvokeEndpoint engine error", invoke, refused, refusal, ""},
		{"InvokeEndpointWithResponseStream engine error", invokeStream, refused, refusal, ""},
		{"chat/completions engine error", chat, refused, refusal, ""},
	}
	promptTokens := map[string]float64{} // every generation of one prompt counts the same
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := scrapeDoorCounts(t, h.url, ep)
			for i := 0; i < n; i++ {
				err := tt.send(tt.body)
				if (err != nil) != (tt.want.refused > 0) {
					t.Fatalf("request %d: err = %v, want an error: %v", i, err, tt.want.refused > 0)
				}
			}
			// Usage and the last gaps are recorded after the bytes reach
			// the caller: wait for them briefly.
			var got doorCounts
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				got = scrapeDoorCounts(t, h.url, ep).minus(before)
				in := got.in
				got.in = 0
				if got == tt.want || time.Now().After(deadline) {
					got.in = in
					break
				}
			}
			want := tt.want
			want.in = got.in
			if got != want {
				t.Fatalf("metric deltas %+v, want %+v", got, want)
			}
			switch p, seen := promptTokens[tt.prompt]; {
			case tt.prompt == "" && got.in != 0:
				t.Fatalf("%v prompt tokens counted, want none", got.in)
			case tt.prompt != "" && got.in <= 0:
				t.Fatalf("no prompt tokens counted: %+v", got)
			case seen && got.in != p:
				t.Fatalf("prompt tokens %v, another door counted %v for the same prompt", got.in, p)
			}
			promptTokens[tt.prompt] = got.in
		})
	}
}
