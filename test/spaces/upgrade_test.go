package spaces_test

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/internal/store"
	"github.com/capstan-dev/capstan/internal/workspace"
)

// TestOldDefaultTemplateUpdated: a data dir from a version whose Code
// Editor template ran code-server with --auth=none (anyone on the machine
// could open the editor at its port) gets this version's template at
// start; a default someone changed (generation above 1) is left as it is.
func TestOldDefaultTemplateUpdated(t *testing.T) {
	s := startServer(t, migCluster)
	s.cancel()
	_ = s.proc.Cmd.Wait()

	st, err := store.Open(filepath.Join(s.dataDir, "capstan.db"), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	const editor = workspace.TemplateNamespace + "/" + workspace.CodeEditorTemplate
	const jupyter = workspace.TemplateNamespace + "/" + workspace.JupyterTemplate
	err = st.Update(func(tx *store.Tx) error {
		var tpl workspace.WorkspaceTemplate
		if _, err := tx.Get("workspacetemplates", editor, &tpl); err != nil {
			return err
		}
		tpl.Spec.EnvironmentVariables = nil
		tpl.Spec.DefaultContainerConfig.Args = []string{"--bind-addr=127.0.0.1:$(CAPSTAN_SPACE_PORT)", "--auth=none", "$(HOME)"}
		if err := tx.Put("workspacetemplates", editor, &tpl); err != nil {
			return err
		}
		if _, err := tx.Get("workspacetemplates", jupyter, &tpl); err != nil {
			return err
		}
		tpl.Spec.DisplayName, tpl.Metadata.Generation = "Our own Jupyter", 2
		return tx.Put("workspacetemplates", jupyter, &tpl)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	s.start("127.0.0.1:0")
	code, b := s.do(http.MethodGet, "/apis/workspace.jupyter.org/v1alpha1/namespaces/jupyter-k8s-system/workspacetemplates/sagemaker-code-editor-template", nil, nil)
	if code != http.StatusOK || strings.Contains(string(b), "--auth=none") || !strings.Contains(string(b), "--auth=password") || !strings.Contains(string(b), "HASHED_PASSWORD") {
		t.Errorf("the old Code Editor template after a restart: %d %s", code, b)
	}
	code, b = s.do(http.MethodGet, "/apis/workspace.jupyter.org/v1alpha1/namespaces/jupyter-k8s-system/workspacetemplates/sagemaker-jupyter-template", nil, nil)
	if code != http.StatusOK || !strings.Contains(string(b), "Our own Jupyter") {
		t.Errorf("a changed default was replaced: %d %s", code, b)
	}
}
