package nodes

import "time"

// Karpenter's BATCH_IDLE_DURATION and BATCH_MAX_DURATION.
const (
	DefaultBatchIdle = time.Second
	DefaultBatchMax  = 10 * time.Second
)

// Batcher is Karpenter's provisioning batch window: a batch opens at the
// first pending replica and is ready once no new pending replica arrived for
// Idle, or Max after it opened, so a burst of replicas is planned together.
// The zero value uses the defaults. Not safe for concurrent use.
type Batcher struct {
	Idle, Max time.Duration

	open          bool // a window is running
	start, latest time.Time
	seen          map[string]struct{}
}

// Observe takes the replicas pending now and reports whether the batch is
// ready. After a ready batch, the same replicas stay ready (they waited
// already); a new one opens the next window. Nothing pending resets it.
func (b *Batcher) Observe(now time.Time, pendingIDs []string) (ready bool) {
	if len(pendingIDs) == 0 {
		b.open, b.seen = false, nil
		return false
	}
	idle, maxWait := b.Idle, b.Max
	if idle <= 0 {
		idle = DefaultBatchIdle
	}
	if maxWait <= 0 {
		maxWait = DefaultBatchMax
	}
	// Rebuilt each call so replicas no longer pending are forgotten.
	seen := make(map[string]struct{}, len(pendingIDs))
	fresh := b.seen == nil
	for _, id := range pendingIDs {
		seen[id] = struct{}{}
		if _, ok := b.seen[id]; !ok {
			fresh = true
		}
	}
	b.seen = seen
	if fresh {
		if !b.open {
			b.open, b.start = true, now
		}
		b.latest = now
	}
	if !b.open {
		return true
	}
	if now.Sub(b.latest) >= idle || now.Sub(b.start) >= maxWait {
		b.open = false
		return true
	}
	return false
}
