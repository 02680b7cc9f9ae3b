package workspace

import (
	"fmt"
	"time"

	"github.com/capstan-dev/capstan/internal/manifest"
)

// The templates SageMaker provides, present by default, in the namespace
// the HyperPod CLI's --template-ref names.
const (
	TemplateNamespace  = "jupyter-k8s-system"
	JupyterTemplate    = "sagemaker-jupyter-template"
	CodeEditorTemplate = "sagemaker-code-editor-template"
)

// Variables capstan sets for every space's process, and expands as $(NAME)
// in its command, args and env values (Kubernetes' rule: $$ is a literal $).
const (
	EnvPort    = "CAPSTAN_SPACE_PORT"     // the loopback port to serve on
	EnvBaseURL = "CAPSTAN_SPACE_BASE_URL" // /spaces/<namespace>/<name>/
	EnvToken   = "CAPSTAN_SPACE_TOKEN"    // the app's token, which capstan's proxy sends
)

// DefaultTemplates are the two SageMaker templates: JupyterLab (the
// Jupyter server Debian packages as jupyter-notebook) and Code Editor
// (code-server, which capstan does not install: a space of it fails with a
// clear reason until it is on PATH).
func DefaultTemplates() []*WorkspaceTemplate {
	yes, no := true, false
	one, week := 1, MaxIdleMinutes
	bounds := &ResourceBounds{
		CPU:    &ResourceRange{Min: "250m", Max: "32"},
		Memory: &ResourceRange{Min: "512Mi", Max: "256Gi"},
		GPU:    &ResourceRange{Min: "0", Max: "8"},
	}
	storage := &StorageConfig{DefaultSize: "10Gi", MinSize: ptr(manifest.Quantity("1Gi")), MaxSize: ptr(manifest.Quantity("100Gi")),
		DefaultMountPath: "/home/sagemaker-user"}
	defaults := &manifest.ResourceRequirements{Requests: map[string]manifest.Quantity{"cpu": "1", "memory": "2Gi"}}
	out := []*WorkspaceTemplate{
		{Metadata: manifest.ObjectMeta{Name: JupyterTemplate, Namespace: TemplateNamespace}, Spec: WorkspaceTemplateSpec{
			DisplayName:       "SageMaker JupyterLab",
			Description:       "A Jupyter server with a Python 3 kernel, in the space's own home directory.",
			DefaultImage:      "public.ecr.aws/sagemaker/sagemaker-distribution:latest-cpu",
			AllowCustomImages: &no,
			DefaultResources:  defaults,
			ResourceBounds:    bounds,
			PrimaryStorage:    storage,
			AppType:           AppJupyter,
			// The token goes through the environment, which only the
			// space's user can read, not argv, which every user can.
			EnvironmentVariables: []manifest.EnvVar{{Name: "JUPYTER_TOKEN", Value: "$(" + EnvToken + ")"}},
			DefaultContainerConfig: &ContainerConfig{
				Command: []string{"jupyter-notebook"},
				Args: []string{"--no-browser", "--allow-root", "--ip=127.0.0.1", "--port=$(" + EnvPort + ")",
					"--NotebookApp.port_retries=0", "--NotebookApp.base_url=$(" + EnvBaseURL + ")",
					"--NotebookApp.allow_remote_access=True",
					"--notebook-dir=$(HOME)"},
			},
			DefaultIdleShutdown:   &IdleShutdown{Enabled: false, IdleTimeoutInMinutes: 60},
			IdleShutdownOverrides: &IdleShutdownPolicy{Allow: &yes, MinTimeoutMinutes: &one, MaxTimeoutMinutes: &week},
		}},
		{Metadata: manifest.ObjectMeta{Name: CodeEditorTemplate, Namespace: TemplateNamespace}, Spec: WorkspaceTemplateSpec{
			DisplayName:       "SageMaker Code Editor",
			Description:       "Code Editor (code-server, the open-source VS Code server), when code-server is installed on the node.",
			DefaultImage:      "public.ecr.aws/sagemaker/sagemaker-distribution:latest-cpu",
			AllowCustomImages: &no,
			DefaultResources:  defaults,
			ResourceBounds:    bounds,
			PrimaryStorage:    storage,
			AppType:           AppCodeEditor,
			// code-server takes a hashed password whose hash is also its
			// session cookie's value; the space's token stands for that
			// hash, and capstan's proxy sends it as the cookie. Like
			// Jupyter's, it goes through the environment, not argv.
			EnvironmentVariables: []manifest.EnvVar{{Name: "HASHED_PASSWORD", Value: "$(" + EnvToken + ")"}},
			DefaultContainerConfig: &ContainerConfig{
				Command: []string{"code-server"},
				Args: []string{"--bind-addr=127.0.0.1:$(" + EnvPort + ")", "--auth=password",
					"--abs-proxy-base-path=$(" + EnvBaseURL + ")", "--disable-telemetry", "--disable-update-check",
					"--disable-workspace-trust", "$(HOME)"},
			},
			DefaultIdleShutdown:   &IdleShutdown{Enabled: false, IdleTimeoutInMinutes: 60},
			IdleShutdownOverrides: &IdleShutdownPolicy{Allow: &yes, MinTimeoutMinutes: &one, MaxTimeoutMinutes: &week},
		}},
	}
	for _, t := range out {
		t.Default()
	}
	return out
}

func ptr[T any](v T) *T { return &v }

// Resolved is a workspace merged with its template: what capstan runs.
type Resolved struct {
	AppType      string
	Image        string
	Command      []string // program and its arguments, before $(VAR) expansion
	Env          map[string]string
	Request      Request
	InstanceType string // from nodeSelector, "" for any
	StorageBytes int64
	MountPath    string
	IdleTimeout  time.Duration // 0: no idle shutdown
	Ownership    string
	Access       string
}

// Resolve merges w with its template t and checks what the template
// bounds: the image against its allowed images, resources against its
// resource bounds, storage against its sizes, and idle shutdown against
// its override policy. Errors are FieldErrors naming the workspace's field.
func Resolve(w *Workspace, t *WorkspaceTemplate) (Resolved, error) {
	var errs manifest.ErrorList
	s, ts := &w.Spec, &t.Spec
	r := Resolved{AppType: ts.AppType, Image: ts.DefaultImage, Env: map[string]string{},
		Ownership: ts.DefaultOwnershipType, Access: ts.DefaultAccessType}
	if s.AppType != "" {
		r.AppType = s.AppType
	}
	if s.Image != "" && s.Image != ts.DefaultImage {
		allowed := ts.AllowCustomImages != nil && *ts.AllowCustomImages
		for _, im := range ts.AllowedImages {
			allowed = allowed || im == s.Image
		}
		if !allowed {
			errs.Add("spec.image", "%q is not allowed by template %s/%s (its default image %s, or one of allowedImages)", s.Image, t.Metadata.Namespace, t.Metadata.Name, ts.DefaultImage)
		}
		r.Image = s.Image
	}
	if s.OwnershipType != "" {
		r.Ownership = s.OwnershipType
	}
	if s.AccessType != "" {
		r.Access = s.AccessType
	}
	// The workspace's resources override the template's defaults one by
	// one, so asking for a MIG slice keeps the default CPU and memory.
	res, p := mergeResources(ts.DefaultResources, s.Resources), "spec.resources"
	req, err := Requests(res, p)
	if err != nil {
		errs = append(errs, manifest.FieldErrors(err)...)
	} else {
		errs = append(errs, checkBounds(ts.ResourceBounds, req, p)...)
	}
	r.Request = req

	cfg := ts.DefaultContainerConfig
	if cfg != nil {
		r.Command = append(append([]string{}, cfg.Command...), cfg.Args...)
	}
	if c := s.ContainerConfig; c != nil {
		prog, args := []string(nil), []string(nil)
		if cfg != nil {
			prog, args = cfg.Command, cfg.Args
		}
		if len(c.Command) > 0 {
			prog = c.Command
		}
		if len(c.Args) > 0 {
			args = c.Args
		}
		r.Command = append(append([]string{}, prog...), args...)
	}
	if len(r.Command) == 0 {
		errs.Add("spec.containerConfig.command", "neither the workspace nor template %s/%s names a program to run", t.Metadata.Namespace, t.Metadata.Name)
	}
	for _, e := range ts.EnvironmentVariables {
		r.Env[e.Name] = e.Value
	}
	for _, e := range s.Env {
		r.Env[e.Name] = e.Value
	}
	sel := map[string]string{}
	for k, v := range ts.DefaultNodeSelector {
		sel[k] = v
	}
	for k, v := range s.NodeSelector {
		sel[k] = v
	}
	r.InstanceType = sel[LabelInstanceType]

	size, sp := manifest.Quantity("10Gi"), "spec.storage.size"
	if ps := ts.PrimaryStorage; ps != nil {
		if ps.DefaultSize != "" {
			size = ps.DefaultSize
		}
		r.MountPath = ps.DefaultMountPath
	}
	if st := s.Storage; st != nil {
		if st.Size != "" {
			size = st.Size
		}
		if st.MountPath != "" {
			r.MountPath = st.MountPath
		}
	}
	if v, err := size.Value(); err == nil {
		r.StorageBytes = int64(v)
		if ps := ts.PrimaryStorage; ps != nil {
			if ps.MaxSize != nil {
				if hi, err := ps.MaxSize.Value(); err == nil && v > hi {
					errs.Add(sp, "%s is above the template's maximum %s (primaryStorage.maxSize)", size, *ps.MaxSize)
				}
			}
			if ps.MinSize != nil {
				if lo, err := ps.MinSize.Value(); err == nil && v < lo {
					errs.Add(sp, "%s is below the template's minimum %s (primaryStorage.minSize)", size, *ps.MinSize)
				}
			}
		}
	}

	idle := ts.DefaultIdleShutdown
	if s.IdleShutdown != nil {
		pol := ts.IdleShutdownOverrides
		switch {
		case pol != nil && pol.Allow != nil && !*pol.Allow:
			errs.Add("spec.idleShutdown", "template %s/%s does not allow overriding its idle shutdown", t.Metadata.Namespace, t.Metadata.Name)
		case s.IdleShutdown.Enabled && pol != nil:
			m := s.IdleShutdown.IdleTimeoutInMinutes
			if pol.MinTimeoutMinutes != nil && m < *pol.MinTimeoutMinutes {
				errs.Add("spec.idleShutdown.idleTimeoutInMinutes", "%d is below the template's minimum %d (idleShutdownOverrides.minTimeoutMinutes)", m, *pol.MinTimeoutMinutes)
			}
			if pol.MaxTimeoutMinutes != nil && m > *pol.MaxTimeoutMinutes {
				errs.Add("spec.idleShutdown.idleTimeoutInMinutes", "%d is above the template's maximum %d (idleShutdownOverrides.maxTimeoutMinutes)", m, *pol.MaxTimeoutMinutes)
			}
		}
		idle = s.IdleShutdown
	}
	if idle != nil && idle.Enabled && idle.IdleTimeoutInMinutes > 0 {
		r.IdleTimeout = time.Duration(idle.IdleTimeoutInMinutes) * time.Minute
	}
	return r, errs.Err()
}

func mergeResources(base, over *manifest.ResourceRequirements) *manifest.ResourceRequirements {
	out := &manifest.ResourceRequirements{Requests: map[string]manifest.Quantity{}, Limits: map[string]manifest.Quantity{}}
	for _, r := range []*manifest.ResourceRequirements{base, over} {
		if r == nil {
			continue
		}
		for k, v := range r.Requests {
			out.Requests[k] = v
		}
		for k, v := range r.Limits {
			out.Limits[k] = v
		}
	}
	return out
}

// Ignored lists the fields of w that are accepted but have no effect in
// capstan, one line each, for the API's warnings.
func Ignored(w *Workspace, r Resolved) []string {
	s := &w.Spec
	var out []string
	add := func(set bool, field, why string) {
		if set {
			out = append(out, fmt.Sprintf("spec.%s has no effect: %s", field, why))
		}
	}
	const pod = "capstan runs the space as a process on the node, not a pod"
	add(s.Image != "", "image", "capstan runs the template's program on the node, not a container image (the image is still checked against the template)")
	add(s.ServiceAccountName != "", "serviceAccountName", pod)
	add(len(s.Volumes) > 0, "volumes", "capstan has no PersistentVolumeClaims; the space's files live in its home directory")
	add(len(s.Affinity) > 0, "affinity", pod+"; use nodeSelector "+LabelInstanceType)
	add(len(s.Tolerations) > 0, "tolerations", "capstan's nodes have no taints")
	add(len(s.Lifecycle) > 0, "lifecycle", pod)
	add(len(s.ReadinessProbe) > 0, "readinessProbe", "capstan checks the app itself (the Jupyter REST API, or an HTTP GET of its base URL)")
	add(len(s.AccessStrategy) > 0, "accessStrategy", "spaces are served by capstan's proxy at /spaces/<namespace>/<name>/")
	add(len(s.PodSecurityContext) > 0, "podSecurityContext", pod)
	add(len(s.ContainerSecurityContext) > 0, "containerSecurityContext", pod)
	add(len(s.InitContainers) > 0, "initContainers", pod)
	if s.IdleShutdown != nil {
		add(len(s.IdleShutdown.Detection) > 0, "idleShutdown.detection", "capstan detects activity itself (the Jupyter server's last activity, and requests through its proxy)")
	}
	if st := s.Storage; st != nil {
		add(st.StorageClassName != "", "storage.storageClassName", "the space's home is a directory under capstan's data dir")
		add(st.MountPath != "", "storage.mountPath", "the space's home directory is its HOME and working directory, wherever it lies")
		add(st.Size != "", "storage.size", "it is checked against the template but not enforced as a quota on the home directory")
	}
	add(r.Ownership == OwnerOnly || r.Access == OwnerOnly, "ownershipType/accessType OwnerOnly", "capstan's admin tokens are not per-user identities, so every admin may use and change the space")
	for k := range s.NodeSelector {
		add(k != LabelInstanceType, "nodeSelector["+k+"]", "capstan selects nodes by "+LabelInstanceType+" only")
	}
	return out
}
