package server

import (
	"fmt"

	"github.com/capstan-dev/capstan/internal/clock"
	"github.com/capstan-dev/capstan/internal/store"
)

// The dev clock's state lives in the store beside what it dated: a restart
// (kill -9 included) continues from the last acknowledged advance, so an
// expired plan stays expired and a started one stays started.
const (
	devClockKind = "devclock"
	devClockName = "state"
)

// openClock returns the server's clock: the wall clock, or with devClock a
// Dev clock restored from st that saves every advance to st before it takes
// effect. A data directory whose clock was advanced refuses to start on the
// wall clock, which would move its time back.
func openClock(st *store.Store, devClock bool) (clock.Clock, error) {
	var saved clock.DevState
	if err := st.View(func(tx *store.Tx) error {
		_, err := tx.Get(devClockKind, devClockName, &saved)
		return err
	}); err != nil {
		return nil, fmt.Errorf("dev clock: %w", err)
	}
	if !devClock {
		if saved.Offset > 0 {
			return nil, fmt.Errorf("this data directory's dev clock was advanced by %s: start capstan serve with --dev-clock "+
				"(or use another --data-dir); on the wall clock its time would go back", saved.Offset)
		}
		return clock.Real{}, nil
	}
	dev, err := clock.RestoreDev(saved, func(s clock.DevState) error {
		return st.Update(func(tx *store.Tx) error { return tx.Put(devClockKind, devClockName, s) })
	})
	if err != nil {
		return nil, fmt.Errorf("dev clock: restore from the data directory: %w", err)
	}
	return dev, nil
}
