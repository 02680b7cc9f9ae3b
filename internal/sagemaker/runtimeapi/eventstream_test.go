package runtimeapi

import (
	"bytes"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
)

// TestEventStreamKnownAnswers checks the framing against the reference §4
// vectors (which botocore decodes), kept verbatim in testdata/eventstream.
func TestEventStreamKnownAnswers(t *testing.T) {
	tests := []struct {
		name  string
		file  string
		write func(f *frameWriter) error
	}{
		{name: "empty message", file: "empty.hex", write: func(f *frameWriter) error {
			return f.enc.Encode(f.w, eventstream.Message{})
		}},
		{name: "PayloadPart hello", file: "payload_part_hello.hex", write: func(f *frameWriter) error {
			return f.payloadPart([]byte("hello"))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join("testdata", "eventstream", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			want := strings.TrimSpace(string(raw))
			var buf bytes.Buffer
			if err := tt.write(newFrameWriter(&buf)); err != nil {
				t.Fatal(err)
			}
			if got := hex.EncodeToString(buf.Bytes()); got != want {
				t.Fatalf("frame\n got %s\nwant %s", got, want)
			}
		})
	}
}

func TestExceptionFrame(t *testing.T) {
	var buf bytes.Buffer
	if err := newFrameWriter(&buf).exception("ModelStreamError", "boom", "StreamBroken"); err != nil {
		t.Fatal(err)
	}
	golden(t, "eventstream/model_stream_error.hex", []byte(hex.EncodeToString(buf.Bytes())+"\n"))
	msg, err := eventstream.NewDecoder().Decode(&buf, nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{":message-type": "exception", ":exception-type": "ModelStreamError", ":content-type": "application/json"} {
		if got := msg.Headers.Get(name); got == nil || got.String() != want {
			t.Fatalf("header %s = %v, want %s", name, got, want)
		}
	}
	if string(msg.Payload) != `{"Message":"boom","ErrorCode":"StreamBroken"}` {
		t.Fatalf("payload %s", msg.Payload)
	}
}

func TestWithStreamTrue(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"adds to object", `{"inputs":"hi"}`, `{"stream":true,"inputs":"hi"}`},
		{"empty object", `{}`, `{"stream":true}`},
		{"whitespace", "  {\"a\":1}\n", `{"stream":true,"a":1}`},
		{"explicit false kept", `{"stream":false,"a":1}`, `{"stream":false,"a":1}`},
		{"explicit true kept", `{"a":1,"stream":true}`, `{"a":1,"stream":true}`},
		{"not json", `hello`, `hello`},
		{"array", `[1,2]`, `[1,2]`},
		{"broken json", `{"a":`, `{"a":`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(withStreamTrue([]byte(tt.in))); got != tt.want {
				t.Fatalf("got %s, want %s", got, tt.want)
			}
		})
	}
}
