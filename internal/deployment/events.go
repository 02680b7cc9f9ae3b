package deployment

import (
	"github.com/capstan-dev/capstan/internal/manifest"
)

// event records one event for object k, keeping the newest MaxEvents. An
// event equal (type, reason, message) to the newest one is not repeated.
func (c *Controller) event(k, typ, reason, msg string) {
	c.evmu.Lock()
	defer c.evmu.Unlock()
	evs := c.evs[k]
	if n := len(evs); n > 0 && evs[n-1].Type == typ && evs[n-1].Reason == reason && evs[n-1].Message == msg {
		return
	}
	evs = append(evs, manifest.Event{Time: c.o.Clock.Now().UTC(), Type: typ, Reason: reason, Message: msg})
	if len(evs) > c.o.MaxEvents {
		evs = append([]manifest.Event(nil), evs[len(evs)-c.o.MaxEvents:]...)
	}
	c.evs[k] = evs
}

func (c *Controller) events(k string) []manifest.Event {
	c.evmu.Lock()
	defer c.evmu.Unlock()
	return append([]manifest.Event(nil), c.evs[k]...)
}

func (c *Controller) dropEvents(k string) {
	c.evmu.Lock()
	defer c.evmu.Unlock()
	delete(c.evs, k)
}
