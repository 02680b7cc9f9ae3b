// Spaces: every Workspace in every namespace, as `capstan get ws -A -o wide`
// lists them, with the actions a user takes on one: open it, stop or start
// it (desiredStatus), delete it.
import { useState } from 'preact/hooks';
import { WORKSPACES, bearer, getConfig, session } from '../api.js';
import { ErrorBox, Field, Status, Table, usePoll, useSubmit } from '../components.jsx';
import { Link } from '../router.jsx';
import { age } from './ClustersShared.jsx';
import './Clusters.css';

const path = (ns, name) => `${WORKSPACES}/namespaces/${encodeURIComponent(ns)}/workspaces/${encodeURIComponent(name)}`;

async function load() {
  const l = await bearer('GET', `${WORKSPACES}/workspaces`);
  return (l.items || []).map((w) => ({ ...w, key: `${w.metadata.namespace}/${w.metadata.name}` }));
}

// openHref is the space's URL; with an admin token configured, the first
// visit carries it once so the proxy sets its cookie (a browser cannot
// send the header on a page load).
function openHref(w) {
  const url = w.status && w.status.accessURL;
  if (!url) return null;
  const u = new URL(url, location.href);
  const s = session();
  if (getConfig().auth.adminToken && s && s.adminToken) u.searchParams.set('capstan_token', s.adminToken);
  return u.pathname + u.search;
}

function gpuText(st) {
  if (st.migSlice) return 'MIG ' + st.migSlice;
  if (st.gpus) return st.gpus + ' GPU' + (st.gpus > 1 ? 's' : '');
  return '—';
}

// SetStatus flips desiredStatus: the stored object, changed, is PUT back.
function SetStatus({ w, reload }) {
  const [error, setError] = useState(null);
  const want = w.spec.desiredStatus === 'Stopped' ? 'Running' : 'Stopped';
  const [submit, busy] = useSubmit(async () => {
    setError(null);
    try {
      const p = path(w.metadata.namespace, w.metadata.name);
      const cur = await bearer('GET', p);
      cur.spec.desiredStatus = want;
      await bearer('PUT', p, JSON.stringify(cur));
      await reload();
    } catch (err) {
      setError(err);
    }
  });
  return (
    <>
      <button type="button" class="secondary" disabled={busy} onClick={() => submit()} aria-label={`${want === 'Running' ? 'Start' : 'Stop'} ${w.metadata.name}`}>
        {want === 'Running' ? 'Start' : 'Stop'}
      </button>
      <ErrorBox error={error} />
    </>
  );
}

// DeleteSpace asks for the name before it deletes the space and its files.
function DeleteSpace({ w, reload }) {
  const [confirm, setConfirm] = useState('');
  const [error, setError] = useState(null);
  const id = `delete-${w.metadata.namespace}-${w.metadata.name}`;
  const [submit, busy] = useSubmit(async () => {
    setError(null);
    try {
      await bearer('DELETE', path(w.metadata.namespace, w.metadata.name));
      await reload();
    } catch (err) {
      setError(err);
    }
  });
  return (
    <details class="inline-delete">
      <summary>Delete…</summary>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          if (confirm === w.metadata.name) submit();
        }}
      >
        <Field id={id} label={`Type ${w.metadata.name} to delete the space and its files`}>
          <input id={id} value={confirm} onInput={(e) => setConfirm(e.currentTarget.value)} autocomplete="off" />
        </Field>
        <button type="submit" class="danger" disabled={busy || confirm !== w.metadata.name}>
          Delete
        </button>
      </form>
      <ErrorBox error={error} />
    </details>
  );
}

export default function Spaces() {
  const { data, error, loading, reload } = usePoll(load, []);
  const columns = [
    { title: 'Namespace', render: (w) => w.metadata.namespace },
    { title: 'Name', render: (w) => <span title={w.spec.displayName}>{w.metadata.name}</span> },
    { title: 'Desired', render: (w) => w.spec.desiredStatus },
    {
      title: 'Phase',
      render: (w) => {
        const st = w.status || {};
        const bad = (st.conditions || []).find((c) => (c.type === 'Degraded' && c.status === 'True') || (c.type === 'Progressing' && c.reason === 'Unschedulable'));
        return (
          <>
            <Status value={st.phase || 'Pending'} />
            {bad && bad.message ? <small class="why"> {bad.message}</small> : null}
          </>
        );
      },
    },
    { title: 'GPU', render: (w) => gpuText(w.status || {}) },
    {
      title: 'Node',
      render: (w) =>
        w.status && w.status.node ? (
          <span>
            {w.status.node} <small>({w.status.instanceType})</small>
          </span>
        ) : (
          '—'
        ),
    },
    { title: 'Template', render: (w) => (w.spec.templateRef ? w.spec.templateRef.name : '—') },
    { title: 'Age', render: (w) => age(w.metadata.creationTimestamp) },
    {
      title: 'Actions',
      render: (w) => {
        const href = w.status && w.status.phase === 'Running' ? openHref(w) : null;
        return (
          <div class="row-actions">
            {href ? (
              <a href={href} target="_blank" rel="noopener" data-testid={'open-' + w.metadata.name}>
                Open
              </a>
            ) : null}
            <SetStatus w={w} reload={reload} />
            <DeleteSpace w={w} reload={reload} />
          </div>
        );
      },
    },
  ];
  return (
    <section>
      <h1>Spaces</h1>
      <div class="toolbar">
        <Link href="/apply">Create one from a manifest</Link>
        <span class="hint">Workspaces (Jupyter notebooks) in every namespace, on the clusters' nodes beside inference.</span>
      </div>
      <ErrorBox error={error} />
      {loading && !data ? (
        <p class="empty">Loading…</p>
      ) : (
        <Table columns={columns} rows={data} label="Spaces" testid="spaces" empty="No spaces yet. Apply a Workspace manifest to create one." />
      )}
    </section>
  );
}
