package server

// SageMaker models from S3: CreateModel fetches ModelDataUrl (a model.tar.gz)
// or ModelDataSource (an uncompressed prefix) from a real S3 server (moto)
// through the serve config's modelSources.s3 settings, and the engine runs
// the architecture of the archive's config.json.

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	sm "github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	smr "github.com/aws/aws-sdk-go-v2/service/sagemakerruntime"
	"github.com/aws/smithy-go"

	"github.com/capstan-dev/capstan/internal/catalog"
)

// customConfig is a ~2.8B-parameter architecture (3B by its weights' header) that is in no catalog:
// 30 layers, hidden 2560, 20 query / 4 KV heads.
const customConfig = `{
  "_name_or_path": "acme/custom-3b",
  "architectures": ["LlamaForCausalLM"],
  "model_type": "llama",
  "hidden_size": 2560,
  "intermediate_size": 8960,
  "num_hidden_layers": 30,
  "num_attention_heads": 20,
  "num_key_value_heads": 4,
  "head_dim": 128,
  "vocab_size": 50000,
  "max_position_embeddings": 16384,
  "tie_word_embeddings": false,
  "torch_dtype": "bfloat16"
}`

func modelTarGz(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for name, body := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func wantValidation(t *testing.T, err error, mentions ...string) {
	t.Helper()
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != "ValidationException" {
		t.Fatalf("err = %v, want a ValidationException", err)
	}
	for _, m := range mentions {
		if !strings.Contains(ae.ErrorMessage(), m) {
			t.Fatalf("message %q does not mention %q", ae.ErrorMessage(), m)
		}
	}
}

func TestE2EModelFromS3(t *testing.T) {
	ctx := context.Background()
	motoURL, put := modelBucket(t)
	// The weights are a header-only safetensors stub: its header says 3e9
	// parameters, which the engine takes over the count derived from config.json.
	hdr := `{"__metadata__":{"format":"pt"},"model.weight":{"dtype":"BF16","shape":[3000000,1000],"data_offsets":[0,6000000000]}}`
	stub := string(binary.LittleEndian.AppendUint64(nil, uint64(len(hdr)))) + hdr
	put("custom/model.tar.gz", modelTarGz(t, map[string]string{"config.json": customConfig, "tokenizer_config.json": "{}", "model.safetensors": stub}))
	put("bad/model.tar.gz", modelTarGz(t, map[string]string{"weights.safetensors": "not a model folder"}))
	put("prefix/config.json", []byte(customConfig))

	dataDir := filepath.Join(t.TempDir(), "data")
	// Time scale 0.1 makes decode steps long enough (ms) to compare speeds.
	p := startServe(t, dataDir, "--s3-endpoint", motoURL, "--engine-time-scale", "0.1")

	createModel := func(name string, c smtypes.ContainerDefinition) error {
		c.Image = aws.String("capstan/sim")
		_, err := p.sm.CreateModel(ctx, &sm.CreateModelInput{ModelName: aws.String(name), PrimaryContainer: &c})
		return err
	}
	stored := func(name string) bool {
		_, err := p.sm.DescribeModel(ctx, &sm.DescribeModelInput{ModelName: aws.String(name)})
		return err == nil
	}

	// Bad input: refused naming the field, nothing stored.
	bad := []struct {
		name     string
		c        smtypes.ContainerDefinition
		mentions []string
	}{
		{"no-config", smtypes.ContainerDefinition{ModelDataUrl: aws.String("s3://models/bad/model.tar.gz")},
			[]string{"PrimaryContainer.ModelDataUrl: s3://models/bad/model.tar.gz has no config.json"}},
		{"missing-object", smtypes.ContainerDefinition{ModelDataUrl: aws.String("s3://models/absent/model.tar.gz")},
			[]string{"PrimaryContainer.ModelDataUrl: Could not find model data at s3://models/absent/model.tar.gz"}},
		{"missing-bucket", smtypes.ContainerDefinition{ModelDataUrl: aws.String("s3://no-such-bucket/model.tar.gz")},
			[]string{"PrimaryContainer.ModelDataUrl: Could not find model data at s3://no-such-bucket/model.tar.gz"}},
		{"prefix-not-slash", smtypes.ContainerDefinition{ModelDataSource: &smtypes.ModelDataSource{S3DataSource: &smtypes.S3ModelDataSource{
			S3Uri: aws.String("s3://models/prefix"), S3DataType: smtypes.S3ModelDataTypeS3Prefix, CompressionType: smtypes.ModelCompressionTypeNone}}},
			[]string{"PrimaryContainer.ModelDataSource.S3DataSource.S3Uri", "must end with"}},
		{"uri-too-long", smtypes.ContainerDefinition{ModelDataSource: &smtypes.ModelDataSource{S3DataSource: &smtypes.S3ModelDataSource{
			S3Uri: aws.String("s3://models/" + strings.Repeat("k", 1100) + "/"), S3DataType: smtypes.S3ModelDataTypeS3Prefix, CompressionType: smtypes.ModelCompressionTypeNone}}},
			[]string{"at 'primaryContainer.modelDataSource.s3DataSource.s3Uri' failed to satisfy constraint"}},
	}
	for _, tc := range bad {
		wantValidation(t, createModel(tc.name, tc.c), tc.mentions...)
		if stored(tc.name) {
			t.Fatalf("refused model %s was stored", tc.name)
		}
	}

	// Good: the archive, an uncompressed prefix, and a catalog preset.
	if err := createModel("custom", smtypes.ContainerDefinition{ModelDataUrl: aws.String("s3://models/custom/model.tar.gz"),
		Environment: map[string]string{"HF_MODEL_ID": "/opt/ml/model"}}); err != nil {
		t.Fatal(err)
	}
	if err := createModel("custom-prefix", smtypes.ContainerDefinition{ModelDataSource: &smtypes.ModelDataSource{S3DataSource: &smtypes.S3ModelDataSource{
		S3Uri: aws.String("s3://models/prefix/"), S3DataType: smtypes.S3ModelDataTypeS3Prefix, CompressionType: smtypes.ModelCompressionTypeNone}}}); err != nil {
		t.Fatal(err)
	}
	if err := createModel("preset-8b", smtypes.ContainerDefinition{Environment: map[string]string{"SM_MODEL_ID": "meta-textgeneration-llama-3-1-8b-instruct"}}); err != nil {
		t.Fatal(err)
	}
	if d, err := p.sm.DescribeModel(ctx, &sm.DescribeModelInput{ModelName: aws.String("custom")}); err != nil ||
		aws.ToString(d.PrimaryContainer.ModelDataUrl) != "s3://models/custom/model.tar.gz" {
		t.Fatalf("DescribeModel custom = %+v, %v", d, err)
	}
	wantValidation(t, createModel("custom", smtypes.ContainerDefinition{ModelDataUrl: aws.String("s3://models/custom/model.tar.gz")}), "already exist")

	for _, name := range []string{"custom", "preset-8b"} {
		if _, err := p.sm.CreateEndpointConfig(ctx, &sm.CreateEndpointConfigInput{EndpointConfigName: aws.String(name),
			ProductionVariants: []smtypes.ProductionVariant{{VariantName: aws.String("AllTraffic"), ModelName: aws.String(name),
				InstanceType: "ml.g5.xlarge", InitialInstanceCount: aws.Int32(1)}}}); err != nil {
			t.Fatal(err)
		}
		if _, err := p.sm.CreateEndpoint(ctx, &sm.CreateEndpointInput{EndpointName: aws.String(name), EndpointConfigName: aws.String(name)}); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"custom", "preset-8b"} {
		p.wait(t, name, smtypes.EndpointStatusInService, 90*time.Second)
	}

	// The engine runs the archive's architecture: its ready line reports the
	// layers of config.json and the parameters of the weights' header, not a
	// catalog preset's.
	want, err := catalog.ModelFromHFConfig("custom", []byte(customConfig))
	if err != nil {
		t.Fatal(err)
	}
	want.Params = 3_000_000_000
	layers, params := engineModel(t, dataDir, "custom")
	if layers != 30 || params != want.Params {
		t.Fatalf("engine runs %d layers, %d params; config.json says 30 layers, the safetensors header %d params", layers, params, want.Params)
	}
	if l8, p8 := engineModel(t, dataDir, "preset-8b"); l8 != 32 || p8 != 8030000000 {
		t.Fatalf("preset engine runs %d layers, %d params; want llama-3.1-8b's", l8, p8)
	}

	// Speed follows size: per output token the ~2.8B model is faster than the
	// 8B one on the same GPU (decode is bound by reading the weights).
	custom, preset := decodeTime(t, p.smr, "custom"), decodeTime(t, p.smr, "preset-8b")
	t.Logf("64 tokens: custom %v, llama-3.1-8b %v (weights %.1f vs 16.1 GB)", custom, preset, float64(want.WeightBytes())/1e9)
	if !(custom < preset*3/4) {
		t.Fatalf("custom model took %v, llama-3.1-8b %v: the smaller architecture should decode clearly faster", custom, preset)
	}
	// …by about the ratio of the weights read per step.
	ratio, wr := float64(custom)/float64(preset), float64(want.WeightBytes())/16.06e9
	if ratio < wr*0.5 || ratio > wr*1.7 {
		t.Fatalf("time ratio %.2f, weights ratio %.2f: the speed does not follow the architecture", ratio, wr)
	}
}

var readyRE = regexp.MustCompile(`engine sim ready.* layers=(\d+) params=(\d+)`)

// engineModel reads the layers and parameters an endpoint's replica reports
// in its log (<data-dir>/replicas/<replica id>.log).
func engineModel(t *testing.T, dataDir, endpoint string) (layers int, params int64) {
	t.Helper()
	logs, _ := filepath.Glob(filepath.Join(dataDir, "replicas", endpoint+".AllTraffic.*.log"))
	for _, l := range logs {
		b, err := os.ReadFile(l)
		if err != nil {
			continue
		}
		if m := readyRE.FindSubmatch(b); m != nil {
			layers, _ = strconv.Atoi(string(m[1]))
			params, _ = strconv.ParseInt(string(m[2]), 10, 64)
			return layers, params
		}
	}
	t.Fatalf("no engine ready line for endpoint %s in %v", endpoint, logs)
	return 0, 0
}

// decodeTime is the fastest of three invocations generating 64 tokens.
func decodeTime(t *testing.T, c *smr.Client, endpoint string) time.Duration {
	t.Helper()
	best := time.Duration(1 << 62)
	for range 3 {
		start := time.Now()
		out, err := c.InvokeEndpoint(context.Background(), &smr.InvokeEndpointInput{EndpointName: aws.String(endpoint),
			ContentType: aws.String("application/json"),
			Body:        []byte(`{"inputs":"Hi","parameters":{"max_new_tokens":64,"ignore_eos":true}}`)})
		if err != nil || len(out.Body) == 0 {
			t.Fatalf("invoke %s: %v", endpoint, err)
		}
		best = min(best, time.Since(start))
	}
	return best
}
