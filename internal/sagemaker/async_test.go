package sagemaker

import (
	"bytes"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/internal/catalog"
	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/endpoint"
	"github.com/capstan-dev/capstan/internal/fleet"
	"github.com/capstan-dev/capstan/internal/store"
)

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestAsyncInferenceConfigWire checks AsyncInferenceConfig validation on raw
// bodies (shapes an SDK cannot send) and that accepted-but-unacted members
// are warned about.
func TestAsyncInferenceConfigWire(t *testing.T) {
	st, err := store.Open(filepath.Join(t.TempDir(), "db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cat := catalog.Default()
	clk := clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	svc := endpoint.NewService(st, fleet.New(fleet.Default(cat)), cat, clk, nil)
	var logs syncBuf
	srv := httptest.NewServer(NewAPI(svc, Options{Catalog: cat, Logger: slog.New(slog.NewTextHandler(&logs, nil))}))
	defer srv.Close()
	if status, _, body := call(t, srv.URL, "CreateModel", `{"ModelName":"m","PrimaryContainer":{"Image":"capstan/sim","Environment":{"HF_MODEL_ID":"meta-llama/Llama-3.1-8B-Instruct"}}}`); status != 200 {
		t.Fatalf("create model: %d %s", status, body)
	}
	const variants = `"ProductionVariants":[{"VariantName":"AllTraffic","ModelName":"m","InstanceType":"ml.g5.xlarge","InitialInstanceCount":1}]`
	for _, tc := range []struct {
		name, cfg string
		status    int
		want      string
	}{
		{"not a structure", `"s3://b/o"`, 400, "at 'asyncInferenceConfig' failed to satisfy constraint: Member must be an AsyncInferenceConfig structure"},
		{"no output config", `{"ClientConfig":{"MaxConcurrentInvocationsPerInstance":2}}`, 400,
			"Value null at 'asyncInferenceConfig.outputConfig' failed to satisfy constraint: Member must not be null"},
		{"two errors", `{"ClientConfig":{"MaxConcurrentInvocationsPerInstance":0},"OutputConfig":{}}`, 400, "2 validation errors detected"},
		{"bad topic type", `{"OutputConfig":{"S3OutputPath":"s3://b/o","NotificationConfig":{"IncludeInferenceResponseIn":["SOMETIMES"]}}}`, 400,
			"at 'asyncInferenceConfig.outputConfig.notificationConfig.includeInferenceResponseIn.1.member' failed to satisfy constraint: Member must satisfy enum value set"},
		{"kms pattern", `{"OutputConfig":{"S3OutputPath":"s3://b/o","KmsKeyId":"a b"}}`, 400, "at 'asyncInferenceConfig.outputConfig.kmsKeyId'"},
		{"null is none", `null`, 200, ""},
		{"sns warned", `{"OutputConfig":{"S3OutputPath":"s3://b/o","KmsKeyId":"alias/k","NotificationConfig":{"ErrorTopic":"arn:aws:sns:us-east-1:123456789012:errs"}}}`, 200, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := strings.ReplaceAll(tc.name, " ", "-")
			status, _, body := call(t, srv.URL, "CreateEndpointConfig", `{"EndpointConfigName":"`+name+`",`+variants+`,"AsyncInferenceConfig":`+tc.cfg+`}`)
			if status != tc.status || !strings.Contains(string(body), tc.want) {
				t.Fatalf("%d %s; want %d with %q", status, body, tc.status, tc.want)
			}
			if status == 400 && !strings.Contains(string(body), "ValidationException") {
				t.Fatalf("not a ValidationException: %s", body)
			}
		})
	}
	if l := logs.String(); !strings.Contains(l, "NotificationConfig (capstan publishes no SNS notification") || !strings.Contains(l, "KmsKeyId") {
		t.Fatalf("no warning for NotificationConfig / KmsKeyId:\n%s", l)
	}
}
