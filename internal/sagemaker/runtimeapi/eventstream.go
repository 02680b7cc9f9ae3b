package runtimeapi

import (
	"encoding/json"
	"io"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
)

// frameWriter writes AWS event-stream messages for the ResponseStream union.
type frameWriter struct {
	w   io.Writer
	enc *eventstream.Encoder
}

func newFrameWriter(w io.Writer) *frameWriter {
	return &frameWriter{w: w, enc: eventstream.NewEncoder()}
}

// payloadPart writes one PayloadPart event carrying chunk verbatim.
func (f *frameWriter) payloadPart(chunk []byte) error {
	var h eventstream.Headers
	h.Set(":event-type", eventstream.StringValue("PayloadPart"))
	h.Set(":content-type", eventstream.StringValue("application/octet-stream"))
	h.Set(":message-type", eventstream.StringValue("event"))
	return f.enc.Encode(f.w, eventstream.Message{Headers: h, Payload: chunk})
}

// exception writes a modelled exception frame (ModelStreamError or
// InternalStreamFailure); errorCode is omitted when empty.
func (f *frameWriter) exception(kind, message, errorCode string) error {
	body := struct {
		Message   string `json:"Message"`
		ErrorCode string `json:"ErrorCode,omitempty"`
	}{message, errorCode}
	payload, err := json.Marshal(body)
	if err != nil {
		return err
	}
	var h eventstream.Headers
	h.Set(":message-type", eventstream.StringValue("exception"))
	h.Set(":exception-type", eventstream.StringValue(kind))
	h.Set(":content-type", eventstream.StringValue("application/json"))
	return f.enc.Encode(f.w, eventstream.Message{Headers: h, Payload: payload})
}
