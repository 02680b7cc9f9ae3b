// Deployments: every InferenceEndpointConfig and JumpStartModel in every
// namespace, as `capstan get iec,jsm -A` lists them.
import { MANIFESTS, bearer } from '../api.js';
import { ErrorBox, Status, Table, usePoll } from '../components.jsx';
import { Link } from '../router.jsx';
import { KINDS, age, deploymentHref, endpointName, replicasText, shortKind } from './ClustersShared.jsx';
import './Clusters.css';

async function load() {
  const lists = await Promise.all(Object.values(KINDS).map((k) => bearer('GET', `${MANIFESTS}/${k.plural}`)));
  const rows = lists
    .flatMap((l) => l.items || [])
    .map((o) => ({ ...o, key: `${o.kind}/${o.metadata.namespace}/${o.metadata.name}` }));
  rows.sort(
    (a, b) =>
      a.metadata.namespace.localeCompare(b.metadata.namespace) ||
      a.metadata.name.localeCompare(b.metadata.name) ||
      a.kind.localeCompare(b.kind),
  );
  return rows;
}

const columns = [
  {
    title: 'Kind',
    render: (o) => <abbr title={o.kind}>{(KINDS[shortKind(o.kind)] || {}).short || o.kind}</abbr>,
  },
  { title: 'Namespace', render: (o) => o.metadata.namespace },
  {
    title: 'Name',
    render: (o) => <Link href={deploymentHref(o.kind, o.metadata.namespace, o.metadata.name)}>{o.metadata.name}</Link>,
  },
  { title: 'State', render: (o) => <Status value={(o.status && o.status.state) || 'Pending'} /> },
  { title: 'Replicas (ready/desired)', render: (o) => replicasText(o) },
  {
    title: 'Endpoint',
    render: (o) => {
      const ep = endpointName(o);
      return ep ? <Link href={'/endpoints/' + encodeURIComponent(ep)}>{ep}</Link> : '—';
    },
  },
  { title: 'Age', render: (o) => age(o.metadata.creationTimestamp) },
];

export default function Deployments() {
  const { data, error, loading } = usePoll(load, []);
  return (
    <section>
      <h1>Deployments</h1>
      <div class="toolbar">
        <Link href="/apply">Apply a manifest</Link>
        <span class="hint">InferenceEndpointConfig (IEC) and JumpStartModel (JSM) objects in every namespace.</span>
      </div>
      <ErrorBox error={error} />
      {loading && !data ? (
        <p class="empty">Loading…</p>
      ) : (
        <Table
          columns={columns}
          rows={data}
          label="Deployments"
          testid="deployments"
          empty="No deployments yet. Apply a manifest to create one."
        />
      )}
    </section>
  );
}
