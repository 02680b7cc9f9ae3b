package manifest

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The rollout annotations: how a change of the replica template (image,
// model, resources, environment…) replaces the running replicas. HyperPod's
// schema has no field for it, so capstan reads its own annotations; without
// them every new replica starts at once (a 100 % surge), as before.
const (
	// AnnotationRolloutBatch is how many new replicas start per step: a
	// count ("2") or a share of the replicas ("25%").
	AnnotationRolloutBatch = "capstan.dev/rollout-batch"
	// AnnotationRolloutWait is how long a batch serves, healthy, before
	// the next one starts (a Go duration, "30s").
	AnnotationRolloutWait = "capstan.dev/rollout-wait"
)

// MaxRolloutWait bounds AnnotationRolloutWait.
const MaxRolloutWait = time.Hour

// RollingUpdate is what the rollout annotations ask for.
type RollingUpdate struct {
	// Batch new replicas per step; BatchPercent makes it a percentage of
	// the replicas. Zero means all at once.
	Batch        int
	BatchPercent bool
	// Wait between a healthy batch and the next.
	Wait time.Duration
}

// RollingUpdateOf reads m's rollout annotations; an invalid value (which
// validation refuses) reads as its default.
func RollingUpdateOf(m *ObjectMeta) RollingUpdate {
	var ru RollingUpdate
	if v, ok := m.Annotations[AnnotationRolloutBatch]; ok {
		if n, pct, err := parseBatch(v); err == nil {
			ru.Batch, ru.BatchPercent = n, pct
		}
	}
	if v, ok := m.Annotations[AnnotationRolloutWait]; ok {
		if d, err := parseRolloutWait(v); err == nil {
			ru.Wait = d
		}
	}
	return ru
}

func validateRollout(m *ObjectMeta, mp path, errs *ErrorList) {
	if v, ok := m.Annotations[AnnotationRolloutBatch]; ok {
		if _, _, err := parseBatch(v); err != nil {
			errs.add(mp.child("annotations").key(AnnotationRolloutBatch), "%q %v", v, err)
		}
	}
	if v, ok := m.Annotations[AnnotationRolloutWait]; ok {
		if _, err := parseRolloutWait(v); err != nil {
			errs.add(mp.child("annotations").key(AnnotationRolloutWait), "%q %v", v, err)
		}
	}
}

// parseBatch reads "N" (1..MaxReplicas) or "P%" (1..100).
func parseBatch(v string) (n int, percent bool, err error) {
	s, percent := strings.CutSuffix(v, "%")
	hi := MaxReplicas
	if percent {
		hi = 100
	}
	n, err = strconv.Atoi(s)
	if err != nil || n < 1 || n > hi {
		if percent {
			return 0, false, fmt.Errorf("must be a percentage from 1%% to 100%%")
		}
		return 0, false, fmt.Errorf("must be a replica count from 1 to %d, or a percentage such as 25%%", MaxReplicas)
	}
	return n, percent, nil
}

func parseRolloutWait(v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 || d > MaxRolloutWait {
		return 0, fmt.Errorf("must be a duration from 0s to %s, such as 30s", MaxRolloutWait)
	}
	return d, nil
}
