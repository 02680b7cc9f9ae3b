package server

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	smr "github.com/aws/aws-sdk-go-v2/service/sagemakerruntime"
	smrtypes "github.com/aws/aws-sdk-go-v2/service/sagemakerruntime/types"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/capstan-dev/capstan/internal/config"
	"github.com/capstan-dev/capstan/internal/engine/sim"
	"github.com/capstan-dev/capstan/internal/runtime"
	"github.com/capstan-dev/capstan/internal/runtime/fake"
)

// simRuntime is the fake runtime with every replica served by an
// in-process simulated engine (no simulated waiting) started with the flags
// the server gave the replica, its KV events endpoint among them, as the
// local runtime starts `capstan engine sim`: the engines answer with the
// usage objects the gateway's token metrics read and publish the KV events
// its index follows.
type simRuntime struct {
	*fake.Runtime
	t testing.TB
}

func (r simRuntime) Start(ctx context.Context, spec runtime.ReplicaSpec) error {
	o := sim.Options{Model: "llama-3.1-8b", GPU: "h100", KVEvents: spec.KVEventsEndpoint}
	addr, err := runSim(r.t, o)
	if err != nil {
		return fmt.Errorf("replica %s: %w", spec.ID, err)
	}
	r.SetAddr(spec.ID, addr)
	return r.Runtime.Start(ctx, spec)
}

// runSim runs sim.Run until the test ends and returns the address it
// listens on.
func runSim(t testing.TB, o sim.Options) (string, error) {
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		pw.CloseWithError(sim.Run(ctx, o, pw, slog.New(slog.DiscardHandler)))
	}()
	t.Cleanup(func() { cancel(); <-done })
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		return "", fmt.Errorf("simulated engine: %w", err)
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	return strings.TrimSpace(strings.TrimPrefix(line, "listening on http://")), nil
}

// deltas are an endpoint's gateway metric series, keyed by metric name and
// every label but endpoint: counters by value, histograms by sample count
// (durations differ from request to request; how many were observed must
// not), gauges by value.
type deltas map[string]float64

// scrapeSeries reads every series of endpoint ep from /metrics.
func scrapeSeries(t *testing.T, url, ep string) deltas {
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
	out := deltas{}
	for name, fam := range fams {
		for _, m := range fam.GetMetric() {
			var labels []string
			mine := false
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "endpoint" {
					mine = lp.GetValue() == ep
					continue
				}
				labels = append(labels, lp.GetName()+"="+lp.GetValue())
			}
			if !mine || !strings.HasPrefix(name, "capstan_gateway_") {
				continue
			}
			slices.Sort(labels)
			key := name + "{" + strings.Join(labels, ",") + "}"
			switch {
			case m.GetCounter() != nil:
				out[key] = m.GetCounter().GetValue()
			case m.GetHistogram() != nil:
				out[key] = float64(m.GetHistogram().GetSampleCount())
			case m.GetGauge() != nil:
				out[key] = m.GetGauge().GetValue()
			}
		}
	}
	return out
}

// minus is d − before, without the series that did not move.
func (d deltas) minus(before deltas) deltas {
	out := deltas{}
	for k, v := range d {
		if v -= before[k]; v != 0 {
			out[k] = v
		}
	}
	return out
}

// without is d less the series of the named metrics.
func (d deltas) without(names ...string) deltas {
	out := deltas{}
	for k, v := range d {
		if !slices.Contains(names, k[:strings.IndexByte(k, '{')]) {
			out[k] = v
		}
	}
	return out
}

// streamOnly are the metrics only a streamed response has: a non-streamed
// answer arrives in one piece, so it records no time to first token and no
// inter-token gaps, whichever door it came in by.
var streamOnly = []string{"capstan_gateway_time_to_first_token_seconds", "capstan_gateway_inter_token_latency_seconds"}

// The same scenario (the same chat generation, or completion, n times, then
// one request the engine refuses) through each front door records the same
// request,
// time-to-first-byte, time-to-first-token, inter-token, token, cache and
// error metrics, with the endpoint and variant labels: SageMaker traffic
// used to record only the request counter (a TimeToFirstToken trigger and
// dashboards missed it). The endpoint was created through the SageMaker API
// and its replica's KV cache events reach the gateway's index.
func TestDoorsRecordTheSameMetrics(t *testing.T) {
	frt := fake.New()
	h := startHarnessOn(t, config.Config{}, frt, simRuntime{Runtime: frt, t: t})
	const ep = "parity-ep"
	h.serving(t, ep)
	ctx := context.Background()

	const n, maxTokens = 3, 4
	// One chat generation, the same for every door: the OpenAI door takes
	// the model from the body, the SageMaker door from the path (and sets
	// "stream" itself on the streaming operation). The prompt spans several
	// KV blocks, so repeats of it are served from cache and its blocks are
	// published as KV events.
	prompt := strings.Repeat("Explain paged attention in one line. ", 12)
	chatBody := func(prompt string) string {
		return fmt.Sprintf(`"messages":[{"role":"user","content":%q}],"max_tokens":%d,"ignore_eos":true`, prompt, maxTokens)
	}
	gen := chatBody(prompt)
	withUsage := `,"stream_options":{"include_usage":true}`
	refused := `"messages":[]` // the engine answers 400

	invoke := func(body string) error {
		_, err := h.smr.InvokeEndpoint(ctx, &smr.InvokeEndpointInput{EndpointName: aws.String(ep),
			ContentType: aws.String("application/json"), Body: []byte("{" + body + "}")})
		return err
	}
	invokeStream := func(body string) error {
		out, err := h.smr.InvokeEndpointWithResponseStream(ctx, &smr.InvokeEndpointWithResponseStreamInput{
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
	openAI := func(path string) func(string) error {
		return func(body string) error {
			resp, err := http.Post(h.url+path, "application/json", strings.NewReader(`{"model":"`+ep+`",`+body+"}"))
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
	}
	// A completion (a bare prompt rather than messages), which the OpenAI
	// door serves at /v1/completions and the SageMaker door passes on
	// as it is; its prompt differs from the chat's so it has its own
	// cache entries.
	completion := fmt.Sprintf(`"prompt":%q,"max_tokens":%d,"ignore_eos":true`, "Complete: "+prompt, maxTokens)

	// measure sends reqs (want an error from those with fail set) and
	// returns the metric deltas once they have settled: usage and the last
	// gaps are recorded after the bytes reach the caller.
	type req struct {
		body string
		fail bool
	}
	measure := func(t *testing.T, send func(string) error, reqs []req, ready func(deltas) bool) deltas {
		t.Helper()
		before := scrapeSeries(t, h.url, ep)
		for i, r := range reqs {
			if err := send(r.body); (err != nil) != r.fail {
				t.Fatalf("request %d: err = %v, want an error: %v", i, err, r.fail)
			}
		}
		var got deltas
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			got = scrapeSeries(t, h.url, ep).minus(before)
			if ready(got) || time.Now().After(deadline) {
				return got
			}
		}
	}
	key := func(name string, labels ...string) string {
		return name + "{" + strings.Join(append(labels, "variant=AllTraffic"), ",") + "}"
	}
	var (
		okReqs   = key("capstan_gateway_requests_total", "status=200")
		refusals = key("capstan_gateway_requests_total", "status=400")
		ttfb     = key("capstan_gateway_time_to_first_byte_seconds")
		duration = key("capstan_gateway_request_duration_seconds")
		ttft     = key("capstan_gateway_time_to_first_token_seconds")
		itl      = key("capstan_gateway_inter_token_latency_seconds")
		tokIn    = key("capstan_gateway_tokens_total", "direction=in")
		tokOut   = key("capstan_gateway_tokens_total", "direction=out")
		cached   = "capstan_gateway_prompt_cached_tokens_total{source=served,strategy=}"
		misses   = "capstan_gateway_routing_decisions_total{outcome=miss,strategy=}" // the default strategy predicts no hit
	)

	// Each kind of generation through every door: the same requests move
	// the same series by the same amounts.
	for _, kind := range []struct {
		name, gen, path string
	}{
		{"chat", gen, "/v1/chat/completions"},
		{"completion", completion, "/v1/completions"},
	} {
		// One generation first, outside the table: every row then finds
		// the prompt cached alike (the first row would otherwise count a
		// miss the others do not).
		if err := invoke(kind.gen); err != nil {
			t.Fatal(err)
		}
		doors := []struct {
			name    string
			send    func(string) error
			body    string // the generation as this door takes it
			streams bool
		}{
			{"InvokeEndpoint", invoke, kind.gen, false},
			{"InvokeEndpointWithResponseStream", invokeStream, kind.gen + withUsage, true},
			{kind.path, openAI(kind.path), kind.gen, false},
			{kind.path + " stream", openAI(kind.path), kind.gen + `,"stream":true` + withUsage, true},
		}
		var first, firstStream deltas // the first row's and the first streamed row's
		for _, d := range doors {
			t.Run(kind.name+" "+d.name, func(t *testing.T) {
				reqs := append(slices.Repeat([]req{{body: d.body}}, n), req{body: refused, fail: true})
				// A stream has maxTokens token chunks and the finish chunk
				// (one first token, maxTokens gaps); its usage chunk
				// carries no token.
				want := map[string]float64{okReqs: n, refusals: 1, ttfb: n + 1, duration: n + 1, misses: n + 1, tokOut: n * maxTokens}
				if d.streams {
					want[ttft], want[itl] = n, n*maxTokens
				}
				got := measure(t, d.send, reqs, func(got deltas) bool {
					for k, v := range want {
						if got[k] != v {
							return false
						}
					}
					return got[tokIn] > 0
				})
				for k, v := range want {
					if got[k] != v {
						t.Errorf("%s moved by %v, want %v", k, got[k], v)
					}
				}
				if !d.streams {
					for _, k := range []string{ttft, itl} {
						if got[k] != 0 {
							t.Errorf("%s moved by %v for a non-streamed answer", k, got[k])
						}
					}
				}
				if got[tokIn] <= 0 || got[cached] <= 0 {
					t.Errorf("prompt tokens %v, cached %v: want both counted", got[tokIn], got[cached])
				}
				// Every series, not only the ones above: the same as the
				// first door's, and a stream's the same as the first
				// stream's.
				if first == nil {
					first = got
				} else if a, b := got.without(streamOnly...), first.without(streamOnly...); !maps.Equal(a, b) {
					t.Errorf("metric deltas differ from %s's:\n got %v\nwant %v", doors[0].name, a, b)
				}
				if d.streams {
					if firstStream == nil {
						firstStream = got
					} else if !maps.Equal(got, firstStream) {
						t.Errorf("metric deltas differ from the first stream's:\n got %v\nwant %v", got, firstStream)
					}
				}
			})
		}
	}

	// TGI's own API, as SageMaker's TGI containers serve it: the stream's
	// last event reports the counts, one event per token (maxTokens-1
	// gaps); a unary answer only with parameters.details, and without the
	// prompt's length.
	tgi := fmt.Sprintf(`"inputs":%q,"parameters":{"max_new_tokens":%d,"ignore_eos":true`, prompt, maxTokens)
	for _, tt := range []struct {
		name string
		send func(string) error
		body string
		want map[string]float64 // every series but the cache's, which depends on what TGI's prompt shares with the chat one
	}{
		{"InvokeEndpoint TGI details", invoke, tgi + `,"details":true}`,
			map[string]float64{okReqs: n, ttfb: n, duration: n, misses: n, tokOut: n * maxTokens}},
		{"InvokeEndpointWithResponseStream TGI", invokeStream, tgi + "}",
			map[string]float64{okReqs: n, ttfb: n, duration: n, misses: n, ttft: n, itl: n * (maxTokens - 1), tokOut: n * maxTokens, tokIn: -1}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := measure(t, tt.send, slices.Repeat([]req{{body: tt.body}}, n), func(got deltas) bool {
				return got[tokOut] == tt.want[tokOut] && got[itl] == tt.want[itl]
			}).without("capstan_gateway_prompt_cached_tokens_total")
			if tt.want[tokIn] < 0 { // counted, as many as the engine says
				if got[tokIn] <= 0 {
					t.Fatalf("no prompt tokens counted: %v", got)
				}
				tt.want[tokIn] = got[tokIn]
			}
			if !maps.Equal(got, deltas(tt.want)) {
				t.Fatalf("metric deltas %v, want %v", got, tt.want)
			}
		})
	}

	// The endpoint's replicas publish their KV cache events (the server
	// started each with --kv-events) and the gateway's index holds their
	// blocks: the prompt above spans several. A subscription that joined
	// after the first blocks were stored sees them on the next new prompt.
	r, ok := h.srv.Gateway.Route(ep)
	if !ok || len(r.Variants) == 0 || len(r.Variants[0].Backends) == 0 {
		t.Fatalf("no route with backends for %s: %+v", ep, r)
	}
	for _, b := range r.Variants[0].Backends {
		if b.KVEventsEndpoint == "" {
			t.Fatalf("backend %s has no KV events endpoint", b.ID)
		}
		for i, deadline := 0, time.Now().Add(10*time.Second); h.srv.Gateway.KVBlocks(b.ID) == 0; i++ {
			if time.Now().After(deadline) {
				t.Fatalf("the gateway's KV index holds no block of backend %s", b.ID)
			}
			if err := invoke(chatBody(fmt.Sprintf("%d %s", i, prompt))); err != nil {
				t.Fatal(err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}
