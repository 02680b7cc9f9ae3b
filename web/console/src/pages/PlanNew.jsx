// Buying a training plan, as the SageMaker console does it: search
// offerings (SearchTrainingPlanOfferings), select one, review it, name the
// plan and buy it (CreateTrainingPlan), then go to the plan's page.
import { useLayoutEffect, useRef, useState } from 'preact/hooks';
import { sagemaker, serverNow } from '../api.js';
import { ErrorBox, Field, Table, fmtDate, fmtDuration, fmtMoney, useSubmit } from '../components.jsx';
import { Link, navigate } from '../router.jsx';
import {
  DAY_MS,
  PLAN_INSTANCE_TYPES,
  PLAN_TARGETS,
  fieldErrors,
  fromInputValue,
  toInputValue,
} from './PlansShared.js';
import './Plans.css';

const OFFERING_TTL_MS = 30 * 60 * 1000;

// Field keys (as fieldErrors names them) to the inputs' ids.
const IDS = {
  type: 'plan-type',
  count: 'plan-count',
  start: 'plan-start',
  end: 'plan-end',
  duration: 'plan-duration',
  target: 'plan-target',
  name: 'plan-name',
};

function initialForm() {
  // Start on the next whole minute of the server's clock.
  const start = new Date(Math.ceil(serverNow().getTime() / 60000) * 60000);
  return {
    type: 'ml.p5.48xlarge',
    count: '1',
    start: toInputValue(start),
    end: toInputValue(new Date(start.getTime() + 30 * DAY_MS)),
    duration: '168',
    target: 'endpoint',
  };
}

// searchBody turns the form into SearchTrainingPlanOfferings' input. What
// does not parse is left out, for the server to say what is missing.
function searchBody(f) {
  const body = { InstanceType: f.type, TargetResources: [f.target] };
  const count = f.count.trim() === '' ? NaN : Number(f.count);
  if (!Number.isNaN(count)) body.InstanceCount = count;
  const hours = f.duration.trim() === '' ? NaN : Number(f.duration);
  if (!Number.isNaN(hours)) body.DurationHours = hours;
  const start = fromInputValue(f.start);
  const end = fromInputValue(f.end);
  if (start) body.StartTimeAfter = start.getTime() / 1000;
  if (end) body.EndTimeBefore = end.getTime() / 1000;
  return body;
}

function zones(o) {
  return (o.ReservedCapacityOfferings || []).map((r) => `${r.InstanceCount} in ${r.AvailabilityZone}`).join(', ');
}

function span(o) {
  const r = (o.ReservedCapacityOfferings || [])[0] || {};
  return { start: r.StartTime, end: r.EndTime, type: r.InstanceType };
}

function count(o) {
  return (o.ReservedCapacityOfferings || []).reduce((n, r) => n + r.InstanceCount, 0);
}

export default function PlanNew() {
  const [form, setForm] = useState(initialForm);
  const [errors, setErrors] = useState({});
  const [topError, setTopError] = useState(null);
  const [result, setResult] = useState(null); // {offerings, searchedAt, body}
  const [selected, setSelected] = useState(null);
  const [name, setName] = useState('');
  const offersHeading = useRef(null);
  const reviewHeading = useRef(null);

  const set = (k) => (e) => setForm({ ...form, [k]: e.currentTarget.value });

  // The forms' submit events are always prevented (a second click while a
  // call is in flight must not fall through to a native form submission).
  const [search, searching] = useSubmit(async () => {
    setErrors({});
    setTopError(null);
    setSelected(null);
    const body = searchBody(form);
    try {
      const out = await sagemaker('SearchTrainingPlanOfferings', body);
      setResult({ offerings: out.TrainingPlanOfferings || [], searchedAt: serverNow(), body });
    } catch (err) {
      setResult(null);
      showError(err);
    }
  });

  function showError(err) {
    const byField = fieldErrors(err, { 'already exists': 'name' });
    const fields = {};
    let top = null;
    for (const [k, text] of Object.entries(byField)) {
      if (IDS[k]) fields[k] = text;
      else top = err;
    }
    setErrors(fields);
    setTopError(top);
  }

  const [buy, buying] = useSubmit(async () => {
    setErrors({});
    setTopError(null);
    try {
      await sagemaker('CreateTrainingPlan', {
        TrainingPlanName: name,
        TrainingPlanOfferingId: selected.TrainingPlanOfferingId,
      });
      navigate('/plans/' + encodeURIComponent(name));
    } catch (err) {
      showError(err);
    }
  });

  // Move focus to the step just shown (for keyboard and screen-reader
  // users), unless the user is already typing somewhere.
  const typing = () => {
    const a = document.activeElement;
    return a && (a.tagName === 'INPUT' || a.tagName === 'SELECT' || a.tagName === 'TEXTAREA');
  };
  useLayoutEffect(() => {
    if (result && offersHeading.current && !typing()) offersHeading.current.focus();
  }, [result]);
  useLayoutEffect(() => {
    if (selected && reviewHeading.current && !typing()) reviewHeading.current.focus();
  }, [selected && selected.TrainingPlanOfferingId]);

  const now = serverNow();
  const start = fromInputValue(form.start);
  const startHint =
    start && start.getTime() < now.getTime() - 60000
      ? `This is in the past: offerings start no earlier than the server's time (${fmtDate(now)}).`
      : 'UTC. Offerings start at or after this time.';

  const isSel = (o) => selected != null && selected.TrainingPlanOfferingId === o.TrainingPlanOfferingId;
  const columns = [
    { title: 'Start', render: (o) => fmtDate(span(o).start) },
    { title: 'End', render: (o) => fmtDate(span(o).end) },
    { title: 'Duration', render: (o) => `${o.DurationHours} h` },
    { title: 'Instances', render: (o) => `${count(o)} × ${span(o).type}` },
    { title: 'Upfront fee', render: (o) => fmtMoney(o.UpfrontFee, o.CurrencyCode) },
    { title: 'Currency', render: (o) => o.CurrencyCode },
    { title: 'Availability zone', render: zones },
    {
      title: 'Select',
      render: (o) => (
        <button
          type="button"
          class={isSel(o) ? '' : 'secondary'}
          aria-pressed={isSel(o)}
          aria-label={`Select the offering starting ${fmtDate(span(o).start)} in ${zones(o)}`}
          data-testid="select-offering"
          onClick={() => {
            setSelected(o);
            setErrors({});
            setTopError(null);
          }}
        >
          {isSel(o) ? 'Selected' : 'Select'}
        </button>
      ),
    },
  ];

  return (
    <section class="plan-page plan-new">
      <p>
        <Link href="/plans">← Training plans</Link>
      </p>
      <h1>Buy a training plan</h1>
      <p class="hint">
        A training plan reserves GPU instances of one type for a fixed window. Endpoints whose variants name the plan
        (capacity-reservations-only) run on it; at its end the plan's instances are taken back.
      </p>
      <ErrorBox error={topError} />
      <form class="card" onSubmit={(e) => {
          e.preventDefault();
          search();
        }} noValidate aria-labelledby="plan-search-h">
        <h2 id="plan-search-h">1. Find offerings</h2>
        <div class="form-grid">
          <Field id="plan-type" label="Instance type" error={errors.type}>
            <select id="plan-type" value={form.type} onChange={set('type')} aria-invalid={!!errors.type}>
              {PLAN_INSTANCE_TYPES.map(([t, gpus]) => (
                <option value={t}>
                  {t} ({gpus})
                </option>
              ))}
            </select>
          </Field>
          <Field id="plan-count" label="Instance count" error={errors.count} hint="1 to 256 instances.">
            <input
              id="plan-count"
              type="number"
              inputMode="numeric"
              min="1"
              max="256"
              value={form.count}
              onInput={set('count')}
              aria-invalid={!!errors.count}
              aria-describedby="plan-count-hint"
            />
          </Field>
          <Field id="plan-target" label="Target resources" error={errors.target} hint="What will run on the plan.">
            <select id="plan-target" value={form.target} onChange={set('target')} aria-describedby="plan-target-hint">
              {PLAN_TARGETS.map(([v, label]) => (
                <option value={v} title={label}>
                  {v}
                </option>
              ))}
            </select>
          </Field>
          <Field id="plan-start" label="Start after (UTC)" error={errors.start} hint={startHint}>
            <input
              id="plan-start"
              type="datetime-local"
              value={form.start}
              onInput={set('start')}
              aria-invalid={!!errors.start}
              aria-describedby="plan-start-hint"
            />
          </Field>
          <Field id="plan-end" label="End before (UTC)" error={errors.end} hint="UTC. Offerings end at or before this time.">
            <input
              id="plan-end"
              type="datetime-local"
              value={form.end}
              onInput={set('end')}
              aria-invalid={!!errors.end}
              aria-describedby="plan-end-hint"
            />
          </Field>
          <Field id="plan-duration" label="Duration (hours)" error={errors.duration} hint="How long the plan lasts, 1 to 87600 hours.">
            <input
              id="plan-duration"
              type="number"
              inputMode="numeric"
              min="1"
              value={form.duration}
              onInput={set('duration')}
              aria-invalid={!!errors.duration}
              aria-describedby="plan-duration-hint"
            />
          </Field>
        </div>
        <button type="submit" disabled={searching} data-testid="search-offerings">
          {searching ? 'Searching…' : 'Search offerings'}
        </button>
      </form>

      {result ? (
        <div class="card">
          <h2 tabIndex={-1} ref={offersHeading}>
            2. Choose an offering
          </h2>
          <p class="hint">
            Offerings are valid for 30 minutes after the search (until{' '}
            {fmtDate(new Date(result.searchedAt.getTime() + OFFERING_TTL_MS))}) and while their capacity stays free.
          </p>
          <Table
            columns={columns}
            rows={result.offerings.map((o) => ({ ...o, key: o.TrainingPlanOfferingId }))}
            label="Training plan offerings"
            testid="offerings"
            empty="No offerings in this window: try another instance count, a shorter duration or a wider window."
          />
        </div>
      ) : null}

      {selected ? (
        <form class="card" onSubmit={(e) => {
            e.preventDefault();
            buy();
          }} noValidate aria-labelledby="plan-review-h" data-testid="review">
          <h2 id="plan-review-h" tabIndex={-1} ref={reviewHeading}>
            3. Review and buy
          </h2>
          <dl class="props">
            <dt>Instance type</dt>
            <dd>{span(selected).type}</dd>
            <dt>Instance count</dt>
            <dd>{count(selected)}</dd>
            <dt>Availability zone</dt>
            <dd>{zones(selected)}</dd>
            <dt>Start</dt>
            <dd>{fmtDate(span(selected).start)}</dd>
            <dt>End</dt>
            <dd>{fmtDate(span(selected).end)}</dd>
            <dt>Duration</dt>
            <dd>
              {selected.DurationHours} h ({fmtDuration(selected.DurationHours * 3600 * 1000)})
            </dd>
            <dt>Target resources</dt>
            <dd>{(selected.TargetResources || []).join(', ')}</dd>
            <dt>Upfront fee</dt>
            <dd data-testid="review-fee">
              {fmtMoney(selected.UpfrontFee, selected.CurrencyCode)} {selected.CurrencyCode}
            </dd>
            <dt>Offering</dt>
            <dd>
              <code class="plan-id">{selected.TrainingPlanOfferingId}</code>
            </dd>
          </dl>
          <Field
            id="plan-name"
            label="Plan name"
            error={errors.name}
            hint="Letters, digits and hyphens, up to 64; names are case-insensitive."
          >
            <input
              id="plan-name"
              value={name}
              onInput={(e) => setName(e.currentTarget.value)}
              autocomplete="off"
              aria-invalid={!!errors.name}
              aria-describedby="plan-name-hint"
            />
          </Field>
          <div class="toolbar">
            <button type="submit" disabled={buying} data-testid="buy">
              {buying ? 'Buying…' : `Buy for ${fmtMoney(selected.UpfrontFee, selected.CurrencyCode)}`}
            </button>
            <button type="button" class="secondary" onClick={() => setSelected(null)}>
              Back to offerings
            </button>
          </div>
        </form>
      ) : null}
    </section>
  );
}
