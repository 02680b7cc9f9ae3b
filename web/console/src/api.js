// The console's only way to the server: the same APIs the CLI and the AWS
// SDKs use — SageMaker (JSON 1.1), CloudWatch (JSON 1.0), the manifests API
// and capstan's node API — signed with SigV4 (aws4fetch) or carrying the
// admin token when the server has them configured.
import { AwsClient } from 'aws4fetch';

// config is GET /console/config.json: region, which kinds of auth the server
// requires, and its clock (which is not the browser's under --dev-clock).
let config = { region: 'us-east-1', auth: { sigv4: false, adminToken: false }, devClock: false, now: 0 };
let clockOffset = 0; // server clock − browser clock, ms

export async function loadConfig() {
  const res = await fetch('/console/config.json', { cache: 'no-store' });
  if (!res.ok) throw new APIError('ConfigUnavailable', `GET /console/config.json: HTTP ${res.status}`, res.status);
  config = await res.json();
  clockOffset = Date.parse(config.now) - Date.now();
  return config;
}

export const getConfig = () => config;

// serverNow is the server's clock as the console last learnt it: plan time
// left and chart windows use it, so a dev clock advanced by hours shows.
export const serverNow = () => new Date(Date.now() + clockOffset);

const SESSION_KEY = 'capstan.console.session';

// session holds what the user signed in with, for this tab only.
export function session() {
  try {
    return JSON.parse(sessionStorage.getItem(SESSION_KEY) || 'null');
  } catch {
    return null;
  }
}

export function setSession(s) {
  if (s) sessionStorage.setItem(SESSION_KEY, JSON.stringify(s));
  else sessionStorage.removeItem(SESSION_KEY);
  window.dispatchEvent(new Event('capstan-session'));
}

// needsSignIn says whether the server wants credentials the tab lacks.
export function needsSignIn() {
  const s = session() || {};
  return (config.auth.sigv4 && !s.accessKeyId) || (config.auth.adminToken && !s.adminToken);
}

// APIError carries the server's error as the protocol shaped it: code
// (SageMaker's __type, CloudWatch's code, Kubernetes' reason), message, and
// for manifests the causes, each naming a field.
export class APIError extends Error {
  constructor(code, message, status, causes = []) {
    super(message);
    this.code = code;
    this.status = status;
    this.causes = causes;
  }
}

// readBody reads a response as JSON; a body that is not JSON (a proxy's
// error page) becomes {message: text}.
async function readBody(res) {
  const text = await res.text();
  try {
    return { text, data: text ? JSON.parse(text) : {} };
  } catch {
    return { text, data: { message: text } };
  }
}

async function awsCall(service, target, contentType, body) {
  const init = {
    method: 'POST',
    headers: { 'Content-Type': contentType, 'X-Amz-Target': target },
    body: JSON.stringify(body || {}),
  };
  let res;
  if (config.auth.sigv4) {
    const s = session();
    if (!s || !s.accessKeyId) throw new APIError('SignInRequired', 'Sign in with an access key to use the console.', 401);
    const client = new AwsClient({
      accessKeyId: s.accessKeyId,
      secretAccessKey: s.secretAccessKey,
      region: config.region,
      service,
    });
    res = await client.fetch(location.origin + '/', init);
  } else {
    res = await fetch('/', init);
  }
  const { text, data } = await readBody(res);
  if (!res.ok) {
    const type = data.__type || res.headers.get('x-amzn-ErrorType') || `HTTP${res.status}`;
    const code = type.split('#').pop().split(':')[0];
    throw new APIError(code, data.message || data.Message || text || res.statusText, res.status);
  }
  return data;
}

// sagemaker calls a SageMaker operation (ListEndpoints, CreateTrainingPlan…).
export const sagemaker = (op, body) => awsCall('sagemaker', 'SageMaker.' + op, 'application/x-amz-json-1.1', body);

// cloudwatch calls a CloudWatch operation (GetMetricData…); timestamps are
// epoch seconds in this protocol.
export const cloudwatch = (op, body) =>
  awsCall('monitoring', 'GraniteServiceVersion20100801.' + op, 'application/x-amz-json-1.0', body);

// bearer calls the manifests API (/apis/inference.sagemaker.aws.amazon.com/v1…),
// the spaces API (/apis/workspace.jupyter.org/v1alpha1…) or capstan's node API
// (/apis/capstan.dev/v1…) with the admin token.
export async function bearer(method, path, body, contentType = 'application/json') {
  const headers = {};
  const s = session();
  if (config.auth.adminToken) {
    if (!s || !s.adminToken) throw new APIError('SignInRequired', 'Sign in with an admin token to use this page.', 401);
    headers.Authorization = 'Bearer ' + s.adminToken;
  }
  if (body !== undefined) headers['Content-Type'] = contentType;
  const res = await fetch(path, { method, headers, body });
  const { data } = await readBody(res);
  if (!res.ok) {
    const causes = (data.details && data.details.causes) || [];
    throw new APIError(data.reason || `HTTP${res.status}`, data.message || res.statusText, res.status, causes);
  }
  return data;
}

export const MANIFESTS = '/apis/inference.sagemaker.aws.amazon.com/v1';
export const NODES = '/apis/capstan.dev/v1';
export const WORKSPACES = '/apis/workspace.jupyter.org/v1alpha1';

// prom calls capstan's own Prometheus API (/prometheus/api/v1/…: query,
// query_range, label values) with the admin token, and returns its data;
// a refusal keeps Prometheus' errorType and error.
export async function prom(path, params) {
  const headers = {};
  const s = session();
  if (config.auth.adminToken) {
    if (!s || !s.adminToken) throw new APIError('SignInRequired', 'Sign in with an admin token to use this page.', 401);
    headers.Authorization = 'Bearer ' + s.adminToken;
  }
  const res = await fetch(PROMETHEUS + path + '?' + new URLSearchParams(params), { headers });
  const { data, text } = await readBody(res);
  if (!res.ok || data.status !== 'success') {
    throw new APIError(data.errorType || `HTTP${res.status}`, data.error || data.message || text || res.statusText, res.status);
  }
  return data.data;
}

export const PROMETHEUS = '/prometheus/api/v1/';
export const DASHBOARDS = '/_capstan/dashboards';
