package sim

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/internal/catalog"
)

func TestCalibrationWithinTolerance(t *testing.T) {
	for _, p := range CalibrationPoints {
		t.Run(p.Name+"/"+p.Model+"/"+p.GPU, func(t *testing.T) {
			got, err := p.Simulate()
			if err != nil {
				t.Fatal(err)
			}
			rel := (got - p.Published) / p.Published
			t.Logf("published %.2f %s, simulated %.2f (%+.0f%%)", p.Published, p.Unit, got, rel*100)
			if !p.Informational && math.Abs(rel) > 0.20 {
				t.Errorf("simulated %.2f %s is %+.0f%% off the published %.2f (tolerance ±20%%)", got, p.Unit, rel*100, p.Published)
			}
		})
	}
}

func TestKVCapacityMatchesReference(t *testing.T) {
	cat := catalog.Default()
	tests := []struct {
		name      string
		model     string
		gpu       string
		tp        int
		mig       string
		want      float64 // tokens, from reference §3
		wantError bool
	}{
		{name: "8B on 80GB", model: "llama-3.1-8b", gpu: "h100", tp: 1, want: 427e3},
		{name: "8B on H200", model: "llama-3.1-8b", gpu: "h200", tp: 1, want: 846e3},
		{name: "8B on A100-40", model: "llama-3.1-8b", gpu: "a100-40gb", tp: 1, want: 152e3},
		{name: "8B on MIG 3g.40gb", model: "llama-3.1-8b", gpu: "h100", mig: "3g.40gb", tp: 1, want: 152e3},
		{name: "8B on MIG 2g.20gb", model: "llama-3.1-8b", gpu: "a100-80gb", mig: "2g.20gb", tp: 1, want: 15e3},
		{name: "70B on 4x80GB", model: "llama-3.1-70b", gpu: "h100", tp: 4, want: 448e3},
		{name: "Qwen2.5-7B on 80GB", model: "qwen2.5-7b", gpu: "h100", tp: 1, want: 990e3},
		{name: "8B does not fit MIG 1g.10gb", model: "llama-3.1-8b", gpu: "h100", mig: "1g.10gb", tp: 1, wantError: true},
		{name: "70B does not fit one H100", model: "llama-3.1-70b", gpu: "h100", tp: 1, wantError: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, _ := cat.Model(tt.model)
			g, _ := cat.GPU(tt.gpu)
			var mig *catalog.MIGProfile
			if tt.mig != "" {
				p, err := g.MIGProfile(tt.mig)
				if err != nil {
					t.Fatal(err)
				}
				mig = &p
			}
			r, err := NewRoofline(m, g, tt.tp, mig)
			if err != nil {
				t.Fatal(err)
			}
			got, err := r.KVCapacityTokens(0.9)
			if tt.wantError {
				if err == nil || !strings.Contains(err.Error(), "does not fit") {
					t.Fatalf("want a does-not-fit error, got %d tokens, err %v", got, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if rel := math.Abs(float64(got)-tt.want) / tt.want; rel > 0.05 {
				t.Errorf("capacity %d tokens, reference ~%.0f (%.0f%% off)", got, tt.want, rel*100)
			}
		})
	}
}

// h100Roofline is Llama-3.1-8B's roofline on one H100, with the model and
// device.
func h100Roofline(t *testing.T) (*Roofline, catalog.Model, catalog.GPU) {
	t.Helper()
	cat := catalog.Default()
	m, _ := cat.Model("llama-3.1-8b")
	g, _ := cat.GPU("h100")
	r, err := NewRoofline(m, g, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r, m, g
}

func TestRooflineShape(t *testing.T) {
	r, m, g := h100Roofline(t)
	t.Run("zero tokens take zero time", func(t *testing.T) {
		if d := r.StepTime(Step{}); d != 0 {
			t.Fatalf("got %v", d)
		}
	})
	t.Run("decode is memory bound: batch 32 costs little more than batch 1", func(t *testing.T) {
		one, many := r.StepTime(DecodeStep(1, 512)), r.StepTime(DecodeStep(32, 512))
		if many > one*3/2 || many <= one {
			t.Fatalf("batch 1 %v, batch 32 %v", one, many)
		}
	})
	t.Run("prefill is compute bound: 4 prompts cost ~4x 1", func(t *testing.T) {
		one := PrefillStep(2048)
		a, b := r.StepTime(one), r.StepTime(Step{Tokens: 4 * one.Tokens, Logits: 4, Ctx: 4 * one.Ctx, Attn: 4 * one.Attn})
		ratio := float64(b) / float64(a)
		if ratio < 3.5 || ratio > 4.1 {
			t.Fatalf("ratio %.2f (2048: %v, 8192: %v)", ratio, a, b)
		}
	})
	t.Run("knee between 128 and 256 tokens", func(t *testing.T) {
		flat := float64(r.StepTime(PrefillStep(128))) / float64(r.StepTime(DecodeStep(1, 1)))
		steep := float64(r.StepTime(PrefillStep(512))) / float64(r.StepTime(PrefillStep(256)))
		if flat > 1.1 || steep < 1.7 {
			t.Fatalf("128/1 ratio %.2f (want flat), 512/256 ratio %.2f (want ~2)", flat, steep)
		}
	})
	t.Run("MIG 3g slice: compute 3/7, bandwidth by memory share", func(t *testing.T) {
		p, _ := g.MIGProfile("3g.40gb")
		s, err := NewRoofline(m, g, 1, &p)
		if err != nil {
			t.Fatal(err)
		}
		dec := float64(s.StepTime(DecodeStep(1, 1))-stepOverhead) / float64(r.StepTime(DecodeStep(1, 1))-stepOverhead)
		pre := float64(s.StepTime(Step{Tokens: 8192})-stepOverhead) / float64(r.StepTime(Step{Tokens: 8192})-stepOverhead)
		if math.Abs(dec-2) > 0.01 || math.Abs(pre-7.0/3) > 0.01 {
			t.Fatalf("decode ratio %.3f (want 2 = 80/40 GB), prefill ratio %.3f (want 7/3)", dec, pre)
		}
	})
	t.Run("MIG with tensor parallel is refused", func(t *testing.T) {
		p, _ := g.MIGProfile("3g.40gb")
		if _, err := NewRoofline(m, g, 2, &p); err == nil {
			t.Fatal("want error")
		}
	})
	t.Run("TP2 is faster than TP1 but by less than 2x", func(t *testing.T) {
		r2, _ := NewRoofline(m, g, 2, nil)
		a, b := r.StepTime(DecodeStep(1, 512)), r2.StepTime(DecodeStep(1, 512))
		if !(b < a && time.Duration(2)*b > a) {
			t.Fatalf("TP1 %v TP2 %v", a, b)
		}
	})
}

// TestRooflineAccounting: the embedding is a lookup, the LM head scores
// only the tokens that emit one, and a CPU reads a step that fits its
// last-level cache from there.
func TestRooflineAccounting(t *testing.T) {
	r, m, _ := h100Roofline(t)
	cat := catalog.Default()
	table := float64(m.VocabSize * m.HiddenSize)
	if m.TieWordEmbeddings || r.flopsPerToken != 2*(float64(m.Params)-2*table) || r.flopsPerLogit != 2*table {
		t.Fatalf("FLOPs per token %g, per logit %g; want the layers' and the untied LM head's", r.flopsPerToken, r.flopsPerLogit)
	}
	if want := float64(m.WeightBytes()) - table*float64(m.DTypeBytes); r.readPerStep != want {
		t.Fatalf("a step reads %g weight bytes, want %g (all but the embedding table)", r.readPerStep, want)
	}
	// A 2048-token prompt scored once against the same tokens all scored.
	once, all := PrefillStep(2048), PrefillStep(2048)
	all.Logits = 2048
	if a, b := r.StepTime(once), r.StepTime(all); float64(b)/float64(a) < 1.05 {
		t.Fatalf("scoring every prompt token costs %v vs %v for the last only: the LM head is not counted", b, a)
	}

	// The tiny llama of test/engines on ml.c5.large: 9 MB of weights fit
	// the 24.75 MB L3, a 1.5B model does not.
	c5, err := cat.GPU("ml.c5.large")
	if err != nil {
		t.Fatal(err)
	}
	tiny := catalog.Model{ID: "tiny", Layers: 2, AttentionHeads: 4, KVHeads: 4, HeadDim: 32, HiddenSize: 128,
		IntermediateSize: 384, VocabSize: 32000, DTypeBytes: 2, Params: 8_617_344}
	rt, err := NewRoofline(tiny, c5, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	dec := DecodeStep(1, 552)
	bytes := rt.readPerStep + rt.kvBytesPerToken*float64(dec.Ctx)
	if bytes > rt.cacheBytes || rt.cacheBytesPerSec <= rt.bytesPerSec {
		t.Fatalf("tiny model: %g bytes a step, cache %g at %g B/s vs DRAM %g", bytes, rt.cacheBytes, rt.cacheBytesPerSec, rt.bytesPerSec)
	}
	compute := (rt.flopsPerToken+rt.flopsPerLogit+rt.flopsPerAttn*552)/rt.flopsPerRank + rt.samplePerLogit
	wantSec := max(compute, bytes/rt.cacheBytesPerSec)
	if got := rt.StepTime(dec) - rt.overhead; math.Abs(got.Seconds()-wantSec) > 1e-6 {
		t.Fatalf("tiny decode step %v, want %.6f s (from the cache)", got, wantSec)
	}
	qwen, _ := cat.Model("deepseek-llm-r1-distill-qwen-1-5b")
	rq, err := NewRoofline(qwen, c5, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := rq.StepTime(DecodeStep(1, 512))-rq.overhead, time.Duration(rq.readPerStep/rq.bytesPerSec*float64(time.Second)); got < want {
		t.Fatalf("1.5B decode step %v, want at least DRAM's %v", got, want)
	}
}
