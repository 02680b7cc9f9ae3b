// Clusters: every HyperPod cluster (ListClusters), with what DescribeCluster
// adds: instance groups, nodes running of target, autoscaling.
import { sagemaker } from '../api.js';
import { ErrorBox, Status, Table, fmtDate, usePoll } from '../components.jsx';
import { Link } from '../router.jsx';
import { listAll } from './ClustersShared.jsx';
import './Clusters.css';

export function autoScalingText(a) {
  if (!a || !a.Mode || a.Mode === 'Disable') return 'Off';
  return [a.Mode === 'Enable' ? 'On' : a.Mode, a.AutoScalerType].filter(Boolean).join(' · ');
}

async function load() {
  const summaries = await listAll(
    (token) => sagemaker('ListClusters', { MaxResults: 100, ...(token ? { NextToken: token } : {}) }),
    'ClusterSummaries',
  );
  summaries.sort((a, b) => a.ClusterName.localeCompare(b.ClusterName));
  const details = await Promise.all(
    summaries.map((s) => sagemaker('DescribeCluster', { ClusterName: s.ClusterName }).catch(() => null)),
  );
  return summaries.map((s, i) => ({ ...s, key: s.ClusterArn, detail: details[i] }));
}

const columns = [
  {
    title: 'Name',
    render: (r) => <Link href={'/clusters/' + encodeURIComponent(r.ClusterName)}>{r.ClusterName}</Link>,
  },
  { title: 'Status', render: (r) => <Status value={r.ClusterStatus} /> },
  { title: 'Created', render: (r) => fmtDate(r.CreationTime) },
  { title: 'Instance groups', render: (r) => (r.detail ? (r.detail.InstanceGroups || []).length : '—') },
  {
    title: 'Nodes (current/target)',
    render: (r) => {
      if (!r.detail) return '—';
      const gs = r.detail.InstanceGroups || [];
      const cur = gs.reduce((n, g) => n + (g.CurrentCount || 0), 0);
      const tgt = gs.reduce((n, g) => n + (g.TargetCount || 0), 0);
      return `${cur}/${tgt}`;
    },
  },
  { title: 'Autoscaling', render: (r) => (r.detail ? autoScalingText(r.detail.AutoScaling) : '—') },
];

export default function Clusters() {
  const { data, error, loading } = usePoll(load, []);
  return (
    <section>
      <h1>Clusters</h1>
      <p class="hint">
        HyperPod clusters: where manifests' replicas run. Create one here, or with the SageMaker cluster API (
        <code>aws sagemaker create-cluster</code>, <code>update-cluster</code>).
      </p>
      <p>
        <Link href="/clusters/new" class="button" data-testid="new-cluster">
          Create cluster
        </Link>
      </p>
      <ErrorBox error={error} />
      {loading && !data ? (
        <p class="empty">Loading…</p>
      ) : (
        <Table columns={columns} rows={data} label="Clusters" testid="clusters" empty="No clusters." />
      )}
    </section>
  );
}
