package operator

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"strings"

	"sigs.k8s.io/yaml"

	deploy "github.com/capstan-dev/capstan/deploy/operator"
)

// DefaultImage is the operator image the kustomize base names; install
// replaces it with InstallOptions.Image.
const DefaultImage = "capstan:latest"

// InstallOptions change what WriteInstall prints.
type InstallOptions struct {
	// Image runs the operator; ModelImage runs JumpStartModel pods.
	Image, ModelImage string
}

// WriteInstall prints the install manifests (the kustomize base's
// resources in its order: namespace, CRDs, RBAC, webhook, operator,
// gateway) as one
// multi-document YAML stream for kubectl apply -f -.
func WriteInstall(w io.Writer, o InstallOptions) error {
	k, err := fs.ReadFile(deploy.Files, "kustomization.yaml")
	if err != nil {
		return err
	}
	var kz struct {
		Resources []string `json:"resources"`
	}
	if err := yaml.Unmarshal(k, &kz); err != nil {
		return fmt.Errorf("operator: kustomization.yaml: %w", err)
	}
	for i, r := range kz.Resources {
		b, err := fs.ReadFile(deploy.Files, r)
		if err != nil {
			return fmt.Errorf("operator: install manifest %s: %w", r, err)
		}
		if r == "manager.yaml" || r == "gateway.yaml" {
			b = setImages(b, o)
		}
		b = bytes.TrimPrefix(bytes.TrimSpace(b), []byte("---\n"))
		sep := "---\n"
		if i == 0 {
			sep = ""
		}
		if _, err := fmt.Fprintf(w, "%s# Source: deploy/operator/%s\n%s\n", sep, r, b); err != nil {
			return err
		}
	}
	return nil
}

func setImages(b []byte, o InstallOptions) []byte {
	s := string(b)
	if o.ModelImage != "" {
		s = strings.ReplaceAll(s, "--model-image="+DefaultImage, "--model-image="+o.ModelImage)
	}
	if o.Image != "" {
		s = strings.ReplaceAll(s, "image: "+DefaultImage, "image: "+o.Image)
		if o.ModelImage == "" {
			s = strings.ReplaceAll(s, "--model-image="+DefaultImage, "--model-image="+o.Image)
		}
	}
	return []byte(s)
}
