package cli

import (
	"slices"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/internal/manifest"
)

func TestDelete(t *testing.T) {
	const (
		iec = manifest.KindInferenceEndpointConfig
		jsm = manifest.KindJumpStartModel
	)
	t.Run("by kind and name", func(t *testing.T) {
		e := newCLIEnv(t)
		seed(t, e)
		out := e.mustRun(t, "", "delete", "jsm", "deepseek", "-n", "team-a")
		if out != `jumpstartmodel.inference.sagemaker.aws.amazon.com "deepseek" deleted`+"\n" {
			t.Errorf("stdout %q", out)
		}
		// The server has started deleting it; the controller finishes.
		if st := e.state(t, jsm, "team-a", "deepseek"); st != manifest.StateDeletionPending {
			t.Errorf("deepseek after delete: %q", st)
		}
		e.reconcile(t, jsm, "team-a", "deepseek")
		if got := e.stored(t); !slices.Equal(got, []string{"InferenceEndpointConfig/default/small"}) {
			t.Errorf("stored %v after deletion completed", got)
		}
		if st := e.state(t, iec, "default", "small"); st != manifest.StateDeploymentComplete {
			t.Errorf("small, not deleted, is %q", st)
		}
		if got := e.rt.Running(); len(got) != 2 {
			t.Errorf("running %v, want small's two replicas", got)
		}
	})
	t.Run("from a file that no longer validates", func(t *testing.T) {
		e := newCLIEnv(t)
		seed(t, e)
		p := writeFile(t, t.TempDir(), "all.yaml", strings.Replace(smallIEC, "spec:", "spec:\n  bogus: 1", 1)+"---\n"+deepseekJSM)
		out := e.mustRun(t, "", "delete", "-f", p)
		want := `inferenceendpointconfig.inference.sagemaker.aws.amazon.com "small" deleted` + "\n" +
			`jumpstartmodel.inference.sagemaker.aws.amazon.com "deepseek" deleted` + "\n"
		if out != want {
			t.Errorf("stdout %q", out)
		}
		if a, b := e.state(t, iec, "default", "small"), e.state(t, jsm, "team-a", "deepseek"); a != manifest.StateDeletionPending || b != manifest.StateDeletionPending {
			t.Errorf("after delete: small %q, deepseek %q", a, b)
		}
		e.reconcile(t, iec, "default", "small")
		e.reconcile(t, jsm, "team-a", "deepseek")
		if got := e.stored(t); len(got) != 0 {
			t.Errorf("stored %v after deletion completed", got)
		}
		if got := e.rt.Running(); len(got) != 0 {
			t.Errorf("replicas still running: %v", got)
		}
	})
	t.Run("not found", func(t *testing.T) {
		e := newCLIEnv(t)
		_, _, err := e.run(t, "", "delete", "iec", "ghost")
		if err == nil || !strings.Contains(err.Error(), "(NotFound)") {
			t.Errorf("err = %v", err)
		}
		if out := e.mustRun(t, "", "delete", "iec", "ghost", "--ignore-not-found"); out != "" {
			t.Errorf("stdout %q", out)
		}
	})
	t.Run("usage errors", func(t *testing.T) {
		e := newCLIEnv(t)
		for _, args := range [][]string{{"delete"}, {"delete", "iec"}, {"delete", "pods", "x"}, {"delete", "iec", "x", "-f", "-"}} {
			if _, _, err := e.run(t, smallIEC, args...); err == nil {
				t.Errorf("%v: no error", args)
			}
		}
		if _, _, err := e.run(t, "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n", "delete", "-f", "-"); err == nil || !strings.Contains(err.Error(), `kind "Pod" is not served`) {
			t.Errorf("pod: %v", err)
		}
	})
}
