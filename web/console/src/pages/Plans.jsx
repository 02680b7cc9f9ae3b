// Training plans: every plan (ListTrainingPlans, all pages), its window and
// time left by the server's clock, with plans about to end flagged.
import { sagemaker, serverNow } from '../api.js';
import { ErrorBox, Status, Table, fmtDate, fmtDuration, fmtMoney, usePoll } from '../components.jsx';
import { Link } from '../router.jsx';
import { planTiming, timeLeftText } from './PlansShared.js';
import './Plans.css';

// listPlans reads every page of ListTrainingPlans (100 a call).
export async function listPlans() {
  const plans = [];
  let token;
  do {
    const body = { MaxResults: 100, SortBy: 'StartTime', SortOrder: 'Descending' };
    if (token) body.NextToken = token;
    const out = await sagemaker('ListTrainingPlans', body);
    plans.push(...(out.TrainingPlanSummaries || []));
    token = out.NextToken;
  } while (token);
  return plans;
}

function instances(p) {
  const types = [...new Set((p.ReservedCapacitySummaries || []).map((r) => r.InstanceType))];
  return `${p.TotalInstanceCount} × ${types.join(', ') || '—'}`;
}

function TimeLeft({ plan, now }) {
  const t = planTiming(plan, now);
  if (t.expired) return <Status value="Expired" />;
  if (t.expiring)
    return (
      <span class="flag warn" data-testid="plan-expiring">
        expires in {fmtDuration(t.left)}
      </span>
    );
  if (t.untilStart != null && t.untilStart > 0)
    return (
      <span>
        {timeLeftText(plan, now)} <span class="hint">(starts in {fmtDuration(t.untilStart)})</span>
      </span>
    );
  return <span>{timeLeftText(plan, now)}</span>;
}

export default function Plans() {
  const { data, error, loading } = usePoll(listPlans, []);
  const now = serverNow();
  const columns = [
    { title: 'Name', render: (p) => <Link href={'/plans/' + encodeURIComponent(p.TrainingPlanName)}>{p.TrainingPlanName}</Link> },
    { title: 'Status', render: (p) => <Status value={p.Status} /> },
    { title: 'Instances', render: instances },
    { title: 'Start', render: (p) => fmtDate(p.StartTime) },
    { title: 'End', render: (p) => fmtDate(p.EndTime) },
    { title: 'Time left', render: (p) => <TimeLeft plan={p} now={now} /> },
    { title: 'Upfront fee', render: (p) => `${fmtMoney(p.UpfrontFee, p.CurrencyCode)} ${p.CurrencyCode || ''}` },
    { title: 'Target', render: (p) => (p.TargetResources || []).join(', ') },
  ];
  const rows = (data || []).map((p) => ({ ...p, key: p.TrainingPlanArn }));
  return (
    <section>
      <h1>Training plans</h1>
      <div class="toolbar">
        <Link href="/plans/new" class="button" data-testid="buy-plan">
          Buy a training plan
        </Link>
        <span class="hint">Times are UTC; time left is by the server's clock ({fmtDate(now)}).</span>
      </div>
      <ErrorBox error={error} />
      {loading && !data ? (
        <p class="empty">Loading…</p>
      ) : (
        <Table
          columns={columns}
          rows={rows}
          label="Training plans"
          testid="plans"
          empty="No training plans yet. Buy one to reserve GPU capacity for endpoints."
        />
      )}
    </section>
  );
}
