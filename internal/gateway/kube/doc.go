// Package kube keeps a gateway's routes in step with a Kubernetes cluster
// run by the capstan operator: one route per InferenceEndpointConfig or
// JumpStartModel (named, as `capstan apply` names it, by its SageMaker
// endpoint name, else the object's name), whose replicas are the ready
// endpoints of the EndpointSlices of the Service the operator made for it,
// under the manifest's routing strategy, each with its KV events endpoint
// when the Service exposes the operator's "kv-events" port. A request to a
// route with no ready endpoint is held while the gateway activates the
// deployment (activate.go): replicas 0 become the autoscaling minimum, at
// least 1, through the object's scale subresource.
//
// The state is rebuilt from the API server's watch alone (routes.go is the
// pure mapping, discovery.go the informers), so any number of gateway
// replicas route alike with no store between them.
package kube
