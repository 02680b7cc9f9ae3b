package sagemaker

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"

	"github.com/capstan-dev/capstan/internal/asyncinference"
)

// Patterns of AsyncInferenceConfig members (SageMaker model).
var (
	patS3URI  = regexp.MustCompile(`^(https|s3)://([^/])/?(.*)$`)
	patKmsKey = regexp.MustCompile(`^[a-zA-Z0-9:/_-]*$`)
	patSNS    = regexp.MustCompile(`^arn:aws[a-z\-]*:sns:[a-z0-9\-]*:[0-9]{12}:[a-zA-Z0-9_.-]+$`)
)

// validateAsync checks an AsyncInferenceConfig against the model and
// capstan's limits (results go to S3 through the server's S3 settings, so
// only s3:// URIs are served). It returns the members accepted but not acted
// on (SNS notification topics), for the caller's warning.
func validateAsync(ve *validationError, raw json.RawMessage) (ignored []string) {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return nil
	}
	const p = "asyncInferenceConfig"
	var c asyncinference.Config
	if err := json.Unmarshal(raw, &c); err != nil {
		v := string(raw)
		if r := []rune(v); len(r) > 64 {
			v = string(r[:64]) + "…"
		}
		ve.Add(v, p, "Member must be an AsyncInferenceConfig structure: "+err.Error())
		return nil
	}
	if c.ClientConfig != nil {
		ve.IntRange(c.ClientConfig.MaxConcurrentInvocationsPerInstance, 1, asyncinference.MaxConcurrentInvocationsPerInstanceLimit,
			p+".clientConfig.maxConcurrentInvocationsPerInstance")
	}
	if !ve.Required(c.OutputConfig != nil, p+".outputConfig") {
		return nil
	}
	o := c.OutputConfig
	uri := func(v, path string, required bool) {
		if v == "" {
			if required {
				ve.Required(false, path)
			}
			return
		}
		switch {
		case len(v) > 512:
			ve.Add(v, path, "Member must have length less than or equal to 512")
		case !patS3URI.MatchString(v):
			ve.Add(v, path, "Member must satisfy regular expression pattern: (https|s3)://([^/])/?(.*)")
		case !strings.HasPrefix(v, "s3://"):
			ve.Add(v, path, "capstan writes asynchronous inference results through its S3 client and needs an s3:// URI")
		}
	}
	uri(o.S3OutputPath, p+".outputConfig.s3OutputPath", true)
	uri(o.S3FailurePath, p+".outputConfig.s3FailurePath", false)
	if o.KmsKeyId != "" {
		ve.maxLen(o.KmsKeyId, 2048, p+".outputConfig.kmsKeyId")
		if !patKmsKey.MatchString(o.KmsKeyId) {
			ve.Add(o.KmsKeyId, p+".outputConfig.kmsKeyId", "Member must satisfy regular expression pattern: [a-zA-Z0-9:/_-]*")
		}
		ignored = append(ignored, "AsyncInferenceConfig.OutputConfig.KmsKeyId (outputs are written without SSE-KMS)")
	}
	if n := o.NotificationConfig; n != nil {
		np := p + ".outputConfig.notificationConfig"
		for _, t := range []struct{ v, name string }{{n.SuccessTopic, "successTopic"}, {n.ErrorTopic, "errorTopic"}} {
			if t.v == "" {
				continue
			}
			if len(t.v) > 2048 {
				ve.Add(t.v, np+"."+t.name, "Member must have length less than or equal to 2048")
			} else if !patSNS.MatchString(t.v) {
				ve.Add(t.v, np+"."+t.name, `Member must satisfy regular expression pattern: arn:aws[a-z\-]*:sns:[a-z0-9\-]*:[0-9]{12}:[a-zA-Z0-9_.-]+`)
			}
		}
		ve.listLen(len(n.IncludeInferenceResponseIn), 0, 2, np+".includeInferenceResponseIn")
		for i, v := range n.IncludeInferenceResponseIn {
			if i < 2 {
				ve.enum(v, np+".includeInferenceResponseIn."+string(rune('1'+i))+".member", "SUCCESS_NOTIFICATION_TOPIC", "ERROR_NOTIFICATION_TOPIC")
			}
		}
		if n.SuccessTopic != "" || n.ErrorTopic != "" {
			ignored = append(ignored, "AsyncInferenceConfig.OutputConfig.NotificationConfig (capstan publishes no SNS notification; poll the output location)")
		}
	}
	return ignored
}
