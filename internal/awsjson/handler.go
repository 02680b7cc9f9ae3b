package awsjson

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"

	"github.com/capstan-dev/capstan/internal/awsauth"
)

// ContentType is the media type of every request and response body.
const ContentType = "application/x-amz-json-1.1"

// Op is one operation: the request body in, the output to encode (nil for
// {}) or an error out.
type Op func(ctx context.Context, body []byte) (any, error)

// Handler serves one AWS JSON 1.1 API: POST / with the operation named by
// X-Amz-Target (Prefix + operation name), errors in the protocol's envelope.
// What differs between the APIs is its fields; what they share is its code.
type Handler struct {
	// Prefix is the X-Amz-Target prefix, e.g. "SageMaker.".
	Prefix string
	// Name names the API in the 405 message and in logs, e.g. "control API".
	Name string
	Ops  map[string]Op
	// MaxBodyBytes bounds a request body.
	MaxBodyBytes int64
	// ToWire maps the API's own (domain) errors to their wire form and
	// returns nil for any other error; it is the one place per protocol that
	// does so. Errors, Violations, JSON decoding errors and oversized bodies
	// are mapped here.
	ToWire func(error) *Error
	// TooLargeCode and InternalCode are the API's codes for a body over
	// MaxBodyBytes and for an error nothing maps.
	TooLargeCode, InternalCode string
	// MessageMember is the error body's message member: SageMaker's model
	// names it "message", Application Auto Scaling's "Message".
	MessageMember string
	// EscapeHTML escapes <, > and & in bodies (\u003c…), as the SageMaker
	// API always has; Application Auto Scaling does not, as AWS does not.
	EscapeHTML bool
	// Log gets internal errors (Error) and refusals (Debug); required.
	Log *slog.Logger
}

var _ http.Handler = (*Handler)(nil)

// ServeHTTP dispatches on X-Amz-Target.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("x-amzn-RequestId", UUID())
	target := r.Header.Get("X-Amz-Target")
	op, ok := strings.CutPrefix(target, h.Prefix)
	if r.Method != http.MethodPost {
		h.writeError(w, op, Errorf(http.StatusMethodNotAllowed, CodeUnknownOperation, "The %s accepts only POST /.", h.Name))
		return
	}
	fn := h.Ops[op]
	if !ok || fn == nil {
		h.writeError(w, op, Errorf(http.StatusBadRequest, CodeUnknownOperation, "Operation %q is not supported.", target))
		return
	}
	// awsauth.ReadBody returns the body the signature check already read, or
	// reads it within MaxBodyBytes.
	body, err := awsauth.ReadBody(w, r, h.MaxBodyBytes)
	if err != nil {
		h.writeError(w, op, err)
		return
	}
	out, err := fn(r.Context(), body)
	if err != nil {
		h.writeError(w, op, err)
		return
	}
	w.Header().Set("Content-Type", ContentType)
	if out == nil {
		out = struct{}{}
	}
	h.encode(w, out)
}

// wire maps any error to its wire form: the protocol's own mapping first,
// then what every AWS JSON API answers alike.
func (h *Handler) wire(err error) *Error {
	var we *Error
	if errors.As(err, &we) {
		return we
	}
	var ve *Violations
	if errors.As(err, &ve) {
		return &Error{http.StatusBadRequest, CodeValidation, ve.Error()}
	}
	if h.ToWire != nil {
		if we := h.ToWire(err); we != nil {
			return we
		}
	}
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	if errors.As(err, &se) || errors.As(err, &te) {
		return Errorf(http.StatusBadRequest, CodeSerialization, "Could not parse the request body: %v", err)
	}
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return Errorf(http.StatusRequestEntityTooLarge, h.TooLargeCode, "Request body is larger than the limit of %d bytes.", mbe.Limit)
	}
	return Errorf(http.StatusInternalServerError, h.InternalCode, "An internal error occurred.")
}

// writeError sends err as an awsJson1_1 error: __type in the body and the
// X-Amzn-ErrorType header, since botocore reads one and the Go SDK the other.
func (h *Handler) writeError(w http.ResponseWriter, op string, err error) {
	we := h.wire(err)
	if we.Status >= 500 {
		h.Log.Error(h.Name+" internal error", "op", op, "err", err)
	} else {
		h.Log.Debug(h.Name+" error", "op", op, "code", we.Code, "message", we.Message)
	}
	hdr := w.Header()
	hdr.Set("Content-Type", ContentType)
	hdr.Set("X-Amzn-ErrorType", we.Code)
	w.WriteHeader(we.Status)
	h.encode(w, map[string]string{"__type": we.Code, h.MessageMember: we.Message})
}

func (h *Handler) encode(w io.Writer, v any) {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(h.EscapeHTML)
	_ = enc.Encode(v)
}

// Decode parses a request body into v; an empty body is {}. Unknown members
// are ignored, as AWS services ignore members newer than they know; a value
// of the wrong type is a SerializationException.
func Decode(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		body = []byte("{}")
	}
	if err := json.Unmarshal(body, v); err != nil {
		return Errorf(http.StatusBadRequest, CodeSerialization, "Could not parse the request body: %v", err)
	}
	return nil
}

// UUID is a random (version 4) UUID, the form of AWS request ids.
func UUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}
