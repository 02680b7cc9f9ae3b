package cloudwatch

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fxamacker/cbor/v2"
)

var update = flag.Bool("update", false, "rewrite the golden .response files")

// TestWireGolden replays requests botocore serialized (testdata/requests.py)
// in each protocol and compares the responses with the golden files: the
// status, the headers clients read and the body (CBOR in diagnostic
// notation).
func TestWireGolden(t *testing.T) {
	_, st, clk := fixture(t)
	h := NewHandler(st, HandlerOptions{Clock: clk, AccountID: "123456789012", RequestID: func() string { return "00000000-0000-4000-8000-000000000000" }})
	files, err := filepath.Glob("testdata/*.request")
	if err != nil || len(files) != 12 {
		t.Fatalf("request files %v, %v", files, err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			head, body, _ := bytes.Cut(raw, []byte("\n"))
			var meta struct {
				Path    string
				Headers map[string]string
			}
			if err := json.Unmarshal(head, &meta); err != nil {
				t.Fatal(err)
			}
			req := httptest.NewRequest(http.MethodPost, meta.Path, bytes.NewReader(body))
			for k, v := range meta.Headers {
				req.Header.Set(k, v)
			}
			if !IsRequest(req) {
				t.Fatal("IsRequest is false")
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			got := render(t, rec)
			golden := strings.TrimSuffix(f, ".request") + ".response"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Fatalf("response differs from %s (go test -run TestWireGolden -update rewrites it):\n got: %s\nwant: %s", golden, got, want)
			}
		})
	}
}

func render(t *testing.T, rec *httptest.ResponseRecorder) string {
	var b strings.Builder
	fmt.Fprintf(&b, "status: %d\n", rec.Code)
	for _, k := range []string{"Content-Type", "Smithy-Protocol", "X-Amzn-Query-Error", "X-Amzn-Errortype", "X-Amzn-Requestid"} {
		if v := rec.Header().Get(k); v != "" {
			fmt.Fprintf(&b, "%s: %s\n", strings.ToLower(k), v)
		}
	}
	b.WriteString("\n")
	body := rec.Body.Bytes()
	if rec.Header().Get("Content-Type") == cborContentType {
		d, err := cbor.Diagnose(body)
		if err != nil {
			t.Fatalf("response is not CBOR: %v", err)
		}
		b.WriteString(d + "\n")
	} else {
		b.Write(body)
		if !bytes.HasSuffix(body, []byte("\n")) {
			b.WriteString("\n")
		}
	}
	return b.String()
}
