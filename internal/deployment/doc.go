// Package deployment turns InferenceEndpointConfig and JumpStartModel
// manifests into running deployments: it stores the manifests (Apply, Get,
// List, Delete, Events) and runs the controller that resolves each model
// source, places replicas on the cluster's nodes by their resource requests,
// runs them through the serving engine (internal/serving: start, health
// gate, drain and stop, orphan sweep), keeps the gateway route (and, when the
// manifest names one, the SageMaker endpoint registration) current, rolls out
// spec changes without cutting requests (serving.RollingStrategy), autoscales
// with the HPA/KEDA scaler (down to zero, with the gateway's activator
// bringing a replica back), and writes the manifest status and events.
//
// It owns its store buckets, its replicas (runtime.ControllerDeployment) and
// the routes named after its deployments. It does not decode or validate
// manifests (manifest.Load does, at the API edge), does not serve HTTP
// (manifestapi does) and never touches SageMaker-created endpoints: names are
// claimed through EndpointRegistry, which refuses names already in use.
package deployment
