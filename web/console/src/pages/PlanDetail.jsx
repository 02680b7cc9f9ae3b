// One training plan (DescribeTrainingPlan): its status and window by the
// server's clock, reserved vs used instances, cost, reserved capacity per
// zone, and the endpoints whose variants run on it (DescribeTrainingPlan's
// CapstanEndpoints: one call, where SageMaker's API alone would need a
// DescribeEndpoint per endpoint).
import { sagemaker, serverNow } from '../api.js';
import { ErrorBox, Status, Table, fmtDate, fmtDuration, fmtMoney, fmtNumber, usePoll } from '../components.jsx';
import { Link } from '../router.jsx';
import { planTiming } from './PlansShared.js';
import './Plans.css';

function Timing({ plan }) {
  const now = serverNow();
  const t = planTiming(plan, now);
  if (t.expired)
    return (
      <p class="flag bad" data-testid="plan-expired" role="status">
        Expired: the plan ended at {fmtDate(plan.EndTime)}. Its instances have been taken back; endpoints on it have
        failed and need an update to another plan or on-demand capacity.
      </p>
    );
  if (t.expiring)
    return (
      <p class="flag warn" data-testid="plan-expiring" role="status">
        This plan expires in {fmtDuration(t.left)} (at {fmtDate(plan.EndTime)}). Endpoints on it fail then: move them to
        another plan or to on-demand capacity before it ends.
      </p>
    );
  return null;
}

export default function PlanDetail({ name }) {
  const plan = usePoll(() => sagemaker('DescribeTrainingPlan', { TrainingPlanName: name }), [name]);
  const p = plan.data;
  const eps = (p && p.CapstanEndpoints) || [];
  const now = serverNow();
  const t = p ? planTiming(p, now) : null;

  let timeLeft = '—';
  if (t) {
    if (t.expired) timeLeft = 'Expired';
    else if (t.untilStart != null && t.untilStart > 0) timeLeft = `Starts in ${fmtDuration(t.untilStart)}`;
    else timeLeft = fmtDuration(t.left);
  }
  const total = p ? p.TotalInstanceCount || 0 : 0;
  const inUse = p ? p.InUseInstanceCount || 0 : 0;
  const hours = p ? p.DurationHours || 0 : 0;
  const perInstanceHour = p && total && hours ? Number(p.UpfrontFee) / (total * hours) : null;

  const capColumns = [
    { title: 'Availability zone', render: (r) => r.AvailabilityZone || '—' },
    { title: 'Instances', render: (r) => `${r.TotalInstanceCount} × ${r.InstanceType}` },
    { title: 'Status', render: (r) => <Status value={r.Status} /> },
    { title: 'Start', render: (r) => fmtDate(r.StartTime) },
    { title: 'End', render: (r) => fmtDate(r.EndTime) },
    { title: 'Reserved capacity ARN', render: (r) => <code class="plan-id">{r.ReservedCapacityArn}</code> },
  ];
  const epColumns = [
    { title: 'Endpoint', render: (e) => <Link href={'/endpoints/' + encodeURIComponent(e.EndpointName)}>{e.EndpointName}</Link> },
    {
      title: 'Status',
      render: (e) => (
        <>
          <Status value={e.EndpointStatus} />
          {t && t.expired ? (
            <span class="flag bad" data-testid="plan-endpoint-expired">
              {' '}
              on an expired plan
            </span>
          ) : null}
        </>
      ),
    },
    { title: 'Variants', render: (e) => e.VariantNames.join(', ') },
    { title: 'Instances on the plan', render: (e) => e.InstanceCount },
  ];

  return (
    <section class="plan-page">
      <p>
        <Link href="/plans">← Training plans</Link>
      </p>
      <h1>{name}</h1>
      <ErrorBox error={plan.error} />
      {!p ? (
        plan.loading ? <p class="empty">Loading…</p> : null
      ) : (
        <>
          <p>
            Status:{' '}
            <span data-testid="plan-status">
              <Status value={p.Status} />
            </span>{' '}
            {p.StatusMessage ? <span class="hint">{p.StatusMessage}</span> : null}
          </p>
          <Timing plan={p} />
          <div class="plan-cards">
          <div class="card">
            <h2>Schedule</h2>
            <dl class="props">
              <dt>Start</dt>
              <dd data-testid="plan-start">{fmtDate(p.StartTime)}</dd>
              <dt>End</dt>
              <dd data-testid="plan-end">{fmtDate(p.EndTime)}</dd>
              <dt>Duration</dt>
              <dd>
                {p.DurationHours} h{p.DurationMinutes ? ` ${p.DurationMinutes} min` : ''}
              </dd>
              <dt>Time left</dt>
              <dd data-testid="plan-time-left">{timeLeft}</dd>
              <dt>Target resources</dt>
              <dd>{(p.TargetResources || []).join(', ') || '—'}</dd>
              <dt>ARN</dt>
              <dd>
                <code class="plan-id">{p.TrainingPlanArn}</code>
              </dd>
            </dl>
          </div>
          <div class="card">
            <h2>Instances</h2>
            <div class="plan-usage" data-testid="plan-usage">
              <div>
                <strong>{total}</strong>reserved
              </div>
              <div>
                <strong data-testid="plan-in-use">{inUse}</strong>in use
              </div>
              <div>
                <strong data-testid="plan-available">{p.AvailableInstanceCount ?? 0}</strong>available
              </div>
              <div>
                <strong>{fmtNumber(p.CapstanUsedInstanceHours || 0)}</strong>instance-hours used
              </div>
            </div>
            <div
              class="plan-meter"
              role="meter"
              aria-label="Reserved instances in use"
              aria-valuemin={0}
              aria-valuemax={total}
              aria-valuenow={inUse}
            >
              <span style={{ width: total ? `${Math.min(100, (inUse / total) * 100)}%` : '0%' }} />
            </div>
          </div>
          <div class="card">
            <h2>Cost</h2>
            <dl class="props">
              <dt>Upfront fee</dt>
              <dd data-testid="plan-fee">
                {fmtMoney(p.UpfrontFee, p.CurrencyCode)} {p.CurrencyCode}
              </dd>
              <dt>Per instance-hour</dt>
              <dd>{perInstanceHour == null ? '—' : fmtMoney(perInstanceHour, p.CurrencyCode)}</dd>
            </dl>
          </div>
          </div>
          <h2>Endpoints on this plan</h2>
          <Table
            columns={epColumns}
            rows={eps.map((e) => ({ ...e, key: e.EndpointName }))}
            label="Endpoints on this plan"
            testid="plan-endpoints"
            empty="No endpoint uses this plan. A variant uses it with CapacityReservationConfig (capacity-reservations-only, MlReservationArn = the plan's ARN)."
          />
          <h2>Reserved capacity</h2>
          <Table
            columns={capColumns}
            rows={(p.ReservedCapacitySummaries || []).map((r) => ({ ...r, key: r.ReservedCapacityArn }))}
            label="Reserved capacity"
            testid="plan-capacity"
          />
        </>
      )}
    </section>
  );
}
