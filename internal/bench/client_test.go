package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"

	"github.com/capstan-dev/capstan/internal/clock"
)

// steppingReader advances a fake clock by step before every read, so each
// SSE line the parser sees arrives step later than the previous one.
type steppingReader struct {
	fc    *clock.Fake
	step  time.Duration
	lines []string
}

func (r *steppingReader) Read(p []byte) (int, error) {
	if len(r.lines) == 0 {
		return 0, io.EOF
	}
	r.fc.Step(r.step)
	n := copy(p, r.lines[0])
	r.lines[0] = r.lines[0][n:]
	if r.lines[0] == "" {
		r.lines = r.lines[1:]
	}
	return n, nil
}

func TestResponseParsing(t *testing.T) {
	usage := `data: {"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":4}}}` + "\n\n"
	tests := []struct {
		name      string
		stream    bool
		lines     []string
		wantErr   string
		wantTTFT  time.Duration
		wantOut   int
		wantITLs  int
		wantCache int
	}{
		{"chat with role-only first chunk", true, []string{
			`data: {"choices":[{"delta":{"role":"assistant","content":""}}]}` + "\n\n",
			`data: {"choices":[{"delta":{"content":"a"}}]}` + "\n\n",
			`data: {"choices":[{"delta":{"content":"b"}}]}` + "\n\n",
			`data: {"choices":[{"delta":{"content":"c"}}]}` + "\n\n",
			usage, "data: [DONE]\n\n"}, "", 20 * time.Millisecond, 3, 2, 4},
		{"completions without usage", true, []string{
			": keep-alive\n\n",
			`data: {"choices":[{"text":"a"}]}` + "\n\n",
			`data: {"choices":[{"text":"b"}]}` + "\n\n",
			"data: [DONE]\n\n"}, "", 20 * time.Millisecond, 2, 1, 0},
		{"error object mid-stream", true, []string{
			`data: {"choices":[{"text":"a"}]}` + "\n\n",
			`data: {"error":{"message":"engine died"}}` + "\n\n"}, errServer, 10 * time.Millisecond, 1, 0, 0},
		{"garbage", true, []string{"data: {not json\n\n"}, errDecode, 0, 0, 0, 0},
		{"empty stream", true, []string{"data: [DONE]\n\n"}, errEmpty, 0, 0, 0, 0},
		{"non-streaming body", false, []string{`{"choices":[{"message":{"content":"hello"}}],"usage":{"prompt_tokens":7,"completion_tokens":3}}`},
			"", 10 * time.Millisecond, 3, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fc := clock.NewFake(time.Unix(0, 0))
			rec := &Record{ExpectedInputTokens: 7}
			m := newMeasurer(fc, rec, fc.Now())
			readResponse(context.Background(), &steppingReader{fc: fc, step: 10 * time.Millisecond, lines: tt.lines}, tt.stream, m)
			if rec.Error != tt.wantErr {
				t.Fatalf("error %q (%s), want %q", rec.Error, rec.ErrorDetail, tt.wantErr)
			}
			if rec.TTFT != tt.wantTTFT || rec.OutputTokens != tt.wantOut || len(rec.ITLs) != tt.wantITLs || rec.CachedTokens != tt.wantCache {
				t.Fatalf("ttft %v out %d itls %v cached %d", rec.TTFT, rec.OutputTokens, rec.ITLs, rec.CachedTokens)
			}
			for _, d := range rec.ITLs {
				if d != 10*time.Millisecond {
					t.Fatalf("ITLs %v, want 10ms each", rec.ITLs)
				}
			}
		})
	}
}

func TestEventStreamErrorFrames(t *testing.T) {
	frame := func(headers map[string]string, payload string) []byte {
		var b bytes.Buffer
		msg := eventstream.Message{Payload: []byte(payload)}
		for k, v := range headers {
			msg.Headers.Set(k, eventstream.StringValue(v))
		}
		if err := eventstream.NewEncoder().Encode(&b, msg); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	part := func(s string) []byte {
		return frame(map[string]string{":message-type": "event", ":event-type": "PayloadPart", ":content-type": "application/octet-stream"}, s)
	}
	tests := []struct {
		name    string
		stream  [][]byte
		wantErr string
		wantOut int
	}{
		{"split lines, no terminator", [][]byte{part(`data: {"choices":[{"delta":{"content":"a"}}]}` + "\n\ndata: {\"cho"), part(`ices":[{"delta":{"content":"b"}}]}` + "\n\n")}, "", 2},
		{"last line without newline", [][]byte{part(`{"choices":[{"delta":{"content":"a"}}]}`)}, "", 1},
		{"model stream error", [][]byte{part(`data: {"choices":[{"delta":{"content":"a"}}]}` + "\n\n"),
			frame(map[string]string{":message-type": "exception", ":exception-type": "ModelStreamError"}, `{"Message":"x","ErrorCode":"StreamBroken"}`)}, errModel, 1},
		{"unmodelled error", [][]byte{frame(map[string]string{":message-type": "error", ":error-code": "InternalFailure", ":error-message": "boom"}, "")}, errModel, 0},
		{"corrupt frame", [][]byte{[]byte("\x00\x00\x00\x20garbage-garbage-garbage-garbage!")}, errDecode, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fc := clock.NewFake(time.Unix(0, 0))
			rec := &Record{}
			readEventStream(context.Background(), bytes.NewReader(bytes.Join(tt.stream, nil)), newMeasurer(fc, rec, fc.Now()))
			if rec.Error != tt.wantErr || rec.OutputTokens != tt.wantOut {
				t.Fatalf("error %q (%s) output %d; want %q, %d", rec.Error, rec.ErrorDetail, rec.OutputTokens, tt.wantErr, tt.wantOut)
			}
			if tt.wantErr == errModel && !strings.Contains(rec.ErrorDetail, "Stream") && !strings.Contains(rec.ErrorDetail, "InternalFailure") {
				t.Fatalf("detail %q", rec.ErrorDetail)
			}
		})
	}
}

// closingAfterOneServer answers the first request on each connection,
// keeping it open, and closes the connection when a second request arrives
// on it without answering: what llama-server does to a pooled connection.
func closingAfterOneServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	const body = `{"choices":[{"text":"hi"}],"usage":{"prompt_tokens":2,"completion_tokens":1}}`
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for n := 0; ; n++ {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					_, _ = io.Copy(io.Discard, req.Body)
					if n > 0 {
						return
					}
					fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
				}
			}()
		}
	}()
	return "http://" + ln.Addr().String()
}

// A request that goes out on a pooled connection the server then closes
// unanswered is sent again on a new one, not counted as failed.
func TestPooledConnectionClosedByServer(t *testing.T) {
	base := closingAfterOneServer(t)
	c := &OpenAIClient{HTTP: &http.Client{Transport: &http.Transport{}}, Clock: clock.Real{}, BaseURL: base}
	for i := range 4 {
		rec := &Record{}
		c.Do(context.Background(), &Request{Item: &Item{Prompt: "hello", OutputTokens: 1}, Model: "m", RequestID: fmt.Sprint("r", i)}, rec)
		if rec.Error != "" {
			t.Fatalf("request %d: %s (%s)", i, rec.Error, rec.ErrorDetail)
		}
	}
}
