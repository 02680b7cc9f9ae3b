// One endpoint: DescribeEndpoint (status, failure, variants, pending
// deployment), its configuration (DescribeEndpointConfig), a history from
// the times the API gives, live charts, and the actions (weights and
// capacities, delete).
import { useMemo } from 'preact/hooks';
import { sagemaker } from '../api.js';
import { ErrorBox, Status, Table, fmtDate, toDate, usePoll } from '../components.jsx';
import { Link } from '../router.jsx';
import EndpointCharts from './EndpointCharts.jsx';
import { DeleteEndpoint, UpdateForms } from './EndpointActions.jsx';
import './Endpoints.css';

// planName is the training plan an ARN names (…:training-plan/<name>), or
// null for another kind of reservation.
export function planName(arn) {
  const m = /:training-plan\/(.+)$/.exec(arn || '');
  return m ? m[1] : null;
}

function PlanRef({ arn }) {
  if (!arn) return '—';
  const plan = planName(arn);
  return plan ? (
    <Link href={'/plans/' + encodeURIComponent(plan)} title={arn} data-testid="endpoint-plan-link">
      {plan}
    </Link>
  ) : (
    <code>{arn}</code>
  );
}

const num = (v) => (v == null ? '—' : String(v));

function variantStatus(v) {
  const s = (v.VariantStatus || [])[0];
  if (!s) return '—';
  return (
    <span>
      <Status value={s.Status} />
      {s.StatusMessage ? <span class="hint"> {s.StatusMessage}</span> : null}
      {s.StartTime ? <span class="hint"> since {fmtDate(s.StartTime)}</span> : null}
    </span>
  );
}

function reservation(v) {
  const r = v.CapacityReservationConfig;
  if (!r) return '—';
  return (
    <span>
      <PlanRef arn={r.MlReservationArn} />
      <span class="hint">
        {' '}
        {r.UsedByCurrentEndpoint} used here, {r.AvailableInstanceCount} of {r.TotalInstanceCount} available
      </span>
    </span>
  );
}

function serverless(c) {
  if (!c) return '—';
  return `${c.MemorySizeInMB ?? '?'} MB, max ${c.MaxConcurrency ?? '?'}` +
    (c.ProvisionedConcurrency != null ? `, provisioned ${c.ProvisionedConcurrency}` : '');
}

const variantColumns = (types) => [
  { title: 'Variant', render: (v) => <strong>{v.VariantName}</strong> },
  { title: 'Status', render: variantStatus },
  { title: 'Instance type', render: (v) => v.InstanceType || types[v.VariantName] || '—' },
  { title: 'Instances (current / desired)', render: (v) => `${num(v.CurrentInstanceCount)} / ${num(v.DesiredInstanceCount)}` },
  { title: 'Weight (current / desired)', render: (v) => `${num(v.CurrentWeight)} / ${num(v.DesiredWeight)}` },
  {
    title: 'Serverless',
    render: (v) =>
      v.CurrentServerlessConfig || v.DesiredServerlessConfig
        ? serverless(v.DesiredServerlessConfig || v.CurrentServerlessConfig)
        : '—',
  },
  { title: 'Training plan', render: reservation },
];

const configColumns = [
  { title: 'Variant', render: (v) => <strong>{v.VariantName}</strong> },
  { title: 'Model', render: (v) => v.ModelName || '—' },
  { title: 'Instance type', render: (v) => v.InstanceType || '—' },
  { title: 'Initial count', render: (v) => num(v.InitialInstanceCount) },
  { title: 'Initial weight', render: (v) => num(v.InitialVariantWeight) },
  { title: 'Serverless', render: (v) => serverless(v.ServerlessConfig) },
  {
    title: 'Capacity reservation',
    render: (v) => (v.CapacityReservationConfig ? <PlanRef arn={v.CapacityReservationConfig.MlReservationArn} /> : '—'),
  },
  { title: 'Routing', render: (v) => (v.RoutingConfig && v.RoutingConfig.RoutingStrategy) || '—' },
];

// deploymentKind names the policy of a DeploymentConfig.
function deploymentKind(dc) {
  if (!dc) return null;
  if (dc.RollingUpdatePolicy) return 'Rolling update';
  const bg = dc.BlueGreenUpdatePolicy;
  if (bg) {
    const t = bg.TrafficRoutingConfiguration && bg.TrafficRoutingConfiguration.Type;
    return 'Blue/green' + (t ? ` (${t.toLowerCase().replace('_', ' ')})` : '');
  }
  return 'Deployment configuration';
}

// history is what the API tells of the endpoint's past, newest first.
function history(ep) {
  const h = [];
  const add = (t, what) => {
    const d = toDate(t);
    if (d) h.push({ t: d.getTime(), when: t, what: what.replace(/\.\.$/, '.') });
  };
  add(ep.CreationTime, 'Created.');
  for (const v of ep.ProductionVariants || []) {
    const s = (v.VariantStatus || [])[0];
    if (s && s.StartTime) add(s.StartTime, `Variant ${v.VariantName}: ${s.Status}${s.StatusMessage ? ' — ' + s.StatusMessage : ''}.`);
  }
  const p = ep.PendingDeploymentSummary;
  if (p && p.StartTime) add(p.StartTime, `Deployment of configuration ${p.EndpointConfigName} started.`);
  add(
    ep.LastModifiedTime,
    `Last modified: ${ep.EndpointStatus}${ep.FailureReason ? ' — ' + ep.FailureReason : ''}.`,
  );
  h.sort((a, b) => b.t - a.t);
  return h;
}

async function load(name) {
  const ep = await sagemaker('DescribeEndpoint', { EndpointName: name });
  let config = null;
  let configError = null;
  if (ep.EndpointConfigName) {
    try {
      config = await sagemaker('DescribeEndpointConfig', { EndpointConfigName: ep.EndpointConfigName });
    } catch (e) {
      configError = e;
    }
  }
  return { ep, config, configError };
}

export default function EndpointDetail({ name }) {
  const { data, error, loading, reload } = usePoll(() => load(name), [name]);
  const ep = data && data.ep;
  const config = data && data.config;
  const types = useMemo(() => {
    const t = {};
    for (const v of (config && config.ProductionVariants) || []) t[v.VariantName] = v.InstanceType;
    return t;
  }, [config]);
  const variantNames = useMemo(() => ((ep && ep.ProductionVariants) || []).map((v) => v.VariantName), [ep]);
  const variantKey = variantNames.join('\u0000');
  const chartVariants = useMemo(() => variantNames, [variantKey]);
  return (
    <section class="endpoint">
      <p class="crumbs">
        <Link href="/endpoints">Endpoints</Link> /
      </p>
      <h1>{name}</h1>
      <ErrorBox error={error} />
      {loading && !data ? <p class="empty">Loading…</p> : null}
      {ep ? (
        <>
          <div class="card">
            <dl class="props">
              <dt>Status</dt>
              <dd data-testid="endpoint-status">
                <Status value={ep.EndpointStatus} />
              </dd>
              <dt>ARN</dt>
              <dd>
                <code class="wrap">{ep.EndpointArn}</code>
              </dd>
              <dt>Configuration</dt>
              <dd>{ep.EndpointConfigName || '—'}</dd>
              <dt>Created</dt>
              <dd>{fmtDate(ep.CreationTime)}</dd>
              <dt>Last modified</dt>
              <dd>{fmtDate(ep.LastModifiedTime)}</dd>
              {ep.AsyncInferenceConfig ? (
                <>
                  <dt>Async inference</dt>
                  <dd>
                    <code class="wrap">{(ep.AsyncInferenceConfig.OutputConfig || {}).S3OutputPath || 'configured'}</code>
                  </dd>
                </>
              ) : null}
            </dl>
            {ep.FailureReason ? (
              <p class="flag bad" role="alert" data-testid="endpoint-failure">
                <strong>Failure: </strong>
                {ep.FailureReason}
              </p>
            ) : null}
          </div>

          <h2>Production variants</h2>
          <Table columns={variantColumns(types)} rows={ep.ProductionVariants || []} label="Production variants" testid="endpoint-variants" empty="No variants." />

          {ep.PendingDeploymentSummary ? (
            <>
              <h2>Deployment in progress</h2>
              <p>
                To configuration <strong>{ep.PendingDeploymentSummary.EndpointConfigName}</strong>
                {ep.PendingDeploymentSummary.StartTime ? `, started ${fmtDate(ep.PendingDeploymentSummary.StartTime)}` : ''}.
              </p>
              <Table
                columns={variantColumns(types)}
                rows={ep.PendingDeploymentSummary.ProductionVariants || []}
                label="Pending variants"
                testid="endpoint-pending"
              />
            </>
          ) : null}

          {ep.LastDeploymentConfig ? (
            <>
              <h2>Last deployment configuration</h2>
              <details class="card">
                <summary>{deploymentKind(ep.LastDeploymentConfig)}</summary>
                <pre class="json">{JSON.stringify(ep.LastDeploymentConfig, null, 2)}</pre>
              </details>
            </>
          ) : null}

          <h2>Configuration {ep.EndpointConfigName ? <code>{ep.EndpointConfigName}</code> : null}</h2>
          <ErrorBox error={data.configError} />
          {config ? (
            <Table columns={configColumns} rows={config.ProductionVariants || []} label="Configured variants" testid="endpoint-config" />
          ) : null}

          <EndpointCharts name={name} variants={chartVariants} />

          <h2>History</h2>
          <p class="hint">From the times DescribeEndpoint reports (capstan keeps no event log for endpoints).</p>
          <ol class="endpoint-history" data-testid="endpoint-history">
            {history(ep).map((h) => (
              <li>
                <time datetime={toDate(h.when).toISOString()}>{fmtDate(h.when)}</time> {h.what}
              </li>
            ))}
          </ol>

          <h2>Update weights and capacities</h2>
          <p class="hint">
            UpdateEndpointWeightsAndCapacities: changes a deployed variant in place. Empty fields are left as they are.
          </p>
          <UpdateForms endpoint={name} variants={ep.ProductionVariants || []} onDone={reload} />

          <h2>Delete</h2>
          <DeleteEndpoint name={name} />
        </>
      ) : null}
    </section>
  );
}
