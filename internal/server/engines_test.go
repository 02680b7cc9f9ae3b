package server

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	sm "github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"

	"github.com/capstan-dev/capstan/internal/catalog"
	"github.com/capstan-dev/capstan/internal/config"
	"github.com/capstan-dev/capstan/internal/engines"
)

// The SageMaker door picks the engine by PrimaryContainer.Image, through
// the real AWS SDK: an image no engine serves, and llama.cpp where it is
// not installed, are ValidationExceptions that store nothing; a vLLM image
// without vLLM runs the simulator; a model from a catalog id on
// capstan/sim is unchanged.
func TestCreateModelChoosesEngine(t *testing.T) {
	t.Setenv("PATH", t.TempDir()) // no engine on PATH
	h := startHarness(t, config.Config{})
	ctx := context.Background()
	create := func(name, image string, env map[string]string) error {
		_, err := h.sm.CreateModel(ctx, &sm.CreateModelInput{ModelName: aws.String(name),
			PrimaryContainer: &smtypes.ContainerDefinition{Image: aws.String(image), Environment: env}})
		return err
	}
	hf := map[string]string{"HF_MODEL_ID": "meta-llama/Llama-3.1-8B-Instruct"}
	wantValidation(t, create("unknown", "acme/server:1", hf),
		`PrimaryContainer.Image: image "acme/server:1" selects no engine: use one of capstan/sim`, "ggml-org/llama.cpp:server*")
	wantValidation(t, create("llama", "ghcr.io/ggml-org/llama.cpp:server", hf),
		"PrimaryContainer.Image:", "llama.cpp llama-server, which is not installed here: set engines.llamacpp.binary")
	out, err := h.sm.ListModels(ctx, &sm.ListModelsInput{})
	if err != nil || len(out.Models) != 0 {
		t.Fatalf("refused models stored: %v %v", out, err)
	}
	if err := create("vllm", "vllm/vllm-openai:latest", hf); err != nil {
		t.Fatalf("vLLM image without vLLM: %v", err)
	}
	if err := create("sim", "capstan/sim", hf); err != nil {
		t.Fatal(err)
	}
}

// A configured engine binary that is not there stops the server at start,
// naming the key.
func TestConfigEngineBinaryMissing(t *testing.T) {
	cfg := config.Config{Engines: engines.Machine{engines.LlamaCpp: {Binary: "/nonexistent/llama-server"}}}
	cfg.Default()
	err := cfg.Validate(catalog.Default())
	if err == nil || !strings.Contains(err.Error(), `engines.llamacpp.binary: engine llamacpp: "/nonexistent/llama-server" is not an executable`) {
		t.Fatalf("validate: %v", err)
	}
	cfg.Engines = engines.Machine{"sim": {}, "foo": {}}
	if err := cfg.Validate(catalog.Default()); err == nil || !strings.Contains(err.Error(), "engines.foo: not an engine") ||
		!strings.Contains(err.Error(), "engines.sim: not an engine") {
		t.Fatalf("validate: %v", err)
	}
}
