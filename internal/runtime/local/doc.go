// Package local owns the local runtime: one `capstan engine sim` OS process
// per replica on this host. It launches the process (own process group,
// Pdeathsig on Linux, so no replica outlives capstan), reads its announce
// line for the address, health-checks it, reports state changes to
// subscribers, restarts crashed or unhealthy replicas with clock-driven
// exponential backoff, and stops them with SIGTERM then SIGKILL.
//
// A replica gets only what it needs. Its environment is an allow-list, built
// afresh, never the server's environment: PATH=/usr/local/bin:/usr/bin:/bin,
// HOME=<replicas dir>/<id>, TMPDIR=<replicas dir>/<id>/tmp, the server's
// LANG, LC_ALL and TZ when set, then the spec's Env. So no AWS_*, CAPSTAN_*,
// HF_TOKEN or LD_* of the server reaches an engine. The spec's Env is checked
// with package procenv before launch (the manifest door checks it too): a
// loader, Go-runtime or interpreter variable, or one of PATH/HOME/TMPDIR, is
// refused. The engine runs in <replicas dir>/<id>/, which must be one real
// directory directly under the replicas dir (checked with filepath.Rel and
// IsLocal; a symlink there is refused), and is removed when the replica stops;
// the log <replicas dir>/<id>.log is kept.
package local
