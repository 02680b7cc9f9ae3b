// One InferenceEndpointConfig or JumpStartModel, as `capstan describe`
// shows it: status, conditions (pending reasons among them), where its
// replicas run, scaling decisions, KV cache tiers, events and the spec; and
// a Delete with a confirmation step.
import { useEffect, useRef, useState } from 'preact/hooks';
import { NODES, bearer } from '../api.js';
import { ErrorBox, Status, Table, fmtDate, fmtNumber, usePoll, useSubmit } from '../components.jsx';
import { Link, navigate } from '../router.jsx';
import {
  APPLY_DRAFT,
  KINDS,
  age,
  desiredReplicas,
  endpointName,
  objectPath,
  replicaPrefix,
} from './ClustersShared.jsx';
import './Clusters.css';

const conditionColumns = [
  { title: 'Type', key: 'type' },
  { title: 'Status', key: 'status' },
  { title: 'Reason', render: (c) => c.reason || '—' },
  { title: 'Age', render: (c) => age(c.lastTransitionTime) },
  { title: 'Message', render: (c) => c.message || '' },
];

const eventColumns = [
  { title: 'Time', render: (e) => fmtDate(e.time) },
  { title: 'Type', render: (e) => (e.type === 'Warning' ? <span class="status bad">Warning</span> : e.type) },
  { title: 'Reason', key: 'reason' },
  { title: 'Message', key: 'message' },
];

const placementColumns = [
  { title: 'Replica', render: (p) => <code>{p.replica}</code> },
  { title: 'Node', render: (p) => <code>{p.node.name}</code> },
  {
    title: 'Cluster',
    render: (p) => <Link href={'/clusters/' + encodeURIComponent(p.node.cluster)}>{p.node.cluster}</Link>,
  },
  { title: 'Instance group', render: (p) => p.node.group },
  { title: 'Instance type', render: (p) => p.node.instanceType },
  { title: 'Capacity type', render: (p) => p.node.capacityType },
];

const scopes = { replica: 'per replica', node: 'per node', shared: 'shared' };

function bytes(n) {
  if (!n) return '';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  let v = n;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${v >= 10 ? Math.round(v) : v.toFixed(1)} ${units[i]}`;
}

function tierSize(t) {
  if (t.units > 0 && t.eachBytes > 0) return `${t.units} × ${bytes(t.eachBytes)}`;
  if (t.units > 0 && t.capacityTokens > 0) return `${t.units} × ${fmtNumber(t.capacityTokens / t.units)} tokens`;
  if (t.eachBytes > 0) return bytes(t.eachBytes) + (t.scope === 'shared' ? '' : ' each');
  return '—';
}

const pct = (p) => (p == null ? '—' : (p * 100).toFixed(1) + '%');

const kvColumns = [
  { title: 'Tier', key: 'name' },
  { title: 'Scope', render: (t) => scopes[t.scope] || t.scope },
  { title: 'Size', render: tierSize },
  { title: 'Use', render: (t) => pct(t.usage) },
  { title: 'Hit rate', render: (t) => pct(t.hitRate) },
];

// manifestOf is what a user would apply again: no status, no server-set
// metadata. JSON is YAML, so the Apply page takes it as is.
function manifestOf(obj) {
  const m = obj.metadata || {};
  const meta = { name: m.name, namespace: m.namespace };
  if (m.labels) meta.labels = m.labels;
  if (m.annotations) meta.annotations = m.annotations;
  return { apiVersion: obj.apiVersion, kind: obj.kind, metadata: meta, spec: obj.spec };
}

function DeleteAction({ obj, path }) {
  const [confirming, setConfirming] = useState(false);
  const [error, setError] = useState(null);
  const cancelRef = useRef(null);
  const deleteRef = useRef(null);
  const asked = useRef(false);
  // Keyboard focus follows the step: to Cancel when asked, back to Delete
  // after a Cancel.
  useEffect(() => {
    if (confirming && cancelRef.current) cancelRef.current.focus();
    else if (!confirming && asked.current && deleteRef.current) deleteRef.current.focus();
    asked.current = asked.current || confirming;
  }, [confirming]);
  const [remove, busy] = useSubmit(async () => {
    setError(null);
    try {
      await bearer('DELETE', path);
      navigate('/deployments');
    } catch (e) {
      setError(e);
    }
  });
  if (!confirming) {
    return (
      <button class="danger" type="button" ref={deleteRef} onClick={() => setConfirming(true)} data-testid="delete">
        Delete
      </button>
    );
  }
  return (
    <div class="card" role="group" aria-labelledby="delete-question">
      <p id="delete-question">
        Delete {obj.kind} <strong>{obj.metadata.name}</strong> in namespace {obj.metadata.namespace}? Its replicas stop
        and its SageMaker endpoint goes away.
      </p>
      <div class="clusters-confirm">
        <button class="danger" type="button" onClick={remove} disabled={busy} data-testid="confirm-delete">
          {busy ? 'Deleting…' : 'Delete ' + obj.metadata.name}
        </button>
        <button class="secondary" type="button" ref={cancelRef} onClick={() => setConfirming(false)} disabled={busy}>
          Cancel
        </button>
      </div>
      <ErrorBox error={error} />
    </div>
  );
}

export default function DeploymentDetail({ kind, namespace, name }) {
  const known = !!KINDS[kind];
  const path = known ? objectPath(kind, namespace, name) : '';
  const { data, error, loading } = usePoll(async () => {
    if (!known) return null;
    const [obj, events, kv, nodes] = await Promise.all([
      bearer('GET', path),
      bearer('GET', path + '/events').then(
        (r) => ({ items: r.items || [] }),
        (e) => ({ items: [], error: e }),
      ),
      bearer('GET', path + '/kvcache').catch((e) => (e.status === 404 ? null : { error: e })),
      bearer('GET', NODES + '/nodes').catch(() => null),
    ]);
    const prefix = replicaPrefix(kind, namespace, name);
    const placement = [];
    for (const n of (nodes && nodes.items) || []) {
      for (const r of n.replicas || []) if (r.startsWith(prefix)) placement.push({ key: r, replica: r, node: n });
    }
    placement.sort((a, b) => a.replica.localeCompare(b.replica));
    return { obj, events, kv, placement };
  }, [kind, namespace, name]);

  if (!known) {
    return (
      <section>
        <h1>Not found</h1>
        <p>
          Unknown kind <code>{kind}</code>: use <code>iec</code> or <code>jsm</code>. <Link href="/deployments">Deployments</Link>
        </p>
      </section>
    );
  }
  const obj = data && data.obj;
  const st = (obj && obj.status) || {};
  const ep = obj ? endpointName(obj) : '';
  const conditions = st.conditions || [];
  const pending = conditions.filter((c) => c.type === 'Degraded' && c.status === 'True' && c.message);
  const events = data ? [...data.events.items].reverse() : [];
  const scaling = events.filter((e) => /^Scaled/.test(e.reason));
  const ds = st.deploymentStatus;
  const sm = st.endpoints && st.endpoints.sagemaker;
  const editInApply = () => {
    sessionStorage.setItem(APPLY_DRAFT, JSON.stringify(manifestOf(obj), null, 2));
    navigate('/apply');
  };
  return (
    <section>
      <p>
        <Link href="/deployments">← Deployments</Link>
      </p>
      <h1>{name}</h1>
      <p class="clusters-sub">
        {KINDS[kind].kind} in namespace <strong>{namespace}</strong>
      </p>
      <ErrorBox error={error} />
      {loading && !data ? <p class="empty">Loading…</p> : null}
      {obj ? (
        <>
          <div class="toolbar">
            {ep ? (
              <Link href={'/endpoints/' + encodeURIComponent(ep)} data-testid="endpoint-link">
                SageMaker endpoint {ep}
              </Link>
            ) : null}
            <button class="secondary" type="button" onClick={editInApply}>
              Edit in Apply
            </button>
            <DeleteAction obj={obj} path={path} />
          </div>
          {pending.map((c) => (
            <p class="flag warn" data-testid="pending">
              {c.reason}: {c.message}
            </p>
          ))}
          <h2>Status</h2>
          <div class="card">
            <dl class="props clusters-props" data-testid="deployment-status">
              <dt>State</dt>
              <dd>
                <Status value={st.state || 'Pending'} />
              </dd>
              <dt>Replicas</dt>
              <dd data-testid="replicas">
                {st.readyReplicas || 0} ready of {desiredReplicas(obj)} desired ({st.replicas || 0} running)
              </dd>
              {ds && (ds.reason || ds.message) ? (
                <>
                  <dt>Deployment</dt>
                  <dd>
                    {[ds.reason, ds.message].filter(Boolean).join(': ')}
                    {ds.lastUpdated ? <span class="hint"> (updated {age(ds.lastUpdated)} ago)</span> : null}
                  </dd>
                </>
              ) : null}
              <dt>Generation</dt>
              <dd>
                {obj.metadata.generation} (observed {st.observedGeneration || 0})
              </dd>
              <dt>Endpoint URL</dt>
              <dd>{st.endpoints && st.endpoints.url ? <code>{st.endpoints.url}</code> : '—'}</dd>
              <dt>SageMaker endpoint</dt>
              <dd>
                {ep ? <Link href={'/endpoints/' + encodeURIComponent(ep)}>{ep}</Link> : '—'}
                {sm && sm.state ? <> ({sm.state})</> : null}
              </dd>
              {st.metricsStatus && st.metricsStatus.errorMessage ? (
                <>
                  <dt>Metrics</dt>
                  <dd>
                    {st.metricsStatus.state}: {st.metricsStatus.errorMessage}
                  </dd>
                </>
              ) : null}
              <dt>Created</dt>
              <dd>
                {fmtDate(obj.metadata.creationTimestamp)} ({age(obj.metadata.creationTimestamp)} ago)
              </dd>
            </dl>
          </div>
          <h2>Conditions</h2>
          <Table columns={conditionColumns} rows={conditions} label="Conditions" testid="conditions" empty="No conditions yet." />
          <h2>Placement</h2>
          <Table
            columns={placementColumns}
            rows={data.placement}
            label="Replicas by node"
            testid="placement"
            empty="No replica is placed on a node."
          />
          {scaling.length ? (
            <>
              <h2>Scaling decisions</h2>
              <Table columns={eventColumns} rows={scaling} label="Scaling decisions" testid="scaling" />
            </>
          ) : null}
          {data.kv ? (
            <>
              <h2>KV cache tiers</h2>
              {data.kv.error ? (
                <ErrorBox error={data.kv.error} />
              ) : (
                <>
                  <Table columns={kvColumns} rows={data.kv.tiers} label="KV cache tiers" testid="kvcache" empty="No tiers." />
                  <p class="hint">
                    {data.kv.replicas === 0
                      ? 'No replica runs: sizes are from the spec.'
                      : `Metrics of ${data.kv.scraped}/${data.kv.replicas} replicas.`}
                  </p>
                </>
              )}
            </>
          ) : null}
          <h2>Events</h2>
          {data.events.error ? <ErrorBox error={data.events.error} /> : null}
          <Table columns={eventColumns} rows={events} label="Events, newest first" testid="events" empty="No events yet." />
          <h2>Spec</h2>
          <details open>
            <summary>Manifest (JSON, which is also YAML)</summary>
            <pre class="clusters-spec" data-testid="spec" tabindex="0">
              {JSON.stringify(manifestOf(obj), null, 2)}
            </pre>
          </details>
        </>
      ) : null}
    </section>
  );
}
