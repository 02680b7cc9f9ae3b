//go:build linux

package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	sm "github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smr "github.com/aws/aws-sdk-go-v2/service/sagemakerruntime"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// clients reach whichever server process is live: every call reads the
// server's current address.
type clients struct {
	srv  *server
	http *http.Client
	sm   *sm.Client
	smr  *smr.Client
}

// downURL is where calls go while no server is up: connection refused.
const downURL = "http://127.0.0.1:1"

func newClients(srv *server) *clients {
	hc := &http.Client{Timeout: 30 * time.Second}
	// One attempt: a retry inside the SDK would hide the failures this test counts.
	cfg := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("AKID", "SECRET", ""),
		RetryMaxAttempts: 1, HTTPClient: hc}
	return &clients{srv: srv, http: hc, sm: sm.NewFromConfig(cfg), smr: smr.NewFromConfig(cfg)}
}

func (c *clients) base() string {
	if u := c.srv.url(); u != "" {
		return u
	}
	return downURL
}

// at points one SDK call at the live server.
func (c *clients) at() func(*sm.Options) {
	u := c.base()
	return func(o *sm.Options) { o.BaseEndpoint = aws.String(u) }
}

func (c *clients) atRuntime() func(*smr.Options) {
	u := c.base()
	return func(o *smr.Options) { o.BaseEndpoint = aws.String(u) }
}

func (c *clients) openai() openai.Client {
	return openai.NewClient(option.WithBaseURL(c.base()+"/v1"), option.WithAPIKey("unused"),
		option.WithMaxRetries(0), option.WithHTTPClient(c.http))
}

// chat calls /v1/chat/completions, streaming or not, and checks the answer is whole.
func (c *clients) chat(ctx context.Context, ep string, stream bool) error {
	cl := c.openai()
	params := openai.ChatCompletionNewParams{Model: ep, MaxTokens: openai.Int(4),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What is a capstan?")}}
	if !stream {
		out, err := cl.Chat.Completions.New(ctx, params)
		if err != nil {
			return err
		}
		if len(out.Choices) == 0 || out.Choices[0].FinishReason == "" {
			return fmt.Errorf("chat %s: incomplete answer %+v", ep, out)
		}
		return nil
	}
	st := cl.Chat.Completions.NewStreaming(ctx, params)
	defer st.Close()
	finished := false
	for st.Next() {
		if ch := st.Current(); len(ch.Choices) > 0 && ch.Choices[0].FinishReason != "" {
			finished = true
		}
	}
	if err := st.Err(); err != nil {
		return err
	}
	if !finished {
		return fmt.Errorf("chat stream %s: ended without a finish_reason", ep)
	}
	return nil
}

// invoke calls SageMaker InvokeEndpoint.
func (c *clients) invoke(ctx context.Context, ep string) error {
	out, err := c.smr.InvokeEndpoint(ctx, &smr.InvokeEndpointInput{EndpointName: aws.String(ep),
		ContentType: aws.String("application/json"),
		Body:        []byte(`{"inputs":"What is a capstan?","parameters":{"max_new_tokens":4}}`)}, c.atRuntime())
	if err == nil && len(out.Body) == 0 {
		return errors.New("invoke " + ep + ": empty body")
	}
	return err
}

const manifestBase = "/apis/inference.sagemaker.aws.amazon.com/v1/namespaces/default/jumpstartmodels/"

// jsmYAML is a JumpStartModel whose SageMaker endpoint has its own name.
func jsmYAML(name, instanceType string, replicas int32) string {
	return fmt.Sprintf(`apiVersion: inference.sagemaker.aws.amazon.com/v1
kind: JumpStartModel
metadata: {name: %s, namespace: default}
spec:
  sageMakerEndpoint: {name: %s}
  model: {modelHubName: SageMakerPublicHub, modelId: deepseek-llm-r1-distill-qwen-1-5b}
  server: {instanceType: %s}
  replicas: %d
`, name, name, instanceType, replicas)
}

// applyJSM PUTs a manifest through the manifests HTTP API.
func (c *clients) applyJSM(ctx context.Context, name, instanceType string, replicas int32) error {
	_, err := c.do(ctx, http.MethodPut, manifestBase+name, []byte(jsmYAML(name, instanceType, replicas)))
	return err
}

// jsm is the part of a stored JumpStartModel the checks read.
type jsm struct {
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Replicas *int32 `json:"replicas"`
	} `json:"spec"`
	Status struct {
		State string `json:"state"`
	} `json:"status"`
}

// getJSM returns the stored manifest, nil when it does not exist.
func (c *clients) getJSM(ctx context.Context, name string) (*jsm, error) {
	b, err := c.do(ctx, http.MethodGet, manifestBase+name, nil)
	var he *httpStatusError
	if errors.As(err, &he) && he.code == http.StatusNotFound {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var o jsm
	if err := json.Unmarshal(b, &o); err != nil {
		return nil, fmt.Errorf("decode %s: %w", name, err)
	}
	return &o, nil
}

// listManifests returns every stored manifest of both kinds.
func (c *clients) listManifests(ctx context.Context) ([]jsm, error) {
	var all []jsm
	for _, plural := range []string{"jumpstartmodels", "inferenceendpointconfigs"} {
		b, err := c.do(ctx, http.MethodGet, "/apis/inference.sagemaker.aws.amazon.com/v1/"+plural, nil)
		if err != nil {
			return nil, err
		}
		var l struct {
			Items []jsm `json:"items"`
		}
		if err := json.Unmarshal(b, &l); err != nil {
			return nil, fmt.Errorf("decode %s list: %w", plural, err)
		}
		all = append(all, l.Items...)
	}
	return all, nil
}

func (c *clients) do(ctx context.Context, method, path string, body []byte) ([]byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base()+path, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/yaml")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		return nil, &httpStatusError{code: resp.StatusCode, body: strings.TrimSpace(string(b))}
	}
	return b, nil
}
