// Package local owns the local runtime: one `capstan engine sim` OS process
// per replica on this host. It launches the process (own process group,
// Pdeathsig on Linux, so no replica outlives capstan), reads its announce
// line for the address, health-checks it, reports state changes to
// subscribers, restarts crashed or unhealthy replicas with clock-driven
// exponential backoff, and stops them with SIGTERM then SIGKILL.
package local
