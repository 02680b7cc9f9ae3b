package alarm

import (
	"errors"
	"strings"
)

// UnknownAlarmError: Arm was asked for alarms the configuration does not
// define; Names lists them in the order asked.
type UnknownAlarmError struct{ Names []string }

func (e *UnknownAlarmError) Error() string {
	return "unknown alarms: " + strings.Join(e.Names, ", ")
}

// IsUnknownAlarm reports whether err is (or wraps) an *UnknownAlarmError.
func IsUnknownAlarm(err error) bool {
	var u *UnknownAlarmError
	return errors.As(err, &u)
}
