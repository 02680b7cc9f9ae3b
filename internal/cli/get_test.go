package cli

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/capstan-dev/capstan/internal/manifest"
)

// seed applies the small IEC (default) and the deepseek JSM (team-a), runs
// the controller for the IEC only (so the two objects show different
// states), and moves the clock on.
func seed(t *testing.T, e *cliEnv) {
	t.Helper()
	e.mustRun(t, smallIEC+"---\n"+deepseekJSM, "apply", "-f", "-")
	e.reconcile(t, manifest.KindInferenceEndpointConfig, "default", "small")
	e.clk.Step(5*time.Minute + 3*time.Second)
}

func TestGet(t *testing.T) {
	e := newCLIEnv(t)
	seed(t, e)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"list by short name", []string{"get", "iec"},
			"NAME    STATE                REPLICAS   ENDPOINT   AGE\n" +
				"small   DeploymentComplete   2/2        <none>     5m3s\n"},
		{"list by plural in a namespace", []string{"get", "jumpstartmodels", "-n", "team-a"},
			"NAME       STATE               REPLICAS   ENDPOINT   AGE\n" +
				"deepseek   DeploymentPending   0/1        deepseek   5m3s\n"},
		{"one by kind name", []string{"get", "InferenceEndpointConfig", "small"},
			"NAME    STATE                REPLICAS   ENDPOINT   AGE\n" +
				"small   DeploymentComplete   2/2        <none>     5m3s\n"},
		{"all namespaces wide", []string{"get", "jsm", "-A", "-o", "wide"},
			"NAMESPACE   NAME       STATE               REPLICAS   ENDPOINT   AGE    INSTANCE TYPE   MODEL                               URL\n" +
				"team-a      deepseek   DeploymentPending   0/1        deepseek   5m3s   ml.g5.8xlarge   deepseek-llm-r1-distill-qwen-1-5b   <none>\n"},
		{"wide", []string{"get", "iec", "-o", "wide"},
			"NAME    STATE                REPLICAS   ENDPOINT   AGE    INSTANCE TYPE    MODEL                   URL\n" +
				"small   DeploymentComplete   2/2        <none>     5m3s   ml.g5.24xlarge   Llama-3.1-8B-Instruct   http://127.0.0.1:8080/endpoints/small/invocations\n"},
		{"names", []string{"get", "jsm", "-A", "-o", "name"}, "jumpstartmodel.inference.sagemaker.aws.amazon.com/deepseek\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := e.mustRun(t, "", tt.args...); got != tt.want {
				t.Errorf("got:\n%s\nwant:\n%s", got, tt.want)
			}
		})
	}

	t.Run("empty namespace", func(t *testing.T) {
		out, errOut, err := e.run(t, "", "get", "jsm")
		if err != nil || out != "" || errOut != "No resources found in default namespace.\n" {
			t.Errorf("%q %q %v", out, errOut, err)
		}
	})
	t.Run("yaml round-trips through apply unchanged", func(t *testing.T) {
		y := e.mustRun(t, "", "get", "iec", "small", "-o", "yaml")
		for _, want := range []string{"state: DeploymentComplete", "readyReplicas: 2", "url: http://127.0.0.1:8080/endpoints/small/invocations", "creationTimestamp: \"2026-01-02T03:04:05Z\""} {
			if !strings.Contains(y, want) {
				t.Errorf("yaml lacks %q:\n%s", want, y)
			}
		}
		if objs, err := manifest.Load([]byte(y)); err != nil || len(objs) != 1 {
			t.Fatalf("get -o yaml is not a valid manifest: %v", err)
		}
		if out := e.mustRun(t, y, "apply", "-f", "-"); !strings.HasSuffix(out, "/small unchanged\n") {
			t.Errorf("re-apply of get -o yaml: %q", out)
		}
	})
	t.Run("json list", func(t *testing.T) {
		var l struct {
			Kind  string
			Items []manifest.InferenceEndpointConfig
		}
		if err := json.Unmarshal([]byte(e.mustRun(t, "", "get", "iec", "-o", "json")), &l); err != nil {
			t.Fatal(err)
		}
		if l.Kind != "InferenceEndpointConfigList" || len(l.Items) != 1 || l.Items[0].Status.ReadyReplicas != 2 {
			t.Errorf("%+v", l)
		}
	})
	t.Run("errors", func(t *testing.T) {
		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"get", "iec", "nope"}, "NotFound"},
			{[]string{"get", "pods"}, `unknown resource type "pods"`},
			{[]string{"get", "iec", "-o", "table"}, "-o table"},
			{[]string{"get", "iec", "small", "-A"}, "cannot be used with a NAME"},
			{[]string{"get", "iec", "Bad_Name"}, "RFC 1123"},
		} {
			if _, _, err := e.run(t, "", tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%v: err = %v, want %q", tc.args, err, tc.want)
			}
		}
	})
}

func TestHumanAge(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "0s", 90 * time.Second: "90s", 5*time.Minute + 3*time.Second: "5m3s", 45 * time.Minute: "45m",
		4*time.Hour + 20*time.Minute: "4h20m", 30 * time.Hour: "30h", 3*24*time.Hour + 5*time.Hour: "3d5h",
		40 * 24 * time.Hour: "40d", 3 * 365 * 24 * time.Hour: "3y", -time.Second: "0s",
	} {
		if got := humanAge(d); got != want {
			t.Errorf("humanAge(%v) = %q, want %q", d, got, want)
		}
	}
}

// TestGetDescribeDeployment shows status written by the real controller.
func TestGetDescribeDeployment(t *testing.T) {
	e := newCLIEnv(t)
	e.mustRun(t, smallIEC, "apply", "-f", "-")
	e.reconcile(t, manifest.KindInferenceEndpointConfig, "default", "small")
	e.clk.Step(90 * time.Second)
	out := e.mustRun(t, "", "get", "iec", "-o", "wide")
	want := "NAME    STATE                REPLICAS   ENDPOINT   AGE   INSTANCE TYPE    MODEL                   URL\n" +
		"small   DeploymentComplete   2/2        <none>     90s   ml.g5.24xlarge   Llama-3.1-8B-Instruct   "
	if !strings.HasPrefix(out, want) || !strings.Contains(out, "http://127.0.0.1:8080") {
		t.Errorf("got:\n%s\nwant prefix:\n%s", out, want)
	}
	d := squeeze(e.mustRun(t, "", "describe", "iec", "small"))
	for _, w := range []string{" State: DeploymentComplete\n", " Replicas: 2 current, 2 ready\n", " Ready True Deployed ", "Events:\n TYPE REASON AGE MESSAGE\n Normal Applied 90s manifest created\n"} {
		if !strings.Contains(d, w) {
			t.Errorf("describe lacks %q:\n%s", w, d)
		}
	}
}
