package manifest

import (
	"testing"
	"time"
)

// TestRolloutAnnotations: the rollout annotations are read as a batch and
// a wait, and a bad value is refused naming the annotation.
func TestRolloutAnnotations(t *testing.T) {
	cases := []struct {
		name        string
		annotations map[string]string
		want        RollingUpdate
		path, msg   string // "" = valid
	}{
		{"none: all at once", nil, RollingUpdate{}, "", ""},
		{"a count and a wait", map[string]string{AnnotationRolloutBatch: "2", AnnotationRolloutWait: "30s"}, RollingUpdate{Batch: 2, Wait: 30 * time.Second}, "", ""},
		{"a percentage", map[string]string{AnnotationRolloutBatch: "25%"}, RollingUpdate{Batch: 25, BatchPercent: true}, "", ""},
		{"the largest wait", map[string]string{AnnotationRolloutWait: "1h"}, RollingUpdate{Wait: time.Hour}, "", ""},
		{"zero batch", map[string]string{AnnotationRolloutBatch: "0"}, RollingUpdate{},
			"metadata.annotations[capstan.dev/rollout-batch]", `"0" must be a replica count from 1 to 1000, or a percentage such as 25%`},
		{"percentage past 100", map[string]string{AnnotationRolloutBatch: "101%"}, RollingUpdate{},
			"metadata.annotations[capstan.dev/rollout-batch]", `"101%" must be a percentage from 1% to 100%`},
		{"count past the replica limit", map[string]string{AnnotationRolloutBatch: "1001"}, RollingUpdate{},
			"metadata.annotations[capstan.dev/rollout-batch]", "from 1 to 1000"},
		{"not a number", map[string]string{AnnotationRolloutBatch: "half"}, RollingUpdate{},
			"metadata.annotations[capstan.dev/rollout-batch]", "must be a replica count"},
		{"wait without a unit", map[string]string{AnnotationRolloutWait: "30"}, RollingUpdate{},
			"metadata.annotations[capstan.dev/rollout-wait]", `"30" must be a duration from 0s to 1h0m0s, such as 30s`},
		{"negative wait", map[string]string{AnnotationRolloutWait: "-1s"}, RollingUpdate{},
			"metadata.annotations[capstan.dev/rollout-wait]", "must be a duration"},
		{"wait past an hour", map[string]string{AnnotationRolloutWait: "61m"}, RollingUpdate{},
			"metadata.annotations[capstan.dev/rollout-wait]", "must be a duration"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, kind := range []string{"IEC", "JSM"} {
				var o Object
				if kind == "IEC" {
					o = decodeOneT[*InferenceEndpointConfig](t, minimalIEC)
				} else {
					o = decodeOneT[*JumpStartModel](t, minimalJSM)
				}
				o.GetMeta().Annotations = tc.annotations
				o.Default()
				if tc.path != "" {
					wantOnly(t, o.Validate(), tc.path, tc.msg)
					continue
				}
				if err := o.Validate(); err != nil {
					t.Fatalf("%s: %v", kind, err)
				}
				if got := RollingUpdateOf(o.GetMeta()); got != tc.want {
					t.Fatalf("%s: RollingUpdateOf = %+v, want %+v", kind, got, tc.want)
				}
			}
		})
	}
}
