package sagemaker

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	sm "github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	"github.com/aws/smithy-go"
	"github.com/capstan-dev/capstan/internal/testutil"
)

// TestCreateModelEnvironment checks SageMaker's own constraints on a
// container's Environment through the SDK. A loader variable such as
// LD_PRELOAD is accepted, as SageMaker accepts it: the map never reaches an
// engine process (only HF_MODEL_ID / SM_MODEL_ID are read).
func TestCreateModelEnvironment(t *testing.T) {
	srv, _ := newAPI(t)
	client := sm.New(sm.Options{Region: "eu-west-1", BaseEndpoint: aws.String(srv.URL), Retryer: testutil.AWSRetryer(),
		Credentials: credentials.NewStaticCredentialsProvider("AKID", "SECRET", "")})
	env := func(extra map[string]string) map[string]string {
		m := map[string]string{"SM_MODEL_ID": "llama-3.1-8b"}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	many := map[string]string{}
	for i := range 101 {
		many["V"+strings.Repeat("X", i)] = "1"
	}
	tests := []struct {
		name    string
		primary map[string]string
		others  []map[string]string // Containers[]
		wantMsg string              // "" = accepted
	}{
		{"plain", env(map[string]string{"OPTION_ROLLING_BATCH": "auto", "LD_PRELOAD": "/x.so"}), nil, ""},
		{"key pattern", env(map[string]string{"bad-key": "1"}), nil,
			"Value 'bad-key' at 'primaryContainer.environment' failed to satisfy constraint: Map keys must satisfy constraint: [Member must have length less than or equal to 1024, Member must satisfy regular expression pattern: [a-zA-Z_][a-zA-Z0-9_]*]"},
		{"key length", env(map[string]string{strings.Repeat("K", 1025): "1"}), nil, "Map keys must satisfy constraint"},
		{"value length", env(map[string]string{"V": strings.Repeat("v", 1025)}), nil,
			"at 'primaryContainer.environment' failed to satisfy constraint: Map value must satisfy constraint: [Member must have length less than or equal to 1024]"},
		{"too many entries", many, nil, "Value '[101 entries]' at 'primaryContainer.environment' failed to satisfy constraint: Member must have length less than or equal to 100"},
		{"containers member", nil, []map[string]string{env(nil), env(map[string]string{"1X": "1"})},
			"Value '1X' at 'containers.2.member.environment' failed to satisfy constraint: Map keys"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := &sm.CreateModelInput{ModelName: aws.String("m" + strings.Repeat("x", i))}
			if tt.primary != nil {
				in.PrimaryContainer = &smtypes.ContainerDefinition{Environment: tt.primary}
			}
			for _, e := range tt.others {
				in.Containers = append(in.Containers, smtypes.ContainerDefinition{Environment: e})
			}
			_, err := client.CreateModel(context.Background(), in)
			if tt.wantMsg == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var ae smithy.APIError
			if !errors.As(err, &ae) || ae.ErrorCode() != "ValidationException" || !strings.Contains(ae.ErrorMessage(), tt.wantMsg) {
				t.Fatalf("CreateModel = %v, want ValidationException containing %q", err, tt.wantMsg)
			}
		})
	}
}
