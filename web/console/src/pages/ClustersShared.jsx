// What the Clusters, Deployments and Apply pages share: paging through
// SageMaker lists, ages by the server's clock, and reading manifests
// (InferenceEndpointConfig, JumpStartModel) as `capstan get` does.
import { MANIFESTS, serverNow } from '../api.js';
import { fmtDuration, toDate } from '../components.jsx';

// listAll follows NextToken until the list ends (at most 50 pages).
export async function listAll(call, key) {
  let out = [];
  let token;
  for (let i = 0; i < 50; i++) {
    const res = await call(token);
    out = out.concat(res[key] || []);
    token = res.NextToken;
    if (!token) break;
  }
  return out;
}

// age is how long ago t was by the server's clock ("3m 5s").
export function age(t) {
  const d = toDate(t);
  if (!d || Number.isNaN(d.getTime())) return '—';
  return fmtDuration(Math.max(0, serverNow() - d));
}

// The two manifest kinds, by the short name the console's URLs use.
export const KINDS = {
  iec: { kind: 'InferenceEndpointConfig', plural: 'inferenceendpointconfigs', short: 'IEC' },
  jsm: { kind: 'JumpStartModel', plural: 'jumpstartmodels', short: 'JSM' },
};

export function shortKind(kind) {
  for (const [k, v] of Object.entries(KINDS)) if (v.kind === kind) return k;
  return null;
}

// objectPath is the manifests API path of one object.
export function objectPath(short, namespace, name) {
  const k = KINDS[short];
  return `${MANIFESTS}/namespaces/${encodeURIComponent(namespace)}/${k.plural}/${encodeURIComponent(name)}`;
}

// deploymentHref is the console page of one object.
export function deploymentHref(kind, namespace, name) {
  const short = KINDS[kind] ? kind : shortKind(kind);
  return `/deployments/${short}/${encodeURIComponent(namespace)}/${encodeURIComponent(name)}`;
}

// endpointName is the SageMaker endpoint an object registers: the spec's
// name, else the one in its status' ARN.
export function endpointName(obj) {
  const spec = obj.spec || {};
  const fromSpec = obj.kind === 'JumpStartModel' ? spec.sageMakerEndpoint && spec.sageMakerEndpoint.name : spec.endpointName;
  if (fromSpec) return fromSpec;
  const arn = obj.status && obj.status.endpoints && obj.status.endpoints.sagemaker && obj.status.endpoints.sagemaker.endpointArn;
  return arn ? arn.split('/').pop() : '';
}

// desiredReplicas is spec.replicas, or for an autoscaled object the
// controller has seen, the count it runs now (as `capstan get` shows it) —
// but never below minReplicaCount, so that replicas still pending (which
// status does not count) show as wanted.
export function desiredReplicas(obj) {
  const spec = obj.spec || {};
  const st = obj.status || {};
  const as = spec.autoScalingSpec;
  if (as && st.observedGeneration > 0) return Math.max(st.replicas || 0, as.minReplicaCount || 0);
  return spec.replicas ?? 0;
}

export function replicasText(obj) {
  const st = obj.status || {};
  return `${st.readyReplicas || 0}/${desiredReplicas(obj)}`;
}

// replicaPrefix is how the object's replica ids begin on nodes
// ("jsm.default.demo.").
export function replicaPrefix(short, namespace, name) {
  return `${short}.${namespace}.${name}.`;
}

// APPLY_DRAFT carries a manifest from a deployment page to the Apply page.
export const APPLY_DRAFT = 'capstan.console.apply-draft';
