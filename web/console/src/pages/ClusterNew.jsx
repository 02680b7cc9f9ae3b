// Creating a HyperPod cluster, as the SageMaker console's "Create HyperPod
// cluster" does: quick setup (a name; sensible groups, Karpenter and
// observability on) or custom setup (every instance group field, node
// recovery, roles, the add-ons), then a review of what will be created —
// groups, node counts, prices, add-ons — before CreateCluster. Observability
// off is one PUT to capstan's add-ons API after the create. Errors are
// shown next to the field the server names.
import { useEffect, useLayoutEffect, useRef, useState } from 'preact/hooks';
import { NODES, bearer, getConfig, sagemaker } from '../api.js';
import { ErrorBox, Field, Table, fmtMoney, useSubmit } from '../components.jsx';
import { Link, navigate } from '../router.jsx';
import { listAll } from './ClustersShared.jsx';
import './Clusters.css';

const MIG_LABEL = 'nvidia.com/mig.config';

// The quick setup's groups: GPU nodes the node autoscaler launches when
// deployments need them (a node no replica uses would be consolidated
// away at once, so the group starts at 0).
const QUICK_GROUPS = [{ name: 'gpu', type: 'ml.g5.8xlarge', count: '0', capacity: 'on-demand', mig: '' }];

function roles() {
  const acct = getConfig().accountId || '000000000000';
  return {
    execution: `arn:aws:iam::${acct}:role/capstan-hyperpod-execution`,
    cluster: `arn:aws:iam::${acct}:role/capstan-hyperpod-cluster`,
  };
}

function initialForm() {
  const r = roles();
  return {
    name: '',
    recovery: 'Automatic',
    executionRole: r.execution,
    clusterRole: r.cluster,
    groups: QUICK_GROUPS.map((g) => ({ ...g })),
    karpenter: true,
    observability: true,
    tiered: false,
    tieredPercent: '20',
  };
}

// createBody is CreateCluster's input for the form. Numbers that do not
// parse are sent as they are, for the server to name.
export function createBody(f) {
  const cfg = getConfig();
  const body = {
    ClusterName: f.name,
    NodeRecovery: f.recovery,
    Orchestrator: { Eks: { ClusterArn: `arn:aws:eks:${cfg.region}:${cfg.accountId || '000000000000'}:cluster/${f.name}` } },
    InstanceGroups: f.groups.map((g) => {
      const count = g.count.trim() === '' ? NaN : Number(g.count);
      const out = {
        InstanceGroupName: g.name,
        InstanceType: g.type,
        InstanceCount: Number.isNaN(count) ? g.count : count,
        ExecutionRole: f.executionRole,
        LifeCycleConfig: { SourceS3Uri: 's3://capstan-lifecycle/', OnCreate: 'on_create.sh' },
      };
      if (g.capacity === 'spot') out.CapacityRequirements = { Spot: {} };
      else if (g.capacity.startsWith('arn:')) out.TrainingPlanArn = g.capacity;
      if (g.mig) out.KubernetesConfig = { Labels: { [MIG_LABEL]: g.mig } };
      return out;
    }),
  };
  if (f.karpenter) {
    body.AutoScaling = { Mode: 'Enable', AutoScalerType: 'Karpenter' };
    body.ClusterRole = f.clusterRole;
  }
  if (f.tiered) {
    const pct = Number(f.tieredPercent);
    body.TieredStorageConfig = { Mode: 'Enable', InstanceMemoryAllocationPercentage: Number.isNaN(pct) ? f.tieredPercent : pct };
  }
  return body;
}

// Members of an instance group as the two error shapes name them
// (instanceGroups.N.member.instanceCount; InstanceGroups[i].InstanceCount)
// to the form's fields.
const GROUP_MEMBERS = {
  instancegroupname: 'name',
  instancetype: 'type',
  instancecount: 'count',
  mincount: 'count',
  trainingplanarn: 'capacity',
  capacityrequirements: 'capacity',
  kubernetesconfig: 'mig',
};

// wizardErrors splits the server's error into the fields it names (keys:
// name, recovery, executionRole, clusterRole, tieredPercent, g<i>.<field>)
// and what names none (top).
export function wizardErrors(err, groups) {
  const msg = err.message || '';
  const code = err.code ? err.code + ': ' : '';
  const m = msg.match(/^\d+ validation errors? detected: (.*)$/s);
  const parts = m ? m[1].split(/; (?=Value )/) : [msg];
  const out = {};
  const add = (k, text) => (out[k] = out[k] ? out[k] + ' ' + text : text);
  for (const part of parts) {
    const text = code + (m ? part : msg);
    const at = (/ at '([^']+)'/.exec(part) || [])[1] || '';
    let key = 'top';
    let g;
    if ((g = /^instanceGroups\.(\d+)\.member\.(\w+)/i.exec(at))) key = `g${Number(g[1]) - 1}.${GROUP_MEMBERS[g[2].toLowerCase()] || 'name'}`;
    else if ((g = /^InstanceGroups\[(\d+)\]\.(\w+)/.exec(at))) key = `g${g[1]}.${GROUP_MEMBERS[g[2].toLowerCase()] || 'name'}`;
    else if (/^instanceGroups$/i.test(at)) key = 'g0.name';
    else if (/^clusterName$/i.test(at)) key = 'name';
    else if (/^nodeRecovery$/i.test(at)) key = 'recovery';
    else if (/^clusterRole$/i.test(at)) key = 'clusterRole';
    else if (/tieredStorageConfig/i.test(at)) key = 'tieredPercent';
    else if (/executionRole/i.test(at)) key = 'executionRole';
    else if ((g = /instance group (\S+) would hold/.exec(msg))) {
      const i = groups.findIndex((x) => x.name === g[1]);
      if (i >= 0) key = `g${i}.count`;
    } else if (/already exists|ResourceInUse/i.test(code + msg)) key = 'name';
    add(key, text);
  }
  return out;
}

function price(types, name) {
  const t = types.find((x) => x.name === name);
  return t ? t.pricePerHour : null;
}

function typeLabel(t) {
  if (!t.gpuCount) return `${t.name} (CPU)`;
  return `${t.name} (${t.gpuCount}× ${t.gpu.toUpperCase()})`;
}

// Review is what will be created, with prices, before CreateCluster.
function Review({ form, types, plans }) {
  const rows = form.groups.map((g, i) => {
    const count = Number(g.count) || 0;
    const p = price(types, g.type);
    const reserved = g.capacity.startsWith('arn:');
    const plan = reserved ? plans.find((x) => x.TrainingPlanArn === g.capacity) : null;
    return {
      key: String(i),
      name: g.name,
      type: g.type,
      count,
      capacity: reserved ? `training plan ${plan ? plan.TrainingPlanName : g.capacity}` : g.capacity,
      mig: g.mig || 'whole GPUs',
      each: reserved ? null : p,
      hourly: reserved || p == null ? 0 : p * count,
    };
  });
  const total = rows.reduce((n, r) => n + r.hourly, 0);
  const columns = [
    { title: 'Group', key: 'name' },
    { title: 'Instance type', key: 'type' },
    { title: 'Nodes', key: 'count' },
    { title: 'Capacity', key: 'capacity' },
    { title: 'MIG layout', key: 'mig' },
    { title: 'Price per node', render: (r) => (r.each == null ? 'prepaid (plan)' : fmtMoney(r.each) + '/h') },
    { title: 'Group per hour', render: (r) => fmtMoney(r.hourly) + '/h' },
  ];
  const on = (b) => (b ? 'On' : 'Off');
  return (
    <>
      <Table columns={columns} rows={rows} label="Instance groups to create" testid="review-groups" />
      <p data-testid="review-total">
        <strong>{fmtMoney(total)}/h</strong> for the nodes at start, on-demand prices (spot nodes are billed at the spot price;
        a training plan's nodes are prepaid).
      </p>
      <dl class="props" data-testid="review-addons">
        <dt>Node autoscaler (Karpenter)</dt>
        <dd>{on(form.karpenter)}{form.karpenter ? <> · role <code>{form.clusterRole}</code></> : null}</dd>
        <dt>Observability</dt>
        <dd>{on(form.observability)}</dd>
        <dt>Tiered storage</dt>
        <dd>{form.tiered ? `On · ${form.tieredPercent}% of each node's memory` : 'Off'}</dd>
        <dt>Node recovery</dt>
        <dd>{form.recovery}</dd>
        <dt>Execution role</dt>
        <dd>
          <code>{form.executionRole}</code>
        </dd>
      </dl>
    </>
  );
}

function GroupFields({ g, i, types, plans, errors, update, remove }) {
  const id = (f) => `cw-g${i}-${f}`;
  const err = (f) => errors[`g${i}.${f}`];
  const t = types.find((x) => x.name === g.type);
  // Plans for clusters, of this instance type, not over.
  const planChoices = plans.filter(
    (p) =>
      (p.TargetResources || []).includes('hyperpod-cluster') &&
      ['Pending', 'Scheduled', 'Active'].includes(p.Status) &&
      (p.ReservedCapacitySummaries || []).some((r) => r.InstanceType === g.type),
  );
  return (
    <fieldset class="card cw-group" data-testid={'group-' + i}>
      <legend>Instance group {i + 1}</legend>
      <div class="form-grid">
        <Field id={id('name')} label="Group name" error={err('name')}>
          <input id={id('name')} value={g.name} onInput={update('name')} aria-invalid={!!err('name')} autocomplete="off" />
        </Field>
        <Field id={id('type')} label="Instance type" error={err('type')}>
          <select id={id('type')} value={g.type} onChange={update('type')} aria-invalid={!!err('type')}>
            {types.map((x) => (
              <option value={x.name}>{typeLabel(x)}</option>
            ))}
          </select>
        </Field>
        <Field id={id('count')} label="Instance count" error={err('count')} hint="Nodes at start, 0 to 2500.">
          <input
            id={id('count')}
            type="number"
            inputMode="numeric"
            min="0"
            value={g.count}
            onInput={update('count')}
            aria-invalid={!!err('count')}
            aria-describedby={id('count') + '-hint'}
          />
        </Field>
        <Field id={id('capacity')} label="Capacity" error={err('capacity')}>
          <select id={id('capacity')} value={g.capacity} onChange={update('capacity')} aria-invalid={!!err('capacity')}>
            <option value="on-demand">On-demand</option>
            <option value="spot">Spot</option>
            {planChoices.map((p) => (
              <option value={p.TrainingPlanArn}>Training plan {p.TrainingPlanName}</option>
            ))}
          </select>
        </Field>
        <Field id={id('mig')} label="MIG layout" error={err('mig')} hint={`The ${MIG_LABEL} label of the group's nodes.`}>
          <select id={id('mig')} value={g.mig} onChange={update('mig')} aria-invalid={!!err('mig')} aria-describedby={id('mig') + '-hint'}>
            <option value="">Whole GPUs</option>
            {((t && t.migLayouts) || []).map((l) => (
              <option value={l}>{l}</option>
            ))}
          </select>
        </Field>
      </div>
      {remove ? (
        <button type="button" class="secondary" onClick={remove} data-testid={'remove-group-' + i}>
          Remove group
        </button>
      ) : null}
    </fieldset>
  );
}

export default function ClusterNew() {
  const [mode, setMode] = useState('quick');
  const [form, setForm] = useState(initialForm);
  const [step, setStep] = useState('setup'); // setup | review
  const [errors, setErrors] = useState({});
  const [catalog, setCatalog] = useState({ types: [], plans: [], error: null });
  const reviewHeading = useRef(null);

  useEffect(() => {
    Promise.all([
      bearer('GET', `${NODES}/instancetypes`),
      listAll((token) => sagemaker('ListTrainingPlans', { MaxResults: 100, ...(token ? { NextToken: token } : {}) }), 'TrainingPlanSummaries').catch(() => []),
    ]).then(
      ([types, plans]) => setCatalog({ types: types.items || [], plans, error: null }),
      (error) => setCatalog({ types: [], plans: [], error }),
    );
  }, []);
  useLayoutEffect(() => {
    if (step === 'review' && reviewHeading.current) reviewHeading.current.focus();
  }, [step]);

  const set = (k) => (e) => setForm({ ...form, [k]: e.currentTarget.type === 'checkbox' ? e.currentTarget.checked : e.currentTarget.value });
  const updateGroup = (i) => (k) => (e) => {
    const groups = form.groups.map((g, j) => (j === i ? { ...g, [k]: e.currentTarget.value, ...(k === 'type' ? { mig: '', capacity: g.capacity.startsWith('arn:') ? 'on-demand' : g.capacity } : {}) } : g));
    setForm({ ...form, groups });
  };
  const chooseMode = (m) => {
    setMode(m);
    setErrors({});
    if (m === 'quick') setForm({ ...initialForm(), name: form.name });
  };

  const [create, creating] = useSubmit(async () => {
    setErrors({});
    try {
      await sagemaker('CreateCluster', createBody(form));
    } catch (err) {
      setErrors(wizardErrors(err, form.groups));
      setStep('setup');
      return;
    }
    if (!form.observability) {
      try {
        await bearer('PUT', `${NODES}/clusters/${encodeURIComponent(form.name)}/addons/observability`, JSON.stringify({ enabled: false }));
      } catch (err) {
        // The cluster exists: say what did not take, on its page.
        setErrors({ top: `The cluster was created, but observability is still on: ${err.code}: ${err.message}` });
        return;
      }
    }
    navigate('/clusters/' + encodeURIComponent(form.name));
  });

  const topError = errors.top ? { message: errors.top } : catalog.error;
  const custom = mode === 'custom';
  return (
    <section class="cluster-new">
      <p>
        <Link href="/clusters">← Clusters</Link>
      </p>
      <h1>Create HyperPod cluster</h1>
      <p class="hint">
        The cluster is created with the SageMaker API's <code>CreateCluster</code>, as <code>aws sagemaker create-cluster</code>{' '}
        would; its add-ons can be turned on and off later on its page.
      </p>
      <ErrorBox error={topError} />
      {step === 'setup' ? (
        <form
          onSubmit={(e) => {
            e.preventDefault();
            setStep('review');
          }}
          noValidate
          aria-labelledby="cw-setup-h"
        >
          <h2 id="cw-setup-h">1. Set up</h2>
          <div class="cw-modes" role="radiogroup" aria-label="Setup">
            <label>
              <input type="radio" name="cw-mode" value="quick" checked={!custom} onChange={() => chooseMode('quick')} data-testid="mode-quick" />
              <strong>Quick setup</strong> — a name; ml.g5.8xlarge nodes on demand as deployments need them, Karpenter and
              observability on.
            </label>
            <label>
              <input type="radio" name="cw-mode" value="custom" checked={custom} onChange={() => chooseMode('custom')} data-testid="mode-custom" />
              <strong>Custom setup</strong> — every instance group field, node recovery, roles and add-ons.
            </label>
          </div>
          <div class="card">
            <Field id="cw-name" label="Cluster name" error={errors.name} hint="1 to 63 letters, digits and hyphens.">
              <input
                id="cw-name"
                value={form.name}
                onInput={set('name')}
                autocomplete="off"
                aria-invalid={!!errors.name}
                aria-describedby="cw-name-hint"
              />
            </Field>
          </div>
          {custom ? (
            <>
              {form.groups.map((g, i) => (
                <GroupFields
                  g={g}
                  i={i}
                  types={catalog.types}
                  plans={catalog.plans}
                  errors={errors}
                  update={updateGroup(i)}
                  remove={form.groups.length > 1 ? () => setForm({ ...form, groups: form.groups.filter((_, j) => j !== i) }) : null}
                />
              ))}
              <button
                type="button"
                class="secondary"
                data-testid="add-group"
                onClick={() =>
                  setForm({ ...form, groups: [...form.groups, { name: `group-${form.groups.length + 1}`, type: 'ml.g5.xlarge', count: '0', capacity: 'on-demand', mig: '' }] })
                }
              >
                Add instance group
              </button>
              <fieldset class="card">
                <legend>Cluster settings</legend>
                <div class="form-grid">
                  <Field id="cw-recovery" label="Node recovery" error={errors.recovery}>
                    <select id="cw-recovery" value={form.recovery} onChange={set('recovery')}>
                      <option value="Automatic">Automatic: replace a failed node</option>
                      <option value="None">None</option>
                    </select>
                  </Field>
                  <Field id="cw-execution-role" label="Execution role (every group)" error={errors.executionRole}>
                    <input id="cw-execution-role" value={form.executionRole} onInput={set('executionRole')} aria-invalid={!!errors.executionRole} />
                  </Field>
                </div>
              </fieldset>
              <fieldset class="card" data-testid="addons">
                <legend>Add-ons</legend>
                <label class="cw-check">
                  <input type="checkbox" checked={form.karpenter} onChange={set('karpenter')} data-testid="addon-karpenter" /> Node autoscaler
                  (Karpenter): launches nodes for waiting replicas, consolidates idle ones
                </label>
                {form.karpenter ? (
                  <Field id="cw-cluster-role" label="Cluster role (the autoscaler's)" error={errors.clusterRole}>
                    <input id="cw-cluster-role" value={form.clusterRole} onInput={set('clusterRole')} aria-invalid={!!errors.clusterRole} />
                  </Field>
                ) : null}
                <label class="cw-check">
                  <input type="checkbox" checked={form.observability} onChange={set('observability')} data-testid="addon-observability" />{' '}
                  Observability: capstan's metric store keeps the cluster's series (the Cluster dashboard)
                </label>
                <label class="cw-check">
                  <input type="checkbox" checked={form.tiered} onChange={set('tiered')} data-testid="addon-tiered-storage" /> Tiered storage: a
                  managed KV cache store on every node
                </label>
                {form.tiered ? (
                  <Field id="cw-tiered-percent" label="Share of each node's memory (%)" error={errors.tieredPercent} hint="1 to 100.">
                    <input
                      id="cw-tiered-percent"
                      type="number"
                      min="1"
                      max="100"
                      value={form.tieredPercent}
                      onInput={set('tieredPercent')}
                      aria-invalid={!!errors.tieredPercent}
                      aria-describedby="cw-tiered-percent-hint"
                    />
                  </Field>
                ) : null}
              </fieldset>
            </>
          ) : (
            <p class="hint" data-testid="quick-defaults">
              Quick setup creates instance group <code>gpu</code> of ml.g5.8xlarge at 0 nodes: the node autoscaler (Karpenter)
              launches nodes on demand when a deployment's replicas need them, and consolidates idle ones. Observability on,
              tiered storage off, node recovery Automatic. Choose Custom setup to change any of it.
              {errors['g0.count'] || errors['g0.type'] || errors['g0.name'] ? (
                <span class="field-error" role="alert">
                  {' '}
                  {errors['g0.count'] || errors['g0.type'] || errors['g0.name']}
                </span>
              ) : null}
            </p>
          )}
          <button type="submit" data-testid="to-review">
            Next: review
          </button>
        </form>
      ) : (
        <form
          class="card"
          onSubmit={(e) => {
            e.preventDefault();
            create();
          }}
          noValidate
          aria-labelledby="cw-review-h"
          data-testid="review"
        >
          <h2 id="cw-review-h" tabIndex={-1} ref={reviewHeading}>
            2. Review and create <code>{form.name || '(no name)'}</code>
          </h2>
          <Review form={form} types={catalog.types} plans={catalog.plans} />
          <div class="toolbar">
            <button type="submit" disabled={creating} data-testid="create-cluster">
              {creating ? 'Creating…' : 'Create cluster'}
            </button>
            <button type="button" class="secondary" onClick={() => setStep('setup')} data-testid="back-to-setup">
              Back
            </button>
          </div>
        </form>
      )}
    </section>
  );
}
