// The endpoint page's live charts: capstan's own metrics read through the
// CloudWatch API (GetMetricData), the last 15 minutes by the server's clock
// in 10-second periods, refreshed every 5 seconds.
import { useMemo } from 'preact/hooks';
import { cloudwatch, serverNow } from '../api.js';
import { Chart, ErrorBox, fmtNumber, usePoll } from '../components.jsx';

export const WINDOW_S = 15 * 60;
export const PERIOD_S = 10;

const SM = 'AWS/SageMaker';
const CAPSTAN = 'capstan';

// queriesFor is the GetMetricData queries of an endpoint with variants:
// per variant the invocation metrics, per endpoint capstan's gauges.
function queriesFor(endpoint, variants) {
  const q = [];
  const add = (id, namespace, metric, dims, stat) =>
    q.push({
      Id: id,
      MetricStat: {
        Metric: { Namespace: namespace, MetricName: metric, Dimensions: dims },
        Period: PERIOD_S,
        Stat: stat,
      },
      ReturnData: true,
    });
  const ep = [{ Name: 'EndpointName', Value: endpoint }];
  variants.forEach((v, i) => {
    const d = [...ep, { Name: 'VariantName', Value: v }];
    add(`v${i}_inv`, SM, 'Invocations', d, 'Sum');
    add(`v${i}_lat50`, SM, 'ModelLatency', d, 'p50');
    add(`v${i}_lat90`, SM, 'ModelLatency', d, 'p90');
    add(`v${i}_lat99`, SM, 'ModelLatency', d, 'p99');
    add(`v${i}_ovh50`, SM, 'OverheadLatency', d, 'p50');
    add(`v${i}_e4`, SM, 'Invocation4XXErrors', d, 'Sum');
    add(`v${i}_e5`, SM, 'Invocation5XXErrors', d, 'Sum');
    add(`v${i}_em`, SM, 'InvocationModelErrors', d, 'Sum');
  });
  add('ttft50', CAPSTAN, 'TimeToFirstToken', ep, 'p50');
  add('ttft90', CAPSTAN, 'TimeToFirstToken', ep, 'p90');
  add('arrivals', CAPSTAN, 'ArrivalRate', ep, 'Average');
  add('queue', CAPSTAN, 'QueueDepth', ep, 'Maximum');
  add('perreplica', CAPSTAN, 'InFlightPerReplica', ep, 'Average');
  add('replicas', CAPSTAN, 'Replicas', ep, 'Maximum');
  return q;
}

// loadMetrics reads the window ending now (server clock) and returns the
// period starts and each query's values on them (null: no datapoint).
async function loadMetrics(endpoint, variants) {
  const now = Math.floor(serverNow().getTime() / 1000);
  const end = Math.floor(now / PERIOD_S) * PERIOD_S + PERIOD_S; // the current period included
  const start = end - WINDOW_S;
  const n = WINDOW_S / PERIOD_S;
  const x = Array.from({ length: n }, (_, i) => start + i * PERIOD_S);
  const values = {};
  const body = {
    MetricDataQueries: queriesFor(endpoint, variants),
    StartTime: start,
    EndTime: end,
    ScanBy: 'TimestampAscending',
  };
  let NextToken;
  do {
    const out = await cloudwatch('GetMetricData', NextToken ? { ...body, NextToken } : body);
    for (const r of out.MetricDataResults || []) {
      const vals = values[r.Id] || (values[r.Id] = new Array(n).fill(null));
      (r.Timestamps || []).forEach((t, k) => {
        const sec = typeof t === 'number' ? t : Date.parse(t) / 1000;
        const i = Math.round((sec - start) / PERIOD_S);
        const v = Number(r.Values[k]);
        if (i >= 0 && i < n && Number.isFinite(v)) vals[i] = v;
      });
    }
    NextToken = out.NextToken;
  } while (NextToken);
  return { x, values, variants };
}

const count = (n) => (Number.isInteger(n) && n < 1000 ? String(n) : fmtNumber(n));

const map = (a, f) => (a ? a.map((v) => (v == null ? null : f(v))) : []);

export default function EndpointCharts({ name, variants }) {
  const key = variants.join('\u0000');
  const { data, error } = usePoll(() => loadMetrics(name, variants), [name, key], 5000);
  const charts = useMemo(() => {
    if (!data) return null;
    const { x: grid, values: V } = data;
    const none = new Array(grid.length).fill(null);
    const at = (id) => V[id] || none;
    // A period where the endpoint was routed (its gauges sampled) but had no
    // invocation counts zero requests and errors, not "no data".
    const alive = grid.map((_, i) => at('replicas')[i] != null || at('arrivals')[i] != null);
    // The chart's x: the window's first and last period and every period
    // with data, so that points either side of a gap in the data (a dev
    // clock moved ahead, a server restarted) are joined and sparse points
    // are drawn as points.
    const keep = grid.map((_, i) => i === 0 || i === grid.length - 1 || alive[i] || Object.values(V).some((a) => a[i] != null));
    const x = grid.filter((_, i) => keep[i]);
    const pick = (a) => a.filter((_, i) => keep[i]);
    const get = (id) => pick(at(id));
    const counts = (id) => pick(at(id).map((v, i) => (v != null ? v : alive[i] ? 0 : null)));
    const many = data.variants.length > 1;
    const vl = (i, what) => (many ? `${data.variants[i]} ${what}` : what);
    const requests = [];
    const latency = [];
    const errors = [];
    let total = 0;
    let errTotal = 0;
    data.variants.forEach((_, i) => {
      const inv = counts(`v${i}_inv`);
      total += get(`v${i}_inv`).reduce((s, v) => s + (v || 0), 0);
      requests.push({ label: vl(i, 'completed'), values: map(inv, (v) => v / PERIOD_S) });
      latency.push({ label: vl(i, 'p50'), values: map(get(`v${i}_lat50`), (v) => v / 1000) });
      latency.push({ label: vl(i, 'p90'), values: map(get(`v${i}_lat90`), (v) => v / 1000) });
      latency.push({ label: vl(i, 'p99'), values: map(get(`v${i}_lat99`), (v) => v / 1000) });
      if (!many) latency.push({ label: 'overhead p50', values: map(get(`v${i}_ovh50`), (v) => v / 1000) });
      for (const [id, what] of [
        ['e4', '4XX'],
        ['e5', '5XX'],
        ['em', 'model errors'],
      ]) {
        errors.push({ label: vl(i, what), values: counts(`v${i}_${id}`) });
        if (id !== 'em') errTotal += get(`v${i}_${id}`).reduce((s, v) => s + (v || 0), 0);
      }
    });
    requests.unshift({ label: 'arrivals', values: get('arrivals') });
    return {
      x,
      total,
      errTotal,
      requests,
      latency,
      ttft: [
        { label: 'p50', values: map(get('ttft50'), (v) => v * 1000) },
        { label: 'p90', values: map(get('ttft90'), (v) => v * 1000) },
      ],
      errors,
      replicas: [{ label: 'ready replicas', values: get('replicas') }],
      queue: [
        { label: 'queue depth', values: get('queue') },
        { label: 'in flight per replica', values: get('perreplica') },
      ],
    };
  }, [data]);
  return (
    <section aria-labelledby="endpoint-metrics-h">
      <h2 id="endpoint-metrics-h">Metrics</h2>
      <p class="hint">
        The last 15 minutes by the server's clock, {PERIOD_S}-second periods, from capstan's CloudWatch metrics
        (<code>AWS/SageMaker</code> and <code>capstan</code> namespaces); refreshed every 5 seconds.
      </p>
      <ErrorBox error={error} />
      {charts ? (
        <>
          <p class="endpoint-summary" data-testid="endpoint-metrics-summary" data-requests={charts.total} data-errors={charts.errTotal}>
            In this window: <strong>{count(charts.total)}</strong> request{charts.total === 1 ? '' : 's'},{' '}
            <strong>{count(charts.errTotal)}</strong> 4XX/5XX error{charts.errTotal === 1 ? '' : 's'}.
          </p>
          <div class="charts">
            <Chart title="Request rate (req/s)" x={charts.x} series={charts.requests} testid="chart-requests" />
            <Chart title="Model latency (ms)" x={charts.x} series={charts.latency} testid="chart-latency" />
            <Chart title="Time to first token (ms)" x={charts.x} series={charts.ttft} testid="chart-ttft" />
            <Chart title="Errors (per period)" x={charts.x} series={charts.errors} testid="chart-errors" />
            <Chart title="Replicas" x={charts.x} series={charts.replicas} testid="chart-replicas" />
            <Chart title="Queue" x={charts.x} series={charts.queue} testid="chart-queue" />
          </div>
        </>
      ) : error ? null : (
        <p class="empty">Loading metrics…</p>
      )}
    </section>
  );
}
