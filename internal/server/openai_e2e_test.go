package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	sm "github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/capstan-dev/capstan/internal/config"
)

// The OpenAI front door of `capstan serve` reaches a SageMaker-created endpoint
// by name: the official OpenAI Go SDK streams from it and lists it.
func TestE2EOpenAIFrontDoor(t *testing.T) {
	p := startServe(t, filepath.Join(t.TempDir(), "data"))
	p.mustSetup(t, "m", "meta-llama/Llama-3.1-8B-Instruct", "cfg", 2)
	if _, err := p.sm.CreateEndpoint(context.Background(), &sm.CreateEndpointInput{EndpointName: aws.String("chat-ep"), EndpointConfigName: aws.String("cfg")}); err != nil {
		t.Fatal(err)
	}
	p.wait(t, "chat-ep", "InService", 60*time.Second)

	client := openai.NewClient(option.WithBaseURL(p.url+"/v1"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	models, err := client.Models.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, m := range models.Data {
		found = found || m.ID == "chat-ep"
	}
	if !found {
		t.Fatalf("/v1/models does not list chat-ep: %+v", models.Data)
	}

	stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
		Model:         "chat-ep",
		Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Explain paged attention in one line.")},
		MaxTokens:     openai.Int(6),
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	}, option.WithJSONSet("ignore_eos", true))
	var chunks int
	var text strings.Builder
	var usage openai.CompletionUsage
	for stream.Next() {
		c := stream.Current()
		if len(c.Choices) > 0 && c.Choices[0].Delta.Content != "" {
			chunks++
			text.WriteString(c.Choices[0].Delta.Content)
		}
		if c.Usage.CompletionTokens > 0 {
			usage = c.Usage
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if chunks != 6 || usage.CompletionTokens != 6 || usage.PromptTokens == 0 {
		t.Fatalf("got %d content chunks %q, usage %+v; want 6 tokens streamed one per chunk", chunks, text.String(), usage)
	}

	_, err = client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model: "no-such-endpoint", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound {
		t.Fatalf("unknown model: %v", err)
	}
}

// With credentials configured, the OpenAI front door wants one of the
// apiKeys as a bearer key; the SigV4 secret is not one.
func TestOpenAIFrontDoorRequiresKeyWhenCredentialsConfigured(t *testing.T) {
	h := startHarness(t, config.Config{Credentials: []config.Credential{{AccessKeyID: "AKIDREAL", SecretAccessKey: testSecret}},
		APIKeys: []string{testAPIKey}})
	tests := []struct {
		name, auth string
		want       int
	}{
		{"no key", "", http.StatusUnauthorized},
		{"wrong key", "Bearer nope", http.StatusUnauthorized},
		{"the SigV4 secret", "Bearer " + testSecret, http.StatusUnauthorized},
		{"configured api key", "Bearer " + testAPIKey, http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodGet, h.url+"/v1/models", nil)
			if tt.auth != "" {
				req.Header.Set("Authorization", tt.auth)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tt.want {
				t.Fatalf("status %d, want %d", resp.StatusCode, tt.want)
			}
		})
	}
}

// A /v1/ path the door does not serve gets OpenAI's 404, not another API's error.
func TestUnknownOpenAIPathIsOpenAIShaped(t *testing.T) {
	h := startHarness(t, config.Config{})
	for _, path := range []string{"/v1/embeddings", "/v1/audio/speech"} {
		resp, body := h.call(t, http.MethodPost, path, "", `{"model":"x","input":"hi"}`)
		var oe struct {
			Error struct{ Type, Code, Message string }
		}
		if err := json.Unmarshal([]byte(body), &oe); err != nil || resp.StatusCode != http.StatusNotFound ||
			oe.Error.Type != "invalid_request_error" || oe.Error.Code != "unknown_url" {
			t.Fatalf("%s: %d %s", path, resp.StatusCode, body)
		}
	}
}
