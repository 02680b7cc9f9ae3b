// Package observability connects capstan to a real Prometheus: HTTP service
// discovery of the engine replicas (TargetsHandler, served by capstan serve
// at DiscoveryPath), the generated prometheus.yml that scrapes capstan and
// its replicas and loads capstan's alert rules (Config), and starting a
// Prometheus binary and waiting until it is ready (Start), which
// `capstan observability up` is built on.
package observability
