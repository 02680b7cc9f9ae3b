package asyncinference

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Config is an endpoint config's AsyncInferenceConfig, in SageMaker's JSON
// shape (the control API stores it as received).
type Config struct {
	ClientConfig *ClientConfig `json:"ClientConfig,omitempty"`
	OutputConfig *OutputConfig `json:"OutputConfig,omitempty"`
}

// ClientConfig bounds concurrent invocations per instance.
type ClientConfig struct {
	MaxConcurrentInvocationsPerInstance *int `json:"MaxConcurrentInvocationsPerInstance,omitempty"`
}

// OutputConfig says where results and failures go.
type OutputConfig struct {
	KmsKeyId           string              `json:"KmsKeyId,omitempty"`
	S3OutputPath       string              `json:"S3OutputPath,omitempty"`
	S3FailurePath      string              `json:"S3FailurePath,omitempty"`
	NotificationConfig *NotificationConfig `json:"NotificationConfig,omitempty"`
}

// NotificationConfig names SNS topics; capstan sends no notification (the
// control API warns when topics are given).
type NotificationConfig struct {
	SuccessTopic               string   `json:"SuccessTopic,omitempty"`
	ErrorTopic                 string   `json:"ErrorTopic,omitempty"`
	IncludeInferenceResponseIn []string `json:"IncludeInferenceResponseIn,omitempty"`
}

// DefaultMaxConcurrentInvocationsPerInstance applies when ClientConfig does
// not set one (SageMaker then "chooses an optimal value").
const DefaultMaxConcurrentInvocationsPerInstance = 4

// MaxConcurrentInvocationsPerInstanceLimit is the modelled maximum.
const MaxConcurrentInvocationsPerInstanceLimit = 1000

// ParseConfig decodes a stored AsyncInferenceConfig; empty raw is (nil, nil).
func ParseConfig(raw json.RawMessage) (*Config, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var c Config
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, fmt.Errorf("AsyncInferenceConfig: %w", err)
	}
	return &c, nil
}

// PerInstance is the config's concurrency bound per instance.
func (c *Config) PerInstance() int {
	if c.ClientConfig != nil && c.ClientConfig.MaxConcurrentInvocationsPerInstance != nil {
		n := *c.ClientConfig.MaxConcurrentInvocationsPerInstance
		if n >= 1 && n <= MaxConcurrentInvocationsPerInstanceLimit {
			return n
		}
	}
	return DefaultMaxConcurrentInvocationsPerInstance
}

// S3Location is a parsed s3://bucket/key URI.
type S3Location struct{ Bucket, Key string }

func (l S3Location) String() string { return "s3://" + l.Bucket + "/" + l.Key }

// ParseS3URI splits s3://bucket[/key]; only the s3 scheme is served (an
// https:// URI would need a virtual-host mapping capstan does not guess).
func ParseS3URI(uri string) (S3Location, error) {
	rest, ok := strings.CutPrefix(uri, "s3://")
	if !ok {
		return S3Location{}, fmt.Errorf("%q is not an s3:// URI", uri)
	}
	bucket, key, _ := strings.Cut(rest, "/")
	if bucket == "" {
		return S3Location{}, fmt.Errorf("%q names no bucket", uri)
	}
	return S3Location{Bucket: bucket, Key: key}, nil
}

// join appends name to an S3 URI prefix with exactly one slash.
func join(prefix string, parts ...string) string {
	out := strings.TrimRight(prefix, "/")
	for _, p := range parts {
		if p = strings.Trim(p, "/"); p != "" {
			out += "/" + p
		}
	}
	return out
}
