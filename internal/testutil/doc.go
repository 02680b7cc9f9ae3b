// Package testutil starts the real things tests drive: the capstan binary,
// redis-server, free ports. Test helpers only; never imported by product code.
package testutil
