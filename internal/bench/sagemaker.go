package bench

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/capstan-dev/capstan/internal/clock"
)

// SageMakerClient calls InvokeEndpointWithResponseStream (or InvokeEndpoint
// when not streaming) with a SigV4-signed request carrying an OpenAI chat body,
// and reads the OpenAI chunks out of the event stream's PayloadPart frames.
type SageMakerClient struct {
	HTTP    *http.Client
	Clock   clock.Clock
	BaseURL string
	Stream  bool
	Creds   aws.Credentials
	Region  string
	signer  *v4.Signer
}

var _ Client = (*SageMakerClient)(nil)

// NewSageMakerClient returns a client signing with creds for region.
func NewSageMakerClient(hc *http.Client, clk clock.Clock, baseURL string, stream bool, creds aws.Credentials, region string) *SageMakerClient {
	return &SageMakerClient{HTTP: hc, Clock: clk, BaseURL: baseURL, Stream: stream, Creds: creds, Region: region, signer: v4.NewSigner()}
}

// SageMakerCredentialsFromEnv reads the standard AWS environment variables.
func SageMakerCredentialsFromEnv() (aws.Credentials, string, error) {
	c := aws.Credentials{
		AccessKeyID:     os.Getenv("AWS_ACCESS_KEY_ID"),
		SecretAccessKey: os.Getenv("AWS_SECRET_ACCESS_KEY"),
		SessionToken:    os.Getenv("AWS_SESSION_TOKEN"),
		Source:          "environment",
	}
	region := os.Getenv("AWS_REGION")
	if region == "" {
		region = os.Getenv("AWS_DEFAULT_REGION")
	}
	if region == "" {
		region = "us-east-1"
	}
	if c.AccessKeyID == "" || c.SecretAccessKey == "" {
		return c, region, errors.New("--api sagemaker: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (any values work against capstan without auth)")
	}
	return c, region, nil
}

// Do implements Client.
func (c *SageMakerClient) Do(ctx context.Context, req *Request, rec *Record) {
	// The endpoint name is in the path; the container serves its own model, so
	// the body names none (an OpenAI server would reject the endpoint's name).
	inner := *req
	inner.Model = ""
	body, expected := buildBody(&inner, true, c.Stream)
	rec.ExpectedInputTokens = expected
	op := "invocations"
	if c.Stream {
		op = "invocations-response-stream"
	}
	u := c.BaseURL + "/endpoints/" + url.PathEscape(req.Model) + "/" + op
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		rec.Error, rec.ErrorDetail = errConnect, err.Error()
		return
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("X-Amzn-SageMaker-Inference-Id", req.RequestID)
	hr.Header.Set("X-Request-Id", req.RequestID)
	markReplayable(hr, req.RequestID)
	if req.Item.SessionID != "" {
		hr.Header.Set("X-Session-Id", req.Item.SessionID)
	}
	sum := sha256.Sum256(body)
	sent := c.Clock.Now()
	if err := c.signer.SignHTTP(ctx, c.Creds, hr, hex.EncodeToString(sum[:]), "sagemaker", c.Region, sent); err != nil {
		rec.Error, rec.ErrorDetail = errConnect, fmt.Sprintf("sign: %v", err)
		return
	}
	m := newMeasurer(c.Clock, rec, sent)
	resp := send(ctx, c.HTTP, c.Clock, hr, rec, sent)
	if resp == nil {
		return
	}
	defer resp.Body.Close()
	if !c.Stream {
		readResponse(ctx, resp.Body, false, m)
		return
	}
	readEventStream(ctx, resp.Body, m)
}

// readEventStream decodes AWS event-stream frames; each PayloadPart's bytes are
// a slice of the container's SSE (or JSON-lines) output, split anywhere.
func readEventStream(ctx context.Context, body io.Reader, m *measurer) {
	defer m.finish()
	dec := eventstream.NewDecoder()
	var lines sseLines
	buf := make([]byte, 0, 4096)
	for {
		msg, err := dec.Decode(body, buf)
		if errors.Is(err, io.EOF) {
			// The end of the HTTP body ends the stream; flush a last unterminated line.
			lines.write([]byte("\n"), func(line []byte) bool { return handleLine(m, line) })
			return
		}
		if err != nil {
			m.rec.Error, m.rec.ErrorDetail = classify(ctx, err), err.Error()
			if m.rec.Error == errStream && ctx.Err() == nil {
				m.rec.Error = errDecode
			}
			return
		}
		switch headerString(msg, ":message-type") {
		case "event":
			if headerString(msg, ":event-type") != "PayloadPart" {
				continue
			}
			if !lines.write(msg.Payload, func(line []byte) bool { return handleLine(m, line) }) || m.done {
				return
			}
		case "exception":
			m.rec.Error, m.rec.ErrorDetail = errModel, headerString(msg, ":exception-type")+": "+string(msg.Payload)
			return
		default: // "error"
			m.rec.Error, m.rec.ErrorDetail = errModel, headerString(msg, ":error-code")+": "+headerString(msg, ":error-message")
			return
		}
	}
}

func handleLine(m *measurer, line []byte) bool {
	p, ok := sseData(line)
	if !ok {
		return true
	}
	if k, d := m.data(p); k != "" {
		m.rec.Error, m.rec.ErrorDetail = k, d
		return false
	}
	return true
}

func headerString(msg eventstream.Message, name string) string {
	if v := msg.Headers.Get(name); v != nil {
		return v.String()
	}
	return ""
}
