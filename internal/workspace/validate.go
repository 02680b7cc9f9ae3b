package workspace

import (
	"fmt"
	"math"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/capstan-dev/capstan/internal/manifest"
	"github.com/capstan-dev/capstan/internal/procenv"
)

// Bounds on what a workspace or template may carry, so that no manifest
// sizes a list, a timer or a process's argv past what a host runs.
const (
	MaxDisplayName    = 100
	MaxStringBytes    = 4096
	MaxListItems      = 100
	MaxArgs           = 256
	MaxAllowedImages  = 50
	MaxIdleMinutes    = 7 * 24 * 60 // a week
	MaxGPUs           = 64
	maxDescription    = 500
	LabelInstanceType = "node.kubernetes.io/instance-type"
)

var (
	reDNSLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	reMIG      = regexp.MustCompile(`^\d+g\.\d+gb$`)
	reAppType  = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
)

// Default fills what the workspace leaves unset: Running, the default
// Jupyter template. Fields the template supplies are resolved by Resolve,
// not stored.
func (w *Workspace) Default() {
	w.APIVersion, w.Kind = APIVersion, KindWorkspace
	if w.Metadata.Namespace == "" {
		w.Metadata.Namespace = manifest.DefaultNamespace
	}
	if w.Spec.DesiredStatus == "" {
		w.Spec.DesiredStatus = StatusRunning
	}
	if w.Spec.TemplateRef == nil {
		w.Spec.TemplateRef = &TemplateRef{Name: JupyterTemplate, Namespace: TemplateNamespace}
	}
}

// Default fills the template's unset fields.
func (t *WorkspaceTemplate) Default() {
	t.APIVersion, t.Kind = APIVersion, KindWorkspaceTemplate
	if t.Metadata.Namespace == "" {
		t.Metadata.Namespace = manifest.DefaultNamespace
	}
	if t.Spec.DefaultOwnershipType == "" {
		t.Spec.DefaultOwnershipType = Public
	}
	if t.Spec.DefaultAccessType == "" {
		t.Spec.DefaultAccessType = Public
	}
	if t.Spec.AppType == "" {
		t.Spec.AppType = AppJupyter
	}
}

func checkName(errs *manifest.ErrorList, p, v string) {
	if v == "" {
		errs.Add(p, "required")
		return
	}
	if len(v) > 63 || !reDNSLabel.MatchString(v) {
		errs.Add(p, "%q must be an RFC 1123 label: at most 63 lower-case letters, digits and '-', starting and ending with a letter or digit", v)
	}
}

func checkMeta(errs *manifest.ErrorList, m *manifest.ObjectMeta) {
	checkName(errs, "metadata.name", m.Name)
	checkName(errs, "metadata.namespace", m.Namespace)
	if len(m.Labels) > MaxListItems {
		errs.Add("metadata.labels", "has %d entries; the limit is %d", len(m.Labels), MaxListItems)
	}
	if len(m.Annotations) > MaxListItems {
		errs.Add("metadata.annotations", "has %d entries; the limit is %d", len(m.Annotations), MaxListItems)
	}
}

func checkEnum(errs *manifest.ErrorList, p, v string, allowed ...string) {
	if v != "" && !slices.Contains(allowed, v) {
		errs.Add(p, "unsupported value %q; must be one of %s", v, strings.Join(allowed, ", "))
	}
}

func checkString(errs *manifest.ErrorList, p, v string, limit int) {
	if len(v) > limit {
		errs.Add(p, "is %d bytes; the limit is %d", len(v), limit)
	}
}

// Validate checks the workspace on its own; the checks against its
// template and cluster are Resolve's.
func (w *Workspace) Validate() error {
	var errs manifest.ErrorList
	checkMeta(&errs, &w.Metadata)
	s := &w.Spec
	switch {
	case s.DisplayName == "":
		errs.Add("spec.displayName", "required")
	case len(s.DisplayName) > MaxDisplayName:
		errs.Add("spec.displayName", "is %d bytes; the limit is %d", len(s.DisplayName), MaxDisplayName)
	}
	checkString(&errs, "spec.image", s.Image, 500)
	checkEnum(&errs, "spec.desiredStatus", s.DesiredStatus, StatusRunning, StatusStopped)
	checkEnum(&errs, "spec.ownershipType", s.OwnershipType, Public, OwnerOnly)
	checkEnum(&errs, "spec.accessType", s.AccessType, Public, OwnerOnly)
	if s.AppType != "" && (len(s.AppType) > 63 || !reAppType.MatchString(s.AppType)) {
		errs.Add("spec.appType", "%q must be lower-case letters, digits and '-'", s.AppType)
	}
	if s.Resources != nil {
		if _, err := Requests(s.Resources, "spec.resources"); err != nil {
			errs = append(errs, manifest.FieldErrors(err)...)
		}
	}
	if st := s.Storage; st != nil {
		if st.Size != "" {
			if v, err := st.Size.Value(); err != nil {
				errs.Add("spec.storage.size", "%v", err)
			} else if v <= 0 {
				errs.Add("spec.storage.size", "must be positive")
			}
		}
		if st.MountPath != "" && (!path.IsAbs(st.MountPath) || path.Clean(st.MountPath) != st.MountPath) {
			errs.Add("spec.storage.mountPath", "%q must be a clean absolute path", st.MountPath)
		}
		checkString(&errs, "spec.storage.storageClassName", st.StorageClassName, 253)
	}
	checkContainerConfig(&errs, "spec.containerConfig", s.ContainerConfig)
	checkEnv(&errs, "spec.env", s.Env)
	checkSelector(&errs, "spec.nodeSelector", s.NodeSelector)
	if r := s.TemplateRef; r != nil {
		checkName(&errs, "spec.templateRef.name", r.Name)
		if r.Namespace != "" {
			checkName(&errs, "spec.templateRef.namespace", r.Namespace)
		}
	}
	checkIdle(&errs, "spec.idleShutdown", s.IdleShutdown)
	checkString(&errs, "spec.serviceAccountName", s.ServiceAccountName, 253)
	return errs.Err()
}

func checkContainerConfig(errs *manifest.ErrorList, p string, c *ContainerConfig) {
	if c == nil {
		return
	}
	for _, f := range []struct {
		name string
		v    []string
	}{{"command", c.Command}, {"args", c.Args}} {
		if len(f.v) > MaxArgs {
			errs.Add(p+"."+f.name, "has %d items; the limit is %d", len(f.v), MaxArgs)
			continue
		}
		for i, a := range f.v {
			checkString(errs, fmt.Sprintf("%s.%s[%d]", p, f.name, i), a, MaxStringBytes)
			if strings.IndexByte(a, 0) >= 0 {
				errs.Add(fmt.Sprintf("%s.%s[%d]", p, f.name, i), "must not contain a NUL byte")
			}
		}
	}
	if len(c.Command) > 0 && c.Command[0] == "" {
		errs.Add(p+".command[0]", "the program must not be empty")
	}
}

func checkEnv(errs *manifest.ErrorList, p string, env []manifest.EnvVar) {
	if len(env) > MaxListItems {
		errs.Add(p, "has %d items; the limit is %d", len(env), MaxListItems)
		return
	}
	seen := map[string]bool{}
	for i, e := range env {
		ip := fmt.Sprintf("%s[%d]", p, i)
		if err := procenv.CheckName(e.Name); err != nil {
			errs.Add(ip+".name", "%v", err)
		}
		if seen[e.Name] {
			errs.Add(ip+".name", "%q appears twice", e.Name)
		}
		seen[e.Name] = true
		checkString(errs, ip+".value", e.Value, procenv.MaxValueBytes)
		if len(e.ValueFrom) > 0 {
			errs.Add(ip+".valueFrom", "is not supported (capstan has no Secrets or ConfigMaps); set value")
		}
	}
}

func checkSelector(errs *manifest.ErrorList, p string, sel map[string]string) {
	if len(sel) > MaxListItems {
		errs.Add(p, "has %d entries; the limit is %d", len(sel), MaxListItems)
		return
	}
	for k, v := range sel {
		checkString(errs, p+"["+k+"]", v, 253)
		checkString(errs, p+"["+k+"]", k, 253)
	}
}

func checkIdle(errs *manifest.ErrorList, p string, is *IdleShutdown) {
	if is == nil || !is.Enabled {
		return
	}
	if is.IdleTimeoutInMinutes < 1 || is.IdleTimeoutInMinutes > MaxIdleMinutes {
		errs.Add(p+".idleTimeoutInMinutes", "%d must be between 1 and %d", is.IdleTimeoutInMinutes, MaxIdleMinutes)
	}
}

// Validate checks a template's fields and that its defaults fall within
// its own bounds.
func (t *WorkspaceTemplate) Validate() error {
	var errs manifest.ErrorList
	checkMeta(&errs, &t.Metadata)
	s := &t.Spec
	switch {
	case s.DisplayName == "":
		errs.Add("spec.displayName", "required")
	case len(s.DisplayName) > MaxDisplayName:
		errs.Add("spec.displayName", "is %d bytes; the limit is %d", len(s.DisplayName), MaxDisplayName)
	}
	checkString(&errs, "spec.description", s.Description, maxDescription)
	if s.DefaultImage == "" {
		errs.Add("spec.defaultImage", "required")
	}
	checkString(&errs, "spec.defaultImage", s.DefaultImage, 500)
	if len(s.AllowedImages) > MaxAllowedImages {
		errs.Add("spec.allowedImages", "has %d items; the limit is %d", len(s.AllowedImages), MaxAllowedImages)
	}
	for i, im := range s.AllowedImages {
		checkString(&errs, fmt.Sprintf("spec.allowedImages[%d]", i), im, 500)
	}
	checkEnum(&errs, "spec.defaultOwnershipType", s.DefaultOwnershipType, Public, OwnerOnly)
	checkEnum(&errs, "spec.defaultAccessType", s.DefaultAccessType, Public, OwnerOnly)
	if s.AppType != "" && (len(s.AppType) > 63 || !reAppType.MatchString(s.AppType)) {
		errs.Add("spec.appType", "%q must be lower-case letters, digits and '-'", s.AppType)
	}
	if s.DefaultContainerConfig == nil || len(s.DefaultContainerConfig.Command) == 0 {
		errs.Add("spec.defaultContainerConfig.command", "required: the program a space of this template runs")
	}
	checkContainerConfig(&errs, "spec.defaultContainerConfig", s.DefaultContainerConfig)
	checkEnv(&errs, "spec.environmentVariables", s.EnvironmentVariables)
	checkSelector(&errs, "spec.defaultNodeSelector", s.DefaultNodeSelector)
	checkIdle(&errs, "spec.defaultIdleShutdown", s.DefaultIdleShutdown)
	if b := s.ResourceBounds; b != nil {
		for _, r := range []struct {
			name string
			rng  *ResourceRange
		}{{"cpu", b.CPU}, {"memory", b.Memory}, {"gpu", b.GPU}} {
			if r.rng == nil {
				continue
			}
			p := "spec.resourceBounds." + r.name
			lo, err1 := r.rng.Min.Value()
			hi, err2 := r.rng.Max.Value()
			switch {
			case err1 != nil:
				errs.Add(p+".min", "%v", err1)
			case err2 != nil:
				errs.Add(p+".max", "%v", err2)
			case lo < 0:
				errs.Add(p+".min", "must not be negative")
			case lo > hi:
				errs.Add(p, "min %s is above max %s", r.rng.Min, r.rng.Max)
			}
		}
	}
	if s.DefaultResources != nil {
		if req, err := Requests(s.DefaultResources, "spec.defaultResources"); err != nil {
			errs = append(errs, manifest.FieldErrors(err)...)
		} else if len(errs) == 0 {
			errs = append(errs, checkBounds(s.ResourceBounds, req, "spec.defaultResources")...)
		}
	}
	if ps := s.PrimaryStorage; ps != nil {
		vals := map[string]float64{}
		for name, q := range map[string]*manifest.Quantity{"defaultSize": &ps.DefaultSize, "minSize": ps.MinSize, "maxSize": ps.MaxSize} {
			if q == nil || *q == "" {
				continue
			}
			v, err := q.Value()
			if err != nil {
				errs.Add("spec.primaryStorage."+name, "%v", err)
				continue
			}
			vals[name] = v
		}
		if lo, ok := vals["minSize"]; ok {
			if hi, ok := vals["maxSize"]; ok && lo > hi {
				errs.Add("spec.primaryStorage", "minSize is above maxSize")
			}
		}
		if ps.DefaultMountPath != "" && !path.IsAbs(ps.DefaultMountPath) {
			errs.Add("spec.primaryStorage.defaultMountPath", "%q must be an absolute path", ps.DefaultMountPath)
		}
	}
	if o := s.IdleShutdownOverrides; o != nil {
		if o.MinTimeoutMinutes != nil && (*o.MinTimeoutMinutes < 1 || *o.MinTimeoutMinutes > MaxIdleMinutes) {
			errs.Add("spec.idleShutdownOverrides.minTimeoutMinutes", "must be between 1 and %d", MaxIdleMinutes)
		}
		if o.MaxTimeoutMinutes != nil && (*o.MaxTimeoutMinutes < 1 || *o.MaxTimeoutMinutes > MaxIdleMinutes) {
			errs.Add("spec.idleShutdownOverrides.maxTimeoutMinutes", "must be between 1 and %d", MaxIdleMinutes)
		}
		if o.MinTimeoutMinutes != nil && o.MaxTimeoutMinutes != nil && *o.MinTimeoutMinutes > *o.MaxTimeoutMinutes {
			errs.Add("spec.idleShutdownOverrides", "minTimeoutMinutes is above maxTimeoutMinutes")
		}
	}
	return errs.Err()
}

// Request is what a space asks of a node.
type Request struct {
	MilliCPU    int64
	MemoryBytes int64
	GPUs        int
	// MIGProfile is one slice of that profile ("1g.10gb") instead of GPUs.
	MIGProfile string
}

// Requests reads resource requests (a limit stands in for a missing
// request, as in Kubernetes), refusing unknown resources, bad or negative
// quantities, fractional or excessive GPUs, more than one MIG slice, and
// whole GPUs with a slice. Errors are FieldErrors under p.
func Requests(r *manifest.ResourceRequirements, p string) (Request, error) {
	var errs manifest.ErrorList
	var out Request
	if r == nil {
		return out, nil
	}
	vals := map[string]float64{}
	for _, part := range []struct {
		name string
		m    map[string]manifest.Quantity
	}{{"requests", r.Requests}, {"limits", r.Limits}} {
		if len(part.m) > MaxListItems {
			errs.Add(p+"."+part.name, "has %d entries; the limit is %d", len(part.m), MaxListItems)
			continue
		}
		for _, k := range sortedKeys(part.m) {
			fp := fmt.Sprintf("%s.%s[%s]", p, part.name, k)
			v, err := part.m[k].Value()
			if err != nil {
				errs.Add(fp, "%v", err)
				continue
			}
			if v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
				errs.Add(fp, "must not be negative")
				continue
			}
			switch {
			case k == manifest.ResourceCPU:
				if v > 1e6 {
					errs.Add(fp, "%s CPUs is beyond any node", part.m[k])
					continue
				}
			case k == manifest.ResourceMemory:
				if v > 1<<50 {
					errs.Add(fp, "%s is beyond any node", part.m[k])
					continue
				}
			case k == manifest.ResourceGPU:
				if v != math.Trunc(v) || v > MaxGPUs {
					errs.Add(fp, "must be a whole number of GPUs from 0 to %d (for part of a GPU ask for a MIG slice, nvidia.com/mig-<profile>)", MaxGPUs)
					continue
				}
			case strings.HasPrefix(k, manifest.ResourceMIGPrefix):
				if !reMIG.MatchString(strings.TrimPrefix(k, manifest.ResourceMIGPrefix)) {
					errs.Add(fp, "%q is not a MIG resource (e.g. nvidia.com/mig-1g.10gb)", k)
					continue
				}
				if v != 1 {
					errs.Add(fp, "a space holds exactly one MIG slice; ask for 1")
					continue
				}
			default:
				errs.Add(fp, "unsupported resource %q; capstan places cpu, memory, nvidia.com/gpu and nvidia.com/mig-<profile>", k)
				continue
			}
			if part.name == "requests" {
				vals[k] = v
			} else if _, ok := vals[k]; !ok {
				vals[k] = v
			} else if v < vals[k] {
				errs.Add(fp, "limit %s is below the request", part.m[k])
			}
		}
	}
	for k, v := range vals {
		switch {
		case k == manifest.ResourceCPU:
			out.MilliCPU = int64(math.Ceil(v * 1000))
		case k == manifest.ResourceMemory:
			out.MemoryBytes = int64(math.Ceil(v))
		case k == manifest.ResourceGPU:
			out.GPUs = int(v)
		case strings.HasPrefix(k, manifest.ResourceMIGPrefix):
			prof := strings.TrimPrefix(k, manifest.ResourceMIGPrefix)
			if out.MIGProfile != "" && out.MIGProfile != prof {
				errs.Add(p, "asks for two MIG profiles (%s and %s); a space holds one slice", out.MIGProfile, prof)
			}
			out.MIGProfile = prof
		}
	}
	if out.MIGProfile != "" && out.GPUs > 0 {
		errs.Add(p, "asks for whole GPUs and a MIG slice at once; ask for one or the other")
	}
	return out, errs.Err()
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// checkBounds refuses requests outside the template's ranges. A MIG slice
// counts as one GPU against the GPU range.
func checkBounds(b *ResourceBounds, req Request, p string) manifest.ErrorList {
	var errs manifest.ErrorList
	if b == nil {
		return nil
	}
	gpus := float64(req.GPUs)
	gpuKey := manifest.ResourceGPU
	if req.MIGProfile != "" {
		gpus, gpuKey = 1, manifest.ResourceMIGPrefix+req.MIGProfile
	}
	for _, c := range []struct {
		key  string
		rng  *ResourceRange
		val  float64
		name string
	}{
		{manifest.ResourceCPU, b.CPU, float64(req.MilliCPU) / 1000, "cpu"},
		{manifest.ResourceMemory, b.Memory, float64(req.MemoryBytes), "memory"},
		{gpuKey, b.GPU, gpus, "gpu"},
	} {
		if c.rng == nil {
			continue
		}
		lo, err1 := c.rng.Min.Value()
		hi, err2 := c.rng.Max.Value()
		if err1 != nil || err2 != nil {
			continue
		}
		fp := fmt.Sprintf("%s.requests[%s]", p, c.key)
		// Tolerate rounding of milli-CPUs and bytes.
		if c.val > hi*(1+1e-9) {
			errs.Add(fp, "%s is above the template's maximum %s (resourceBounds.%s.max)", fmtVal(c.name, c.val), c.rng.Max, c.name)
		} else if c.val < lo*(1-1e-9) {
			errs.Add(fp, "%s is below the template's minimum %s (resourceBounds.%s.min)", fmtVal(c.name, c.val), c.rng.Min, c.name)
		}
	}
	return errs
}

func fmtVal(name string, v float64) string {
	switch name {
	case "memory":
		return fmt.Sprintf("%gGi", v/(1<<30))
	default:
		return fmt.Sprintf("%g", v)
	}
}
