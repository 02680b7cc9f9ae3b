// Package awsjsontest holds what tests of the AWS JSON 1.1 APIs share: a raw
// request (for bodies an SDK would not send) and golden-file comparison of
// wire bodies. Test helpers only; never imported by product code.
package awsjsontest

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/internal/awsjson"
)

// Call posts body to url as the operation target (X-Amz-Target, e.g.
// "SageMaker.ListModels") and returns the response's status, headers and
// body.
func Call(t testing.TB, url, target, body string) (int, http.Header, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url+"/", strings.NewReader(body))
	req.Header.Set("X-Amz-Target", target)
	req.Header.Set("Content-Type", awsjson.ContentType)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, raw
}

// Golden compares the JSON raw, indented, with testdata/<name>.json, or
// rewrites that file when update is set (a test's -update flag).
func Golden(t testing.TB, name string, raw []byte, update bool) {
	t.Helper()
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, raw, "", "  "); err != nil {
		t.Fatalf("not JSON: %s", raw)
	}
	path := filepath.Join("testdata", name+".json")
	if update {
		if err := os.WriteFile(path, pretty.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update)", err)
	}
	if !bytes.Equal(pretty.Bytes(), want) {
		t.Fatalf("%s differs:\ngot:\n%s\nwant:\n%s", path, pretty.Bytes(), want)
	}
}
