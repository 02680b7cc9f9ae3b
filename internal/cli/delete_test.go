package cli

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/capstan-dev/capstan/internal/manifest"
)

func TestDelete(t *testing.T) {
	stored := func(e *cliEnv, kind, ns, name string) bool {
		_, err := e.store.Get(context.Background(), kind, ns, name)
		if err != nil && !errors.Is(err, manifest.ErrNotFound) {
			t.Fatal(err)
		}
		return err == nil
	}
	t.Run("by kind and name", func(t *testing.T) {
		e := newCLIEnv(t)
		seed(t, e)
		out := e.mustRun(t, "", "delete", "jsm", "deepseek", "-n", "team-a")
		if out != `jumpstartmodel.inference.sagemaker.aws.amazon.com "deepseek" deleted`+"\n" {
			t.Errorf("stdout %q", out)
		}
		if stored(e, manifest.KindJumpStartModel, "team-a", "deepseek") || !stored(e, manifest.KindInferenceEndpointConfig, "default", "small") {
			t.Error("wrong objects deleted")
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
		if stored(e, manifest.KindJumpStartModel, "team-a", "deepseek") || stored(e, manifest.KindInferenceEndpointConfig, "default", "small") {
			t.Error("not deleted")
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
