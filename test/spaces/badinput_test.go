package spaces_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	sm "github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	"github.com/capstan-dev/capstan/internal/testutil"
)

// applyRaw posts a manifest to the spaces API and returns the status and
// the Kubernetes Status body.
func (s *server) applyRaw(yaml string) (int, kubeStatus) {
	s.t.Helper()
	code, b := s.do(http.MethodPost, "/apis/workspace.jupyter.org/v1alpha1/apply", []byte(yaml), nil)
	var st kubeStatus
	_ = json.Unmarshal(b, &st)
	return code, st
}

type kubeStatus struct {
	Message string
	Reason  string
	Details struct {
		Causes []struct{ Field, Message string }
	}
}

func (k kubeStatus) fields() []string {
	var out []string
	for _, c := range k.Details.Causes {
		out = append(out, c.Field)
	}
	return out
}

// TestBadInput: each bad workspace is refused with the field at fault and
// nothing is stored; a template whose program is missing fails with a
// clear state; a template in use cannot be deleted.
func TestBadInput(t *testing.T) {
	s := startServer(t, migCluster)
	// A second cluster, of CPU nodes only, made as HyperPod users make one.
	cfg := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", ""), Retryer: testutil.AWSRetryer}
	client := sm.NewFromConfig(cfg, func(o *sm.Options) { o.BaseEndpoint = aws.String(s.URL) })
	_, err := client.CreateCluster(context.Background(), &sm.CreateClusterInput{ClusterName: aws.String("cpu-only"),
		InstanceGroups: []smtypes.ClusterInstanceGroupSpecification{{InstanceGroupName: aws.String("cpu"), InstanceType: "ml.m5.xlarge",
			InstanceCount: aws.Int32(1), ExecutionRole: aws.String("arn:aws:iam::000000000000:role/capstan"),
			LifeCycleConfig: &smtypes.ClusterLifeCycleConfig{SourceS3Uri: aws.String("s3://bucket/lifecycle"), OnCreate: aws.String("on_create.sh")}}},
		Orchestrator: &smtypes.ClusterOrchestrator{Eks: &smtypes.ClusterOrchestratorEksConfig{ClusterArn: aws.String("arn:aws:eks:us-east-1:000000000000:cluster/capstan")}}})
	if err != nil {
		t.Fatalf("create cluster cpu-only: %v", err)
	}
	ws := func(name, spec string) string {
		return "apiVersion: workspace.jupyter.org/v1alpha1\nkind: Workspace\nmetadata:\n  name: " + name + "\n" + spec
	}
	for _, tc := range []struct {
		name, yaml, field, msg string
	}{
		{"missing template", ws("a", "spec:\n  displayName: a\n  templateRef: {name: no-such-template}\n"),
			"spec.templateRef.name", `WorkspaceTemplate "no-such-template" not found`},
		{"beyond the template's CPU", ws("a", "spec:\n  displayName: a\n  resources: {requests: {cpu: \"64\"}}\n"),
			"spec.resources.requests[cpu]", "above the template's maximum 32"},
		{"beyond the template's memory", ws("a", "spec:\n  displayName: a\n  resources: {requests: {memory: 1Ti}}\n"),
			"spec.resources.requests[memory]", "above the template's maximum 256Gi"},
		{"storage beyond the template's", ws("a", "spec:\n  displayName: a\n  storage: {size: 1Ti}\n"),
			"spec.storage.size", "primaryStorage.maxSize"},
		{"a GPU on a cluster without GPUs", ws("a", "  annotations: {capstan.dev/cluster: cpu-only}\nspec:\n  displayName: a\n  resources: {requests: {nvidia.com/gpu: 1}}\n"),
			"spec.resources.requests[nvidia.com/gpu]", "cluster cpu-only has no GPUs"},
		{"a MIG profile the cluster does not have", ws("a", "spec:\n  displayName: a\n  resources: {requests: {nvidia.com/mig-1g.10gb: 1}}\n"),
			"spec.resources.requests[nvidia.com/mig-1g.10gb]", "its MIG profiles: 7g.80gb"},
		{"an unknown cluster", ws("a", "  annotations: {capstan.dev/cluster: nowhere}\nspec:\n  displayName: a\n"),
			"metadata.annotations[capstan.dev/cluster]", `cluster "nowhere" not found`},
		{"a name that would escape the data dir", ws("../../etc", "spec:\n  displayName: a\n"),
			"metadata.name", "RFC 1123 label"},
		{"a namespace that would escape the data dir", "apiVersion: workspace.jupyter.org/v1alpha1\nkind: Workspace\nmetadata: {name: a, namespace: ..}\nspec: {displayName: a}\n",
			"metadata.namespace", "RFC 1123 label"},
		{"an environment variable capstan sets", ws("a", "spec:\n  displayName: a\n  env: [{name: PATH, value: /tmp}]\n"),
			"spec.env[0].name", "PATH"},
		{"idle shutdown of zero minutes", ws("a", "spec:\n  displayName: a\n  idleShutdown: {enabled: true, idleTimeoutInMinutes: 0}\n"),
			"spec.idleShutdown.idleTimeoutInMinutes", "between 1 and"},
		{"a bad desired status", ws("a", "spec:\n  displayName: a\n  desiredStatus: Paused\n"),
			"spec.desiredStatus", `"Paused"`},
		{"an unknown field", ws("a", "spec:\n  displayName: a\n  gpus: 1\n"),
			"spec.gpus", "unknown field"},
		{"half a GPU", ws("a", "spec:\n  displayName: a\n  resources: {requests: {nvidia.com/gpu: \"0.5\"}}\n"),
			"spec.resources.requests[nvidia.com/gpu]", "whole number"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, st := s.applyRaw(tc.yaml)
			if code != http.StatusUnprocessableEntity {
				t.Fatalf("got %d %+v, want 422", code, st)
			}
			found := false
			for _, c := range st.Details.Causes {
				found = found || c.Field == tc.field && strings.Contains(c.Message, tc.msg)
			}
			if !found {
				t.Errorf("causes %v (%s) lack %s: …%s…", st.fields(), st.Message, tc.field, tc.msg)
			}
		})
	}
	if code, b := s.do(http.MethodGet, "/apis/workspace.jupyter.org/v1alpha1/workspaces", nil, nil); code != http.StatusOK || strings.Contains(string(b), `"kind": "Workspace"`) {
		t.Fatalf("something was stored: %d %s", code, b)
	}
	// The CLI shows the field too, and exits non-zero.
	out, err := s.capstan("apply", "-f", writeFile(t, ws("a", "spec:\n  displayName: a\n  resources: {requests: {cpu: \"64\"}}\n")))
	if err == nil || !strings.Contains(out, "spec.resources.requests[cpu]") {
		t.Errorf("capstan apply of a bad workspace: err %v\n%s", err, out)
	}

	// A template whose program is not installed: accepted, then Failed
	// with the reason.
	s.apply(`apiVersion: workspace.jupyter.org/v1alpha1
kind: WorkspaceTemplate
metadata: {name: editor}
spec:
  displayName: An editor this machine lacks
  defaultImage: editor:latest
  defaultContainerConfig: {command: [capstan-no-such-editor]}
`)
	s.apply(ws("editor", "spec:\n  displayName: editor\n  templateRef: {name: editor}\n"))
	w := s.waitPhase("editor", "Failed", 30*time.Second)
	deg := ""
	for _, c := range w.Status.Conditions {
		if c.Type == "Degraded" && c.Status == "True" {
			deg = c.Reason + ": " + c.Message
		}
	}
	if !strings.Contains(deg, "ProgramNotFound") || !strings.Contains(deg, "capstan-no-such-editor") {
		t.Errorf("Degraded condition %q, want ProgramNotFound naming capstan-no-such-editor", deg)
	}
	// Its template is in use.
	code, b := s.do(http.MethodDelete, "/apis/workspace.jupyter.org/v1alpha1/namespaces/default/workspacetemplates/editor", nil, nil)
	if code != http.StatusConflict || !strings.Contains(string(b), "default/editor") {
		t.Errorf("deleting a template in use: %d %s", code, b)
	}
}

// TestTemplates: the two SageMaker templates are there by default; a
// user's template bounds the workspaces that name it, in the same apply.
func TestTemplates(t *testing.T) {
	s := startServer(t, migCluster)
	out := s.mustCapstan("get", "wst", "-A")
	for _, want := range []string{"sagemaker-jupyter-template", "sagemaker-code-editor-template", "jupyter-k8s-system"} {
		if !strings.Contains(out, want) {
			t.Errorf("capstan get wst -A lacks %s:\n%s", want, out)
		}
	}
	tmpl := `apiVersion: workspace.jupyter.org/v1alpha1
kind: WorkspaceTemplate
metadata: {name: small}
spec:
  displayName: Small notebooks
  defaultImage: jupyter/base-notebook
  defaultResources: {requests: {cpu: 500m, memory: 1Gi}}
  resourceBounds: {cpu: {min: 250m, max: "1"}, gpu: {min: "0", max: "0"}}
  defaultContainerConfig:
    command: [jupyter-notebook]
    args: [--no-browser, --allow-root, --ip=127.0.0.1, "--port=$(CAPSTAN_SPACE_PORT)", "--NotebookApp.base_url=$(CAPSTAN_SPACE_BASE_URL)", --NotebookApp.allow_remote_access=True]
  environmentVariables: [{name: JUPYTER_TOKEN, value: "$(CAPSTAN_SPACE_TOKEN)"}]
---
apiVersion: workspace.jupyter.org/v1alpha1
kind: Workspace
metadata: {name: tiny}
spec:
  displayName: tiny
  templateRef: {name: small}
  resources: {requests: {nvidia.com/mig-7g.80gb: 1}}
`
	code, st := s.applyRaw(tmpl)
	if code != http.StatusUnprocessableEntity || len(st.Details.Causes) == 0 || !strings.Contains(st.Details.Causes[0].Message, "resourceBounds.gpu.max") {
		t.Fatalf("a MIG slice against a template that allows no GPU: %d %+v", code, st)
	}
	out = s.apply(strings.Replace(tmpl, "  resources: {requests: {nvidia.com/mig-7g.80gb: 1}}\n", "", 1))
	if !strings.Contains(out, "workspacetemplate.workspace.jupyter.org/small created") || !strings.Contains(out, "workspace.workspace.jupyter.org/tiny created") {
		t.Fatalf("apply:\n%s", out)
	}
	w := s.waitPhase("tiny", "Running", 90*time.Second)
	if w.Spec.TemplateRef.Namespace != "default" {
		t.Errorf("templateRef resolved to namespace %q, want default", w.Spec.TemplateRef.Namespace)
	}
	if got := s.execute("tiny", `import os; print(os.environ.get("CAPSTAN_MIG_SLICE", "none"), os.environ["CAPSTAN_GPUS"])`); !strings.Contains(got, "none 0") {
		t.Errorf("a CPU space's environment says %q", got)
	}
}
