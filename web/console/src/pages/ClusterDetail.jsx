// One cluster: DescribeCluster (status, orchestrator, autoscaling, node
// recovery, instance groups with their MIG layout), its nodes from
// ListClusterNodes joined with capstan's node API (GPUs and MIG slices
// allocated, capacity type, price).
import { useState } from 'preact/hooks';
import { NODES, bearer, sagemaker } from '../api.js';
import { ErrorBox, Status, Table, fmtDate, fmtMoney, useSubmit, usePoll } from '../components.jsx';
import { Link } from '../router.jsx';
import { autoScalingText } from './Clusters.jsx';
import { age, listAll } from './ClustersShared.jsx';
import './Clusters.css';

const MIG_LABEL = 'nvidia.com/mig.config';

function groupCapacity(g) {
  if (g.TrainingPlanArn) return 'reserved';
  if (g.CapacityRequirements && g.CapacityRequirements.Spot) return 'spot';
  return 'on-demand';
}

function migLayout(g) {
  const k = g.KubernetesConfig || {};
  const cur = (k.CurrentLabels || {})[MIG_LABEL];
  const want = (k.DesiredLabels || {})[MIG_LABEL];
  // DescribeCluster gives a group's layout as its desired label.
  return want || cur || '—';
}

// migSlices counts a node's slices per profile: held and free.
function migSlices(slices) {
  const by = new Map();
  for (const s of slices || []) {
    const p = by.get(s.profile) || { used: 0, free: 0 };
    if (s.replicaID) p.used++;
    else p.free++;
    by.set(s.profile, p);
  }
  return [...by.entries()];
}

const groupColumns = [
  { title: 'Name', key: 'InstanceGroupName' },
  { title: 'Instance type', key: 'InstanceType' },
  {
    title: 'Nodes (current/target)',
    render: (g) => `${g.CurrentCount}/${g.TargetCount}` + (g.MinCount != null ? ` (min ${g.MinCount})` : ''),
  },
  { title: 'Status', render: (g) => <Status value={g.Status} /> },
  {
    title: 'Capacity',
    render: (g) =>
      g.TrainingPlanArn ? (
        <>
          reserved: <Link href={'/plans/' + encodeURIComponent(g.TrainingPlanArn.split('/').pop())}>{g.TrainingPlanArn.split('/').pop()}</Link>
          {g.TrainingPlanStatus ? <> ({g.TrainingPlanStatus})</> : null}
        </>
      ) : (
        groupCapacity(g)
      ),
  },
  { title: 'MIG layout', render: (g) => migLayout(g) },
];

const nodeColumns = [
  {
    title: 'Node',
    render: (n) => (
      <>
        <code class="clusters-nowrap">{n.InstanceId}</code>
        {n.view && n.view.cordoned ? <span class="status busy"> cordoned</span> : null}
      </>
    ),
  },
  { title: 'Group', key: 'InstanceGroupName' },
  { title: 'Instance type', key: 'InstanceType' },
  { title: 'Capacity type', render: (n) => <span class="clusters-nowrap">{n.view ? n.view.capacityType : '—'}</span> },
  {
    title: 'Status',
    render: (n) => {
      const st = n.InstanceStatus || {};
      const msg = st.Message || (n.view && n.view.message);
      return (
        <>
          <Status value={st.Status} />
          {msg ? <div class="hint">{msg}</div> : null}
        </>
      );
    },
  },
  {
    title: 'GPUs (allocated/total)',
    render: (n) => (n.view ? `${n.view.allocated.gpus}/${n.view.capacity.gpus}` : '—'),
  },
  {
    title: 'MIG slices',
    render: (n) => {
      if (!n.view || !n.view.slices || n.view.slices.length === 0) return n.view && n.view.migLayout ? n.view.migLayout : '—';
      return (
        <ul class="clusters-mig">
          {migSlices(n.view.slices).map(([profile, c]) => (
            <li>
              <code>{profile}</code>: {c.used} used, {c.free} free
            </li>
          ))}
        </ul>
      );
    },
  },
  { title: 'Price', render: (n) => (n.view ? fmtMoney(n.view.pricePerHour) + '/h' : '—') },
  { title: 'Age', render: (n) => <span class="clusters-nowrap">{age(n.LaunchTime)}</span> },
  {
    title: 'Replicas',
    render: (n) => (n.view && n.view.replicas && n.view.replicas.length ? n.view.replicas.join(', ') : '—'),
  },
];

// AddonRow turns one add-on on or off through capstan's add-ons API; tiered
// storage takes the share of node memory to turn on with.
function AddonRow({ cluster, addon, reload }) {
  const [percent, setPercent] = useState(String(addon.instanceMemoryAllocationPercentage || 20));
  const [error, setError] = useState(null);
  const tiered = addon.name === 'tiered-storage';
  const [toggle, busy] = useSubmit(async () => {
    setError(null);
    const body = { enabled: !addon.enabled };
    if (tiered && !addon.enabled) body.instanceMemoryAllocationPercentage = percent.trim() === '' ? undefined : Number(percent);
    try {
      await bearer('PUT', `${NODES}/clusters/${encodeURIComponent(cluster)}/addons/${addon.name}`, JSON.stringify(body));
      await reload();
    } catch (err) {
      setError(err);
    }
  });
  const pid = `addon-${addon.name}-percent`;
  return (
    <tr data-testid={'addon-' + addon.name} data-enabled={addon.enabled}>
      <th scope="row">{addon.displayName}</th>
      <td>
        <Status value={addon.enabled ? 'Enabled' : 'Disabled'} />
        {tiered && addon.enabled ? ` · ${addon.instanceMemoryAllocationPercentage}% of node memory` : null}
      </td>
      <td>{addon.description}</td>
      <td>
        <div class="addon-actions">
          {tiered && !addon.enabled ? (
            <label>
              % of memory{' '}
              <input id={pid} type="number" min="1" max="100" value={percent} onInput={(e) => setPercent(e.currentTarget.value)} aria-invalid={!!error} />
            </label>
          ) : null}
          <button type="button" class={addon.enabled ? 'secondary' : ''} disabled={busy} onClick={toggle} data-testid={'toggle-' + addon.name}>
            {addon.enabled ? 'Turn off' : 'Turn on'}
          </button>
        </div>
        {error ? (
          <span class="field-error" role="alert" data-testid={'error-addon-' + addon.name}>
            {error.code}: {error.message}
          </span>
        ) : null}
      </td>
    </tr>
  );
}

function Addons({ cluster }) {
  const { data, error, reload } = usePoll(() => bearer('GET', `${NODES}/clusters/${encodeURIComponent(cluster)}/addons`), [cluster]);
  return (
    <>
      <h2>Add-ons</h2>
      <ErrorBox error={error} />
      {data ? (
        <div class="table-wrap">
          <table data-testid="addons" aria-label="Add-ons">
            <thead>
              <tr>
                <th scope="col">Add-on</th>
                <th scope="col">Status</th>
                <th scope="col">What it does</th>
                <th scope="col">Change</th>
              </tr>
            </thead>
            <tbody>
              {(data.items || []).map((a) => (
                <AddonRow key={a.name} cluster={cluster} addon={a} reload={reload} />
              ))}
            </tbody>
          </table>
        </div>
      ) : null}
    </>
  );
}

export default function ClusterDetail({ name }) {
  const { data, error, loading } = usePoll(async () => {
    const [cluster, nodes, views] = await Promise.all([
      sagemaker('DescribeCluster', { ClusterName: name }),
      listAll(
        (token) => sagemaker('ListClusterNodes', { ClusterName: name, MaxResults: 100, ...(token ? { NextToken: token } : {}) }),
        'ClusterNodeSummaries',
      ),
      bearer('GET', `${NODES}/nodes?cluster=${encodeURIComponent(name)}`).then(
        (r) => ({ items: r.items || [] }),
        (e) => ({ items: [], error: e }),
      ),
    ]);
    const byID = new Map(views.items.map((v) => [v.id, v]));
    const rows = nodes
      .map((n) => ({ ...n, key: n.InstanceId, view: byID.get(n.InstanceId) }))
      .sort((a, b) => a.InstanceGroupName.localeCompare(b.InstanceGroupName) || a.InstanceId.localeCompare(b.InstanceId));
    return { cluster, rows, nodeError: views.error };
  }, [name]);

  const c = data && data.cluster;
  return (
    <section>
      <p>
        <Link href="/clusters">← Clusters</Link>
      </p>
      <h1>{name}</h1>
      <ErrorBox error={error} />
      {loading && !data ? <p class="empty">Loading…</p> : null}
      {c ? (
        <>
          {c.FailureMessage ? <p class="flag bad">{c.FailureMessage}</p> : null}
          <div class="card">
            <dl class="props clusters-props" data-testid="cluster-props">
              <dt>Status</dt>
              <dd data-testid="cluster-status">
                <Status value={c.ClusterStatus} />
              </dd>
              <dt>ARN</dt>
              <dd>
                <code>{c.ClusterArn}</code>
              </dd>
              <dt>Created</dt>
              <dd>{fmtDate(c.CreationTime)}</dd>
              <dt>Orchestrator</dt>
              <dd>{c.Orchestrator && c.Orchestrator.Eks ? <>EKS <code>{c.Orchestrator.Eks.ClusterArn}</code></> : '—'}</dd>
              <dt>Autoscaling</dt>
              <dd>
                {autoScalingText(c.AutoScaling)}
                {c.AutoScaling && c.AutoScaling.Status ? <> (<Status value={c.AutoScaling.Status} />)</> : null}
              </dd>
              <dt>Node recovery</dt>
              <dd>{c.NodeRecovery || '—'}</dd>
              {c.ClusterRole ? (
                <>
                  <dt>Cluster role</dt>
                  <dd>
                    <code>{c.ClusterRole}</code>
                  </dd>
                </>
              ) : null}
            </dl>
          </div>
          <Addons cluster={c.ClusterName || name} />
          <h2>Instance groups</h2>
          <Table
            columns={groupColumns}
            rows={(c.InstanceGroups || []).map((g) => ({ ...g, key: g.InstanceGroupName }))}
            label="Instance groups"
            testid="instance-groups"
            empty="No instance groups."
          />
          <h2>Nodes</h2>
          {data.nodeError ? (
            <p class="flag warn">
              GPU allocation unavailable from the node API: {data.nodeError.code}: {data.nodeError.message}
            </p>
          ) : null}
          <Table columns={nodeColumns} rows={data.rows} label="Nodes" testid="nodes" empty="No nodes." />
        </>
      ) : null}
    </section>
  );
}
