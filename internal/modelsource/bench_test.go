package modelsource

import (
	"context"
	"io"
	"log/slog"
	"os"
	"testing"
)

// Fetch logs every fetch at info level; tests keep the output readable.
func TestMain(m *testing.M) {
	slog.SetDefault(slog.New(slog.NewTextHandler(io.Discard, nil)))
	os.Exit(m.Run())
}

// BenchmarkS3RefetchUnchanged is the cost of re-checking a cached model
// folder (one LIST against moto, no downloads): what a replica start pays
// when the model is already local.
func BenchmarkS3RefetchUnchanged(b *testing.B) {
	endpoint := StartMotoS3(b)
	c := testS3(b, endpoint)
	mustBucket(b, c, "models")
	put(b, c, "models", "m/config.json", qwenConfig(b), false)
	for _, k := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		put(b, c, "models", "m/shard-"+k+".safetensors", weights(64<<10, k[0]), true)
	}
	f := newS3Fetcher(b, endpoint)
	src := Source{Type: TypeS3, Bucket: "models", Location: "m"}
	if _, err := f.Fetch(context.Background(), src); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		res, err := f.Fetch(context.Background(), src)
		if err != nil || res.Downloaded != 0 {
			b.Fatalf("%+v %v", res, err)
		}
	}
}

// BenchmarkS3FetchCold downloads a 9-object, ~4 MiB folder from moto into an
// empty cache each iteration (verification included).
func BenchmarkS3FetchCold(b *testing.B) {
	endpoint := StartMotoS3(b)
	c := testS3(b, endpoint)
	mustBucket(b, c, "models")
	put(b, c, "models", "m/config.json", qwenConfig(b), false)
	for _, k := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		put(b, c, "models", "m/shard-"+k+".safetensors", weights(512<<10, k[0]), true)
	}
	src := Source{Type: TypeS3, Bucket: "models", Location: "m"}
	b.SetBytes(8*512<<10 + int64(len(qwenConfig(b))))
	for b.Loop() {
		b.StopTimer()
		f := newS3Fetcher(b, endpoint)
		b.StartTimer()
		if res, err := f.Fetch(context.Background(), src); err != nil || res.Downloaded != 9 {
			b.Fatalf("%+v %v", res, err)
		}
	}
}

func BenchmarkFetchJumpStart(b *testing.B) {
	f, err := New(Options{CacheDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	src := Source{Type: TypeJumpStart, JumpStartModelID: "deepseek-llm-r1-distill-qwen-1-5b"}
	for b.Loop() {
		if _, err := f.Fetch(context.Background(), src); err != nil {
			b.Fatal(err)
		}
	}
}
