package runtimeapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/capstan-dev/capstan/internal/asyncinference"
	"github.com/capstan-dev/capstan/internal/gateway"
)

// Header names of InvokeEndpointAsync (botocore's sagemaker-runtime model).
const (
	hdrInputLocation     = "X-Amzn-SageMaker-InputLocation"
	hdrOutputExtension   = "X-Amzn-SageMaker-S3OutputPathExtension"
	hdrFilename          = "X-Amzn-SageMaker-Filename"
	hdrRequestTTL        = "X-Amzn-SageMaker-RequestTTLSeconds"
	hdrInvocationTimeout = "X-Amzn-SageMaker-InvocationTimeoutSeconds"
	hdrOutputLocation    = "X-Amzn-SageMaker-OutputLocation"
	hdrFailureLocation   = "X-Amzn-SageMaker-FailureLocation"
)

var (
	inputLocationRE   = regexp.MustCompile(`^(https|s3)://([^/]+)/?(.*)$`)
	outputExtensionRE = regexp.MustCompile(`^[a-zA-Z0-9!_.*'()/-]+$`)
	filenameRE        = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9-_\.]*$`)
)

// AsyncSubmitter accepts InvokeEndpointAsync requests (*asyncinference.Manager).
type AsyncSubmitter interface {
	Submit(ctx context.Context, r asyncinference.Request) (asyncinference.Accepted, error)
}

// WithAsync serves POST /endpoints/{name}/async-invocations
// (InvokeEndpointAsync) through q and hands every other request to next.
func WithAsync(next http.Handler, q AsyncSubmitter, opts Options) http.Handler {
	if opts.AccountID == "" {
		opts.AccountID = "000000000000"
	}
	if opts.Region == "" {
		opts.Region = "us-east-1"
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	mux := http.NewServeMux()
	mux.Handle("/", next)
	mux.HandleFunc("POST /endpoints/{name}/async-invocations", func(w http.ResponseWriter, r *http.Request) {
		reqID := newRequestID()
		w.Header().Set(hdrRequestID, reqID)
		name := r.PathValue("name")
		ec := errContext{endpoint: name, accountID: opts.AccountID, region: opts.Region}
		req, err := parseAsync(r, name)
		if err == nil {
			var acc asyncinference.Accepted
			if acc, err = q.Submit(r.Context(), req); err == nil {
				h := w.Header()
				h.Set(hdrOutputLocation, acc.OutputLocation)
				if acc.FailureLocation != "" {
					h.Set(hdrFailureLocation, acc.FailureLocation)
				}
				body, _ := json.Marshal(struct {
					InferenceId string `json:"InferenceId"`
				}{acc.InferenceID})
				h.Set("Content-Type", "application/json")
				h.Set("Content-Length", strconv.Itoa(len(body)))
				w.WriteHeader(http.StatusAccepted)
				_, _ = w.Write(body)
				log.Debug("async invocation accepted", "request_id", reqID, "endpoint", name, "inference_id", acc.InferenceID)
				return
			}
		}
		we := toWire(asyncError(err, ec), ec)
		if we.status >= 500 {
			log.Warn("async invocation failed", "request_id", reqID, "endpoint", name, "code", we.code, "err", err)
		}
		writeWire(w, we)
	})
	return mux
}

// asyncError words the queue's errors; the rest go to toWire as they are.
func asyncError(err error, c errContext) error {
	switch {
	case errors.Is(err, asyncinference.ErrUnknownEndpoint):
		return gateway.ErrUnknownEndpoint
	case errors.Is(err, asyncinference.ErrNotAsync):
		return validationErrorf("Endpoint %s of account %s is not configured for asynchronous inference: its endpoint config has no AsyncInferenceConfig.", c.endpoint, c.accountID)
	case errors.Is(err, asyncinference.ErrNoS3):
		return validationErrorf("Endpoint %s of account %s cannot take asynchronous requests: %v.", c.endpoint, c.accountID, err)
	case errors.Is(err, asyncinference.ErrQueueFull):
		return &requestError{codeServiceUnavailable, http.StatusServiceUnavailable,
			fmt.Sprintf("The asynchronous inference queue of endpoint %s is full. Try again later.", c.endpoint)}
	}
	return err
}

// parseAsync validates the modelled headers of InvokeEndpointAsync.
func parseAsync(r *http.Request, name string) (asyncinference.Request, error) {
	if err := validateEndpointName(name); err != nil {
		return asyncinference.Request{}, err
	}
	rules := []headerRule{
		{hdrStreamCType, "contentType", maxASCII("contentType", 1024)},
		{hdrStreamAccept, "accept", maxASCII("accept", 1024)},
		{hdrCustomAttributes, "customAttributes", maxASCII("customAttributes", 1024)},
		{hdrInferenceID, "inferenceId", checkInferenceID},
		{hdrInputLocation, "inputLocation", checkInputLocation},
		{hdrOutputExtension, "s3OutputPathExtension", checkOutputExtension},
		{hdrFilename, "filename", checkFilename},
		{hdrRequestTTL, "requestTTLSeconds", intHeader("requestTTLSeconds", 60, 21600)},
		{hdrInvocationTimeout, "invocationTimeoutSeconds", intHeader("invocationTimeoutSeconds", 1, 3600)},
	}
	for _, rule := range rules {
		vs, ok := r.Header[http.CanonicalHeaderKey(rule.header)]
		if !ok {
			continue
		}
		if len(vs) > 1 {
			return asyncinference.Request{}, validationErrorf("Header %s may be given only once.", rule.header)
		}
		if err := rule.check(vs[0]); err != nil {
			return asyncinference.Request{}, err
		}
	}
	h := r.Header
	in := h.Get(hdrInputLocation)
	if in == "" {
		return asyncinference.Request{}, validationErrorf("1 validation error detected: Value null at 'inputLocation' failed to satisfy constraint: Member must not be null")
	}
	if !strings.HasPrefix(in, "s3://") {
		return asyncinference.Request{}, validationErrorf("InputLocation %s: capstan reads asynchronous inputs from S3 and needs an s3:// URI.", truncate(in, 256))
	}
	secs := func(k string) time.Duration {
		n, _ := strconv.Atoi(h.Get(k))
		return time.Duration(n) * time.Second
	}
	return asyncinference.Request{Endpoint: name, InputLocation: in, ContentType: h.Get(hdrStreamCType), Accept: h.Get(hdrStreamAccept),
		CustomAttributes: h.Get(hdrCustomAttributes), InferenceID: h.Get(hdrInferenceID), OutputExtension: h.Get(hdrOutputExtension),
		Filename: h.Get(hdrFilename), RequestTTL: secs(hdrRequestTTL), Timeout: secs(hdrInvocationTimeout)}, nil
}

func checkInputLocation(v string) error {
	switch {
	case len(v) < 1:
		return constraintError(v, "inputLocation", "Member must have length greater than or equal to 1")
	case len(v) > 1024:
		return constraintError(v, "inputLocation", "Member must have length less than or equal to 1024")
	case !inputLocationRE.MatchString(v):
		return constraintError(v, "inputLocation", "Member must satisfy regular expression pattern: ^(https|s3)://([^/]+)/?(.*)$")
	}
	return nil
}

func checkOutputExtension(v string) error {
	switch {
	case len(v) < 1:
		return constraintError(v, "s3OutputPathExtension", "Member must have length greater than or equal to 1")
	case len(v) > 512:
		return constraintError(v, "s3OutputPathExtension", "Member must have length less than or equal to 512")
	case strings.HasPrefix(v, "s3:") || strings.HasPrefix(v, "https:") || !outputExtensionRE.MatchString(v):
		return constraintError(v, "s3OutputPathExtension", `Member must satisfy regular expression pattern: ^(?!s3:|https:)[a-zA-Z0-9!_.*'()/-]+$`)
	}
	return nil
}

func checkFilename(v string) error {
	switch {
	case len(v) < 1:
		return constraintError(v, "filename", "Member must have length greater than or equal to 1")
	case len(v) > 32:
		return constraintError(v, "filename", "Member must have length less than or equal to 32")
	case strings.Count(v, ".") > 1 || !filenameRE.MatchString(v):
		return constraintError(v, "filename", `Member must satisfy regular expression pattern: ^(?!.*\..*\.)[a-zA-Z0-9][a-zA-Z0-9-_\.]*$`)
	}
	return nil
}

func intHeader(member string, lo, hi int) func(string) error {
	return func(v string) error {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			return validationErrorf("Header %s: %q is not an integer.", member, truncate(v, 64))
		}
		if n < lo {
			return constraintError(v, member, fmt.Sprintf("Member must have value greater than or equal to %d", lo))
		}
		if n > hi {
			return constraintError(v, member, fmt.Sprintf("Member must have value less than or equal to %d", hi))
		}
		return nil
	}
}
