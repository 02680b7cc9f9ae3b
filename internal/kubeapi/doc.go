// Package kubeapi makes `capstan serve`'s /apis surface answer kubectl and
// client-go as a Kubernetes API server does: discovery (/api, /apis, each
// group version, /version), tables with the CRDs' printer columns for
// `kubectl get`, field and label selectors, watches (`kubectl get -w`,
// `kubectl delete --wait`) and core/v1 events (`kubectl describe`,
// `kubectl events`).
//
// It sits in front of the handlers that own the resources
// (internal/manifestapi for InferenceEndpointConfig, JumpStartModel and the
// workspace kinds) and reads them only through their HTTP answers, so what
// kubectl sees is what `capstan get` sees. A watch re-reads its collection
// on the injected clock and sends what changed.
package kubeapi
