package workspace

import (
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/internal/manifest"
)

func decodeWorkspace(t *testing.T, y string) *Workspace {
	t.Helper()
	o, err := Decode([]byte(y))
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	w, ok := o.(*Workspace)
	if !ok {
		t.Fatalf("decoded a %T", o)
	}
	w.Default()
	return w
}

func TestDecode(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, path, msg string
	}{
		{"the documentation's example", "apiVersion: workspace.jupyter.org/v1alpha1\nkind: Workspace\nmetadata: {name: my-space}\nspec: {displayName: my-space, desiredStatus: Running}\n", "", ""},
		{"another group", "apiVersion: inference.sagemaker.aws.amazon.com/v1\nkind: Workspace\nmetadata: {name: a}\nspec: {displayName: a}\n", "apiVersion", "must be workspace.jupyter.org/v1alpha1"},
		{"another kind", "apiVersion: workspace.jupyter.org/v1alpha1\nkind: Notebook\nmetadata: {name: a}\n", "kind", `unsupported kind "Notebook"`},
		{"an unknown field", "apiVersion: workspace.jupyter.org/v1alpha1\nkind: Workspace\nmetadata: {name: a}\nspec: {displayName: a, gpu: 1}\n", "spec.gpu", "unknown field"},
		{"a wrong type", "apiVersion: workspace.jupyter.org/v1alpha1\nkind: Workspace\nmetadata: {name: a}\nspec: {displayName: a, idleShutdown: {enabled: yes-please}}\n", "spec.idleShutdown.enabled", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode([]byte(tc.yaml))
			if tc.path == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			found := false
			for _, fe := range manifest.FieldErrors(err) {
				found = found || fe.Path == tc.path && strings.Contains(fe.Message, tc.msg)
			}
			if !found {
				t.Fatalf("error %v lacks %s: %s", err, tc.path, tc.msg)
			}
		})
	}
}

func TestWorkspaceDefaults(t *testing.T) {
	w := decodeWorkspace(t, "apiVersion: workspace.jupyter.org/v1alpha1\nkind: Workspace\nmetadata: {name: a}\nspec: {displayName: a}\n")
	if w.Spec.DesiredStatus != StatusRunning || w.Metadata.Namespace != "default" {
		t.Errorf("defaults: status %q namespace %q", w.Spec.DesiredStatus, w.Metadata.Namespace)
	}
	if r := w.Spec.TemplateRef; r == nil || r.Name != JupyterTemplate || r.Namespace != TemplateNamespace {
		t.Errorf("default template %+v", r)
	}
	if err := w.Validate(); err != nil {
		t.Errorf("valid workspace refused: %v", err)
	}
}

func TestWorkspaceValidate(t *testing.T) {
	base := "apiVersion: workspace.jupyter.org/v1alpha1\nkind: Workspace\nmetadata: {name: a}\nspec:\n  displayName: a\n"
	for _, tc := range []struct {
		name, spec, path string
	}{
		{"no desired status value", "  desiredStatus: Sleeping\n", "spec.desiredStatus"},
		{"bad desired status", "  desiredStatus: Paused\n", "spec.desiredStatus"},
		{"bad ownership", "  ownershipType: Mine\n", "spec.ownershipType"},
		{"unknown resource", "  resources: {requests: {example.com/fpga: 1}}\n", "spec.resources.requests[example.com/fpga]"},
		{"negative cpu", "  resources: {requests: {cpu: \"-1\"}}\n", "spec.resources.requests[cpu]"},
		{"bad quantity", "  resources: {requests: {memory: lots}}\n", "spec.resources.requests[memory]"},
		{"fraction of a GPU", "  resources: {requests: {nvidia.com/gpu: 1.5}}\n", "spec.resources.requests[nvidia.com/gpu]"},
		{"too many GPUs", "  resources: {requests: {nvidia.com/gpu: 1000}}\n", "spec.resources.requests[nvidia.com/gpu]"},
		{"two slices", "  resources: {requests: {nvidia.com/mig-1g.10gb: 2}}\n", "spec.resources.requests[nvidia.com/mig-1g.10gb]"},
		{"malformed MIG", "  resources: {requests: {nvidia.com/mig-4g: 1}}\n", "spec.resources.requests[nvidia.com/mig-4g]"},
		{"GPU and slice", "  resources: {requests: {nvidia.com/gpu: 1, nvidia.com/mig-1g.10gb: 1}}\n", "spec.resources"},
		{"limit below request", "  resources: {requests: {cpu: \"2\"}, limits: {cpu: \"1\"}}\n", "spec.resources.limits[cpu]"},
		{"relative mount path", "  storage: {mountPath: home}\n", "spec.storage.mountPath"},
		{"zero storage", "  storage: {size: \"0\"}\n", "spec.storage.size"},
		{"loader variable", "  env: [{name: LD_PRELOAD, value: /x.so}]\n", "spec.env[0].name"},
		{"capstan's variable", "  env: [{name: CAPSTAN_SPACE_TOKEN, value: x}]\n", "spec.env[0].name"},
		{"valueFrom", "  env: [{name: A, valueFrom: {secretKeyRef: {name: s, key: k}}}]\n", "spec.env[0].valueFrom"},
		{"empty program", "  containerConfig: {command: [\"\"]}\n", "spec.containerConfig.command[0]"},
		{"bad template name", "  templateRef: {name: ../x}\n", "spec.templateRef.name"},
		{"idle of a year", "  idleShutdown: {enabled: true, idleTimeoutInMinutes: 525600}\n", "spec.idleShutdown.idleTimeoutInMinutes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := decodeWorkspace(t, base+tc.spec)
			err := w.Validate()
			found := false
			for _, fe := range manifest.FieldErrors(err) {
				found = found || fe.Path == tc.path
			}
			if !found {
				t.Fatalf("Validate: %v; want an error at %s", err, tc.path)
			}
		})
	}
}

func TestDefaultTemplatesAreValid(t *testing.T) {
	for _, tmpl := range DefaultTemplates() {
		if err := tmpl.Validate(); err != nil {
			t.Errorf("%s: %v", tmpl.Metadata.Name, err)
		}
	}
}

func TestResolve(t *testing.T) {
	tmpl := DefaultTemplates()[0]
	for _, tc := range []struct {
		name, spec, path string
		check            func(t *testing.T, r Resolved)
	}{
		{name: "template defaults", check: func(t *testing.T, r Resolved) {
			if r.Request.MilliCPU != 1000 || r.Request.MemoryBytes != 2<<30 || r.IdleTimeout != 0 || r.AppType != AppJupyter {
				t.Errorf("resolved %+v", r)
			}
			if r.Command[0] != "jupyter-notebook" || r.Env["JUPYTER_TOKEN"] != "$("+EnvToken+")" {
				t.Errorf("command %v env %v", r.Command, r.Env)
			}
		}},
		{name: "a slice keeps the default CPU and memory", spec: "  resources: {requests: {nvidia.com/mig-1g.10gb: 1}}\n", check: func(t *testing.T, r Resolved) {
			if r.Request.MIGProfile != "1g.10gb" || r.Request.MilliCPU != 1000 {
				t.Errorf("resolved %+v", r.Request)
			}
		}},
		{name: "the workspace's env wins", spec: "  env: [{name: JUPYTER_TOKEN, value: mine}]\n", check: func(t *testing.T, r Resolved) {
			if r.Env["JUPYTER_TOKEN"] != "mine" {
				t.Errorf("env %v", r.Env)
			}
		}},
		{name: "idle shutdown", spec: "  idleShutdown: {enabled: true, idleTimeoutInMinutes: 30}\n", check: func(t *testing.T, r Resolved) {
			if r.IdleTimeout.Minutes() != 30 {
				t.Errorf("idle %v", r.IdleTimeout)
			}
		}},
		{name: "instance type selector", spec: "  nodeSelector: {node.kubernetes.io/instance-type: ml.g5.xlarge}\n", check: func(t *testing.T, r Resolved) {
			if r.InstanceType != "ml.g5.xlarge" {
				t.Errorf("instance type %q", r.InstanceType)
			}
		}},
		{name: "an image not allowed", spec: "  image: my/own:1\n", path: "spec.image"},
		{name: "too many CPUs", spec: "  resources: {requests: {cpu: \"33\"}}\n", path: "spec.resources.requests[cpu]"},
		{name: "too little memory", spec: "  resources: {requests: {memory: 1Mi}}\n", path: "spec.resources.requests[memory]"},
		{name: "too many GPUs", spec: "  resources: {requests: {nvidia.com/gpu: 9}}\n", path: "spec.resources.requests[nvidia.com/gpu]"},
		{name: "too much storage", spec: "  storage: {size: 200Gi}\n", path: "spec.storage.size"},
		{name: "too little storage", spec: "  storage: {size: 100Mi}\n", path: "spec.storage.size"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := decodeWorkspace(t, "apiVersion: workspace.jupyter.org/v1alpha1\nkind: Workspace\nmetadata: {name: a}\nspec:\n  displayName: a\n"+tc.spec)
			if err := w.Validate(); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			r, err := Resolve(w, tmpl)
			if tc.path == "" {
				if err != nil {
					t.Fatalf("Resolve: %v", err)
				}
				tc.check(t, r)
				return
			}
			found := false
			for _, fe := range manifest.FieldErrors(err) {
				found = found || fe.Path == tc.path
			}
			if !found {
				t.Fatalf("Resolve: %v; want an error at %s", err, tc.path)
			}
		})
	}
}

func TestIdleOverridePolicy(t *testing.T) {
	tmpl := DefaultTemplates()[0]
	no := false
	tmpl.Spec.IdleShutdownOverrides.Allow = &no
	w := decodeWorkspace(t, "apiVersion: workspace.jupyter.org/v1alpha1\nkind: Workspace\nmetadata: {name: a}\nspec:\n  displayName: a\n  idleShutdown: {enabled: true, idleTimeoutInMinutes: 30}\n")
	_, err := Resolve(w, tmpl)
	if fe := manifest.FieldErrors(err); len(fe) != 1 || fe[0].Path != "spec.idleShutdown" {
		t.Fatalf("Resolve: %v; want spec.idleShutdown refused", err)
	}
}

func TestIgnored(t *testing.T) {
	w := decodeWorkspace(t, "apiVersion: workspace.jupyter.org/v1alpha1\nkind: Workspace\nmetadata: {name: a}\nspec:\n  displayName: a\n  tolerations: [{key: k}]\n  nodeSelector: {zone: a}\n")
	got := strings.Join(Ignored(w, Resolved{Ownership: Public, Access: Public}), "\n")
	for _, want := range []string{"spec.tolerations has no effect", "spec.nodeSelector[zone] has no effect"} {
		if !strings.Contains(got, want) {
			t.Errorf("Ignored lacks %q:\n%s", want, got)
		}
	}
	if n := len(Ignored(decodeWorkspace(t, "apiVersion: workspace.jupyter.org/v1alpha1\nkind: Workspace\nmetadata: {name: a}\nspec: {displayName: a}\n"), Resolved{})); n != 0 {
		t.Errorf("a plain workspace got %d warnings", n)
	}
}

func TestDisplayNameRequired(t *testing.T) {
	w := decodeWorkspace(t, "apiVersion: workspace.jupyter.org/v1alpha1\nkind: Workspace\nmetadata: {name: a}\nspec: {desiredStatus: Running}\n")
	if fe := manifest.FieldErrors(w.Validate()); len(fe) != 1 || fe[0].Path != "spec.displayName" {
		t.Fatalf("Validate: %v; want spec.displayName required", fe)
	}
}
