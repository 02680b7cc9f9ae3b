package runtimeapi

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
)

// FuzzEventStream checks both sides of the InvokeEndpointWithResponseStream
// framing with the SDK's decoder (the one the SDK client and capstan's bench
// client use):
//
//   - round trip: data split in two PayloadPart frames plus an exception
//     frame, written by frameWriter, decode to exactly those payloads and
//     headers, then a clean EOF;
//   - hostile input: data as raw frames, and data with its length and both
//     CRCs patched so that the decoder gets past the checksums into the
//     header and payload parsing, must never panic.
func FuzzEventStream(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "eventstream", "*.hex"))
	for _, p := range files {
		raw, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		b, err := hex.DecodeString(strings.TrimSpace(string(raw)))
		if err != nil {
			f.Fatalf("%s: %v", p, err)
		}
		f.Add(b, uint16(0))
	}
	f.Add([]byte("hello"), uint16(2))
	f.Add([]byte(`data: {"token":{"text":"hi"}}`+"\n\n"), uint16(7))
	f.Add([]byte{}, uint16(0))
	f.Add([]byte{0xff, 0xfe, 0, 0x80}, uint16(1))
	f.Fuzz(func(t *testing.T, data []byte, split uint16) {
		roundTrip(t, data, int(split))
		decodeHostile(data)
		decodeHostile(patchFrame(data))
	})
}

func roundTrip(t *testing.T, data []byte, split int) {
	split = min(split, len(data))
	var buf bytes.Buffer
	fw := newFrameWriter(&buf)
	if err := fw.payloadPart(data[:split]); err != nil {
		t.Fatal(err)
	}
	if err := fw.payloadPart(data[split:]); err != nil {
		t.Fatal(err)
	}
	msg := string(data)
	if err := fw.exception("ModelStreamError", msg, "StreamBroken"); err != nil {
		t.Fatal(err)
	}
	dec := eventstream.NewDecoder()
	r := bytes.NewReader(buf.Bytes())
	for i, part := range [][]byte{data[:split], data[split:]} {
		m, err := dec.Decode(r, nil)
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		wantHeaders(t, m, map[string]string{":event-type": "PayloadPart", ":content-type": "application/octet-stream", ":message-type": "event"})
		if !bytes.Equal(m.Payload, part) {
			t.Fatalf("frame %d payload %q, want %q", i, m.Payload, part)
		}
	}
	m, err := dec.Decode(r, nil)
	if err != nil {
		t.Fatalf("exception frame: %v", err)
	}
	wantHeaders(t, m, map[string]string{":message-type": "exception", ":exception-type": "ModelStreamError", ":content-type": "application/json"})
	var body struct{ Message, ErrorCode string }
	if err := json.Unmarshal(m.Payload, &body); err != nil {
		t.Fatalf("exception payload %q: %v", m.Payload, err)
	}
	// JSON carries text: each byte of invalid UTF-8 in the message arrives
	// as U+FFFD, as converting to runes does.
	if want := string([]rune(msg)); body.Message != want {
		t.Fatalf("exception message %q, want %q", body.Message, want)
	}
	if body.ErrorCode != "StreamBroken" {
		t.Fatalf("exception error code %q", body.ErrorCode)
	}
	if _, err := dec.Decode(r, nil); !errors.Is(err, io.EOF) {
		t.Fatalf("after the last frame: %v, want io.EOF", err)
	}
}

func wantHeaders(t *testing.T, m eventstream.Message, want map[string]string) {
	t.Helper()
	if len(m.Headers) != len(want) {
		t.Fatalf("headers %v, want %v", m.Headers, want)
	}
	for name, v := range want {
		if got := m.Headers.Get(name); got == nil || got.String() != v {
			t.Fatalf("header %s = %v, want %s", name, got, v)
		}
	}
}

// decodeHostile decodes frames from data until the first error. The SDK's
// decoder reads lengths it cannot trust as limits on readers, never as
// allocation sizes, so only panics can go wrong here.
func decodeHostile(data []byte) {
	dec := eventstream.NewDecoder()
	r := bytes.NewReader(data)
	// Every decoded frame consumes at least 16 bytes, so this ends.
	for {
		if _, err := dec.Decode(r, nil); err != nil {
			return
		}
	}
}

// patchFrame makes data one frame with a believable prelude: its total
// length set to len(data) and both CRCs correct, so the decoder parses the
// fuzzer's headers-length field, headers and payload.
func patchFrame(data []byte) []byte {
	const minLen = 16
	if len(data) < minLen {
		return data
	}
	b := bytes.Clone(data)
	binary.BigEndian.PutUint32(b[0:4], uint32(len(b)))
	binary.BigEndian.PutUint32(b[8:12], crc32.ChecksumIEEE(b[0:8]))
	binary.BigEndian.PutUint32(b[len(b)-4:], crc32.ChecksumIEEE(b[:len(b)-4]))
	return b
}
