package spaces_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/internal/testutil"
)

// sampleNotebooks are the notebooks under notebooks/ (docs/notebooks.md),
// each with a line its executed outputs must show.
var sampleNotebooks = []struct{ file, want string }{
	{"deploy-jumpstart.ipynb", "nb-jumpstart: DeploymentComplete, endpoint nb-jumpstart InService"},
	{"deploy-s3.ipynb", "nb-s3: DeploymentComplete, endpoint nb-s3 InService"},
	{"deploy-fsx.ipynb", "nb-fsx: DeploymentComplete, endpoint nb-fsx InService"},
}

// TestSampleNotebooks runs every sample notebook as a user of a space does:
// uploaded through the Jupyter API to a space of the same server, then
// executed there with Debian's `jupyter nbconvert --execute` (from a
// kernel of the space, inside its sandbox). The notebooks reach capstan at
// the CAPSTAN_URL the space gets, S3 (moto) at the S3_ENDPOINT_URL the
// workspace sets, and the FSx model an administrator put under fsxRoot.
// Any cell error fails the test; so does a notebook that leaves its
// deployment, endpoint or bucket behind.
func TestSampleNotebooks(t *testing.T) {
	s3 := testutil.StartMotoS3(t)
	s := startServer(t, fmt.Sprintf("modelSources:\n  s3: {endpoint: %q, accessKeyId: test, secretAccessKey: test}\n", s3))

	fsx := filepath.Join(s.dataDir, "fsx", "fs-0123456789abcdef0", "capstan", "tinyllama")
	if err := os.MkdirAll(fsx, 0o755); err != nil {
		t.Fatal(err)
	}
	config := `{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 2048,
 "intermediate_size": 5632, "num_hidden_layers": 22, "num_attention_heads": 32, "num_key_value_heads": 4,
 "vocab_size": 32000, "max_position_embeddings": 2048, "torch_dtype": "bfloat16"}`
	if err := os.WriteFile(filepath.Join(fsx, "config.json"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}

	s.apply(`apiVersion: workspace.jupyter.org/v1alpha1
kind: Workspace
metadata: {name: samples}
spec:
  displayName: samples
  desiredStatus: Running
  env:
    - {name: S3_ENDPOINT_URL, value: "` + s3 + `"}
    - {name: AWS_ACCESS_KEY_ID, value: test}
    - {name: AWS_SECRET_ACCESS_KEY, value: test}
`)
	s.waitPhase("samples", "Running", 2*time.Minute)

	for _, nb := range sampleNotebooks {
		b, err := os.ReadFile(filepath.Join("..", "..", "notebooks", nb.file))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := json.Marshal(map[string]any{"type": "notebook", "format": "json", "content": json.RawMessage(b)})
		if code, resp := s.do(http.MethodPut, "/spaces/default/samples/api/contents/"+nb.file, body, nil); code != http.StatusCreated && code != http.StatusOK {
			t.Fatalf("upload %s: %d %s", nb.file, code, resp)
		}
	}

	// One notebook after another, as their deployments share the nodes.
	var files []string
	for _, nb := range sampleNotebooks {
		files = append(files, `"`+nb.file+`"`)
	}
	out := s.executeWithin("samples", `import subprocess
for nb in [`+strings.Join(files, ", ")+`]:
    r = subprocess.run(["jupyter", "nbconvert", "--to", "notebook", "--execute",
                        "--ExecutePreprocessor.timeout=300", "--output", "executed-" + nb, nb],
                       capture_output=True, text=True)
    print(nb, "exit", r.returncode, flush=True)
    if r.returncode:
        print(r.stderr[-6000:], flush=True)
`, 15*time.Minute)
	for _, nb := range sampleNotebooks {
		if !strings.Contains(out, nb.file+" exit 0\n") {
			t.Errorf("%s did not run cleanly in the space:\n%s", nb.file, out)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	for _, nb := range sampleNotebooks {
		text := executedOutputs(t, s, "executed-"+nb.file)
		for _, want := range []string{nb.want, `"generated_text"`, "'completion_tokens'", " deleted\n"} {
			if !strings.Contains(text, want) {
				t.Errorf("%s: outputs lack %q:\n%s", nb.file, want, text)
			}
		}
	}

	// Each notebook cleaned up after itself.
	for _, plural := range []string{"jumpstartmodels", "inferenceendpointconfigs"} {
		_, b := s.do(http.MethodGet, "/apis/inference.sagemaker.aws.amazon.com/v1/"+plural, nil, nil)
		if regexp.MustCompile(`"name": *"nb-`).Match(b) {
			t.Errorf("a notebook left a %s behind: %s", plural, b)
		}
	}
	resp, err := http.Get(s3 + "/capstan-notebook-models")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("the S3 notebook left its bucket: GET answered %d", resp.StatusCode)
	}
}

// executedOutputs reads an executed notebook back through the Jupyter API
// and returns its code cells' text outputs; an error output or a code cell
// that did not run fails the test.
func executedOutputs(t *testing.T, s *server, file string) string {
	t.Helper()
	code, b := s.do(http.MethodGet, "/spaces/default/samples/api/contents/"+file+"?type=notebook&content=1", nil, nil)
	if code != http.StatusOK {
		t.Fatalf("get %s: %d %s", file, code, b)
	}
	var nb struct {
		Content struct {
			Cells []struct {
				CellType       string `json:"cell_type"`
				ExecutionCount *int   `json:"execution_count"`
				Outputs        []struct {
					OutputType string `json:"output_type"`
					Text       any    `json:"text"`
					Ename      string `json:"ename"`
					Evalue     string `json:"evalue"`
				} `json:"outputs"`
			} `json:"cells"`
		} `json:"content"`
	}
	if err := json.Unmarshal(b, &nb); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	var text strings.Builder
	for i, c := range nb.Content.Cells {
		if c.CellType != "code" {
			continue
		}
		if c.ExecutionCount == nil {
			t.Errorf("%s: code cell %d did not run", file, i)
		}
		for _, o := range c.Outputs {
			if o.OutputType == "error" {
				t.Errorf("%s: cell %d: %s: %s", file, i, o.Ename, o.Evalue)
			}
			switch v := o.Text.(type) {
			case string:
				text.WriteString(v)
			case []any:
				for _, l := range v {
					text.WriteString(fmt.Sprint(l))
				}
			}
		}
	}
	return text.String()
}
