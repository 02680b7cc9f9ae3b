// The dashboards page: capstan's Grafana dashboards (Inference, Cluster,
// Reservations: the same JSON `capstan observability dashboards` writes)
// rendered from capstan's own metric store, with Grafana's time range,
// refresh and variables kept in the URL as Grafana keeps them (from,
// refresh, var-NAME).
import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import uPlot from 'uplot';
import { bearer, DASHBOARDS, prom, serverNow } from '../api.js';
import { ErrorBox, fmtNumber, usePoll } from '../components.jsx';
import { Link } from '../router.jsx';
import './Dashboards.css';

// Grafana's quick ranges (those within the store's retention are offered)
// and refresh intervals.
const RANGES = [
  ['now-5m', 'Last 5 minutes', 300],
  ['now-15m', 'Last 15 minutes', 900],
  ['now-30m', 'Last 30 minutes', 1800],
  ['now-1h', 'Last 1 hour', 3600],
  ['now-3h', 'Last 3 hours', 10800],
  ['now-6h', 'Last 6 hours', 21600],
  ['now-12h', 'Last 12 hours', 43200],
  ['now-24h', 'Last 24 hours', 86400],
  ['now-2d', 'Last 2 days', 172800],
  ['now-7d', 'Last 7 days', 604800],
];
const REFRESH = [
  ['', 'Off', 0],
  ['5s', '5s', 5],
  ['10s', '10s', 10],
  ['30s', '30s', 30],
  ['1m', '1m', 60],
  ['5m', '5m', 300],
];
// MAX_POINTS bounds a panel's points per series (Grafana's maxDataPoints
// is the panel's width in pixels).
const MAX_POINTS = 400;
const ROW_PX = 30; // Grafana's grid unit height
const GAP_PX = 6; // the grid's gap (Dashboards.css)
const COLORS = ['#2563eb', '#dc2626', '#16a34a', '#9333ea', '#ea580c', '#0891b2', '#ca8a04', '#db2777', '#4b5563', '#65a30d'];

// durationSeconds reads a Go or Prometheus duration ("6h0m0s", "1s", "30s").
export function durationSeconds(s) {
  let total = 0;
  for (const [, n, u] of String(s).matchAll(/(\d+(?:\.\d+)?)(ms|s|m|h|d)/g)) {
    total += Number(n) * { ms: 0.001, s: 1, m: 60, h: 3600, d: 86400 }[u];
  }
  return total;
}

function useQueryState() {
  const [search, setSearch] = useState(location.search);
  useEffect(() => {
    const on = () => setSearch(location.search);
    window.addEventListener('popstate', on);
    window.addEventListener('capstan-route', on);
    return () => {
      window.removeEventListener('popstate', on);
      window.removeEventListener('capstan-route', on);
    };
  }, []);
  const params = useMemo(() => new URLSearchParams(search), [search]);
  const set = (changes) => {
    const p = new URLSearchParams(location.search);
    for (const [k, v] of Object.entries(changes)) {
      p.delete(k);
      for (const x of [].concat(v ?? [])) p.append(k, x);
    }
    history.replaceState(null, '', location.pathname + '?' + p.toString());
    setSearch(location.search);
  };
  return [params, set];
}

// regexEscape quotes a variable's value for =~ as Grafana does.
const regexEscape = (s) => s.replace(/[\\^$*+?.()|[\]{}]/g, '\\$&');

// interpolate fills Grafana's built-in variables and the dashboard's own.
export function interpolate(expr, builtins, vars) {
  let out = expr;
  for (const [k, v] of Object.entries(builtins)) out = out.split(k).join(v);
  return out.replace(/\$\{?([A-Za-z_]\w*)\}?/g, (m, name) => {
    if (!(name in vars)) return m;
    const vals = vars[name];
    if (vals.all) return vals.allValue;
    if (vals.values.length === 1) return regexEscape(vals.values[0]);
    return '(' + vals.values.map(regexEscape).join('|') + ')';
  });
}

// legend renders a legendFormat ({{label}}) for a series, or its labels.
export function legend(format, metric) {
  if (format) return format.replace(/\{\{\s*([^}\s]+)\s*\}\}/g, (_, l) => metric[l] ?? '').trim() || '{}';
  const { __name__: name = '', ...rest } = metric;
  const ls = Object.entries(rest).map(([k, v]) => `${k}="${v}"`);
  return name + (ls.length ? `{${ls.join(', ')}}` : name ? '' : '{}');
}

// formatUnit writes a value in a Grafana unit.
export function formatUnit(unit, v) {
  if (v == null || Number.isNaN(v)) return '—';
  if (!Number.isFinite(v)) return v > 0 ? '+Inf' : '-Inf';
  if (unit && unit.startsWith('suffix:')) return fmtNumber(v) + ' ' + unit.slice(7).trim();
  switch (unit) {
    case 'percentunit':
      return (v * 100).toFixed(Math.abs(v) < 0.1 ? 2 : 1) + '%';
    case 'reqps':
      return fmtNumber(v) + ' req/s';
    case 'currencyUSD':
      return '$' + (Math.abs(v) >= 1000 ? fmtNumber(v) : v.toFixed(2));
    case 's': {
      const a = Math.abs(v);
      if (a === 0) return '0 s';
      if (a < 1e-3) return (v * 1e6).toFixed(0) + ' µs';
      if (a < 1) return (v * 1e3).toFixed(a < 0.01 ? 2 : 0) + ' ms';
      if (a < 60) return v.toFixed(a < 10 ? 2 : 1) + ' s';
      if (a < 3600) return (v / 60).toFixed(1) + ' min';
      if (a < 86400) return (v / 3600).toFixed(1) + ' h';
      return (v / 86400).toFixed(1) + ' d';
    }
    default:
      return fmtNumber(v);
  }
}

// loadPanel runs a panel's queries: range queries for time series, instant
// ones for stat and table panels (as their targets say).
async function loadPanel(panel, ctx) {
  const out = [];
  for (const t of panel.targets || []) {
    const expr = interpolate(t.expr, ctx.builtins, ctx.vars);
    const data = t.instant
      ? await prom('query', { query: expr, time: ctx.end })
      : await prom('query_range', { query: expr, start: ctx.start, end: ctx.end, step: ctx.step });
    out.push({ refId: t.refId, legendFormat: t.legendFormat, result: data.result || [] });
  }
  return out;
}

// overrideFor is a query's unit and axis from the panel's byFrameRefID
// overrides (the dashboards put a second query on the right axis).
function overrideFor(panel, refId) {
  const o = { unit: panel.fieldConfig?.defaults?.unit || '', right: false };
  for (const ov of panel.fieldConfig?.overrides || []) {
    if (ov.matcher?.id !== 'byFrameRefID' || ov.matcher.options !== refId) continue;
    for (const p of ov.properties || []) {
      if (p.id === 'unit') o.unit = p.value;
      if (p.id === 'custom.axisPlacement' && p.value === 'right') o.right = true;
    }
  }
  return o;
}

// yRange starts the y axis at zero (or below, for negative values) and
// gives a flat series a unit of room rather than uPlot's 0–100.
function yRange(u, min, max) {
  if (min == null || max == null) return [0, 1];
  const lo = Math.min(0, min);
  const hi = Math.max(0, max);
  if (lo === hi) return [0, 1];
  return [lo, hi + (hi - lo) * 0.1];
}

// hasIsolated says whether a series has a value between two gaps.
function hasIsolated(vals) {
  return vals.some((v, i) => v != null && vals[i - 1] == null && vals[i + 1] == null);
}

// axisSize fits a y axis to its longest label.
function axisSize(u, values) {
  const longest = (values || []).reduce((n, v) => Math.max(n, String(v ?? '').length), 0);
  return Math.max(40, longest * 7 + 16);
}

function TimeSeries({ panel, results, ctx }) {
  const box = useRef(null);
  const plot = useRef(null);
  const model = useMemo(() => {
    // One x axis: every step of the range.
    const xs = [];
    for (let t = ctx.start; t <= ctx.end + 1e-9; t += ctx.step) xs.push(Math.round(t * 1000) / 1000);
    const index = new Map(xs.map((x, i) => [x, i]));
    const series = [];
    for (const r of results) {
      const o = overrideFor(panel, r.refId);
      for (const s of r.result) {
        const vals = new Array(xs.length).fill(null);
        for (const [t, v] of s.values || []) {
          const i = index.get(Math.round(Number(t) * 1000) / 1000);
          const f = Number(v);
          if (i != null && Number.isFinite(f)) vals[i] = f;
        }
        series.push({ label: legend(r.legendFormat, s.metric), values: vals, ...o });
      }
    }
    return { xs, series };
  }, [results, ctx, panel]);
  const points = model.series.reduce((n, s) => n + s.values.filter((v) => v != null).length, 0);
  // The point under the cursor (null: none): the legend then shows every
  // series' value there, as Grafana's multi-series tooltip does.
  const [hover, setHover] = useState(null);
  // The panel's height in the grid (rows and the gaps between them) less
  // its title and legend.
  const rows = panel.gridPos?.h || 8;
  const legendPx = Math.min(70, 14 * model.series.length + 6);
  const height = rows * ROW_PX + (rows - 1) * GAP_PX - 34 - legendPx;
  useEffect(() => {
    if (!box.current) return undefined;
    if (plot.current) plot.current.destroy();
    plot.current = null;
    if (!points) return undefined;
    const custom = panel.fieldConfig?.defaults?.custom || {};
    const bars = custom.drawStyle === 'bars';
    const left = model.series.find((s) => !s.right)?.unit ?? panel.fieldConfig?.defaults?.unit;
    const right = model.series.find((s) => s.right)?.unit;
    const fill = (c) => c + Math.round(((custom.fillOpacity ?? 0) / 100) * 255).toString(16).padStart(2, '0');
    const opts = {
      width: Math.max(240, box.current.clientWidth || 480),
      height: Math.max(120, height),
      legend: { show: false },
      hooks: { setCursor: [(u) => setHover(u.cursor.idx ?? null)] },
      cursor: { points: { show: false } },
      scales: { x: { time: true }, y: { range: yRange }, ...(right ? { y2: { range: yRange } } : {}) },
      series: [
        {},
        ...model.series.map((s, i) => ({
          label: s.label,
          scale: s.right ? 'y2' : 'y',
          stroke: COLORS[i % COLORS.length],
          fill: fill(COLORS[i % COLORS.length]),
          width: 1.5,
          spanGaps: false,
          // A value with no neighbour draws no line: show it as a point,
          // as Grafana's showPoints: auto does.
          points: { show: hasIsolated(s.values), size: 5 },
          ...(bars ? { paths: uPlot.paths.bars({ size: [0.6, 20] }) } : {}),
        })),
      ],
      axes: [
        {},
        { scale: 'y', size: axisSize, values: (u, vs) => vs.map((v) => formatUnit(left, v)) },
        ...(right ? [{ scale: 'y2', side: 1, size: axisSize, grid: { show: false }, values: (u, vs) => vs.map((v) => formatUnit(right, v)) }] : []),
      ],
    };
    plot.current = new uPlot(opts, [model.xs, ...model.series.map((s) => s.values)], box.current);
    return undefined;
  }, [model, points, height, panel]);
  useEffect(() => () => plot.current && plot.current.destroy(), []);
  return (
    <>
      <div ref={box} class="dash-plot" />
      {points ? (
        <ul class="dash-legend" data-at={hover != null ? new Date(model.xs[hover] * 1000).toISOString() : 'last'}>
          {hover != null ? <li class="at">{new Date(model.xs[hover] * 1000).toLocaleTimeString()}</li> : null}
          {model.series.map((s, i) => {
            const last = hover != null ? s.values[hover] : [...s.values].reverse().find((v) => v != null);
            return (
              <li>
                <span class="swatch" style={{ background: COLORS[i % COLORS.length] }} />
                {s.label}
                {s.right ? ' (right)' : ''}
                <span class="last">{last != null ? formatUnit(s.unit, last) : '—'}</span>
              </li>
            );
          })}
        </ul>
      ) : null}
    </>
  );
}

function Stat({ panel, results }) {
  const unit = panel.fieldConfig?.defaults?.unit || '';
  const items = results.flatMap((r) => r.result.map((s) => ({ name: legend(r.legendFormat, s.metric), v: Number(s.value?.[1]) })));
  return (
    <div class="dash-stat">
      {items.map((x) => (
        <div>
          <strong>{formatUnit(unit, x.v)}</strong>
          <span>{x.name}</span>
        </div>
      ))}
    </div>
  );
}

// Grid is a table panel: one row per label set, a column per label and a
// value column per query ("Value", or "Value #A"… when merged).
function Grid({ results }) {
  const many = results.length > 1;
  const cols = new Set();
  const rows = new Map();
  for (const r of results) {
    for (const s of r.result) {
      const { __name__, ...ls } = s.metric;
      Object.keys(ls).forEach((k) => cols.add(k));
      const key = JSON.stringify(Object.entries(ls).sort());
      const row = rows.get(key) || { labels: ls, values: {} };
      row.values[many ? 'Value #' + r.refId : 'Value'] = Number(s.value?.[1]);
      rows.set(key, row);
    }
  }
  const labelCols = [...cols].sort();
  const valueCols = many ? results.map((r) => 'Value #' + r.refId) : ['Value'];
  return (
    <div class="dash-table">
      <table>
        <thead>
          <tr>
            {[...labelCols, ...valueCols].map((c) => (
              <th scope="col">{c}</th>
            ))}
          </tr>
        </thead>
        <tbody>
          {[...rows.values()].map((row) => (
            <tr>
              {labelCols.map((c) => (
                <td>{row.labels[c] ?? ''}</td>
              ))}
              {valueCols.map((c) => (
                <td class="num">{row.values[c] == null ? '' : fmtNumber(row.values[c])}</td>
              ))}
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

function finiteValues(s) {
  const vals = s.values || (s.value ? [s.value] : []);
  return vals.filter(([, v]) => Number.isFinite(Number(v))).length;
}

function Panel({ panel, ctx, tick }) {
  const [state, setState] = useState({ results: null, error: null });
  useEffect(() => {
    let live = true;
    loadPanel(panel, ctx).then(
      (results) => live && setState({ results, error: null }),
      (error) => live && setState((s) => ({ results: s.results, error })),
    );
    return () => {
      live = false;
    };
  }, [panel, ctx, tick]);
  const { results, error } = state;
  const series = results ? results.reduce((n, r) => n + r.result.length, 0) : 0;
  // Data is a finite value: a series of NaN (a quantile of no observations)
  // draws nothing, as in Grafana.
  const points = results ? results.reduce((n, r) => n + r.result.reduce((m, s) => m + finiteValues(s), 0), 0) : 0;
  const status = error ? 'error' : !results ? 'loading' : points ? 'data' : 'empty';
  const g = panel.gridPos || { x: 0, y: 0, w: 12, h: 8 };
  return (
    <figure
      class={'dash-panel dash-' + panel.type}
      style={{ gridColumn: `${g.x + 1} / span ${g.w}`, gridRow: `${g.y + 1} / span ${g.h}` }}
      data-testid="dashboard-panel"
      data-title={panel.title}
      data-state={status}
      data-series={series}
      data-points={points}
    >
      <figcaption title={panel.description}>{panel.title}</figcaption>
      <ErrorBox error={error} />
      {results && points ? (
        panel.type === 'stat' ? (
          <Stat panel={panel} results={results} />
        ) : panel.type === 'table' ? (
          <Grid results={results} />
        ) : (
          <TimeSeries panel={panel} results={results} ctx={ctx} />
        )
      ) : status === 'empty' ? (
        <p class="empty">No data</p>
      ) : status === 'loading' ? (
        <p class="empty">Loading…</p>
      ) : null}
    </figure>
  );
}

// Variable is a multi-value label_values() variable with All.
function Variable({ v, values, selected, onChange }) {
  const all = selected.length === 0 || selected.includes('$__all');
  return (
    <label class="dash-var">
      {v.label || v.name}
      <select
        multiple
        size={Math.min(4, values.length + 1)}
        data-testid={'var-' + v.name}
        onChange={(e) => {
          const picked = [...e.currentTarget.selectedOptions].map((o) => o.value);
          onChange(picked.includes('$__all') || picked.length === 0 ? [] : picked);
        }}
      >
        <option value="$__all" selected={all}>
          All
        </option>
        {values.map((x) => (
          <option value={x} selected={!all && selected.includes(x)}>
            {x}
          </option>
        ))}
      </select>
    </label>
  );
}

function Dashboard({ index, uid }) {
  const [params, setParams] = useQueryState();
  const { data: dash, error } = usePoll(() => bearer('GET', `${DASHBOARDS}/${encodeURIComponent(uid)}`), [uid], 0);
  const scrape = durationSeconds(index.scrapeInterval) || 5;
  const retention = durationSeconds(index.retention) || 21600;
  const ranges = RANGES.filter(([, , s]) => s <= retention);
  const from = params.get('from') || dash?.time?.from || 'now-1h';
  const range = (ranges.find(([k]) => k === from) || ranges[ranges.length - 1] || RANGES[0])[2];
  const refresh = params.has('refresh') ? params.get('refresh') : dash?.refresh || '';
  const refreshS = (REFRESH.find(([k]) => k === refresh) || REFRESH[0])[2];
  const [tick, setTick] = useState(0);
  useEffect(() => {
    if (!refreshS) return undefined;
    const t = setInterval(() => setTick((n) => n + 1), refreshS * 1000);
    return () => clearInterval(t);
  }, [refreshS]);
  const variables = (dash?.templating?.list || []).filter((v) => v.type === 'query');
  const [varValues, setVarValues] = useState({});
  useEffect(() => {
    let live = true;
    const end = serverNow().getTime() / 1000;
    Promise.all(
      variables.map(async (v) => {
        const m = /^label_values\((.+),\s*([A-Za-z_]\w*)\)$/.exec(v.query || '');
        if (!m) return [v.name, []];
        const vals = await prom(`label/${m[2]}/values`, { 'match[]': m[1], start: end - range, end });
        return [v.name, vals || []];
      }),
    ).then(
      (pairs) => live && setVarValues(Object.fromEntries(pairs)),
      () => {},
    );
    return () => {
      live = false;
    };
  }, [dash, range, tick]);
  // ctx changes on every refresh: panels reload with a window ending now.
  const ctx = useMemo(() => {
    const end = Math.floor(serverNow().getTime() / 1000);
    const step = Math.max(scrape, Math.ceil(range / MAX_POINTS));
    const vars = {};
    for (const v of variables) {
      const sel = params.getAll('var-' + v.name).filter((x) => x !== '$__all');
      vars[v.name] = { all: sel.length === 0, allValue: v.allValue || '.*', values: sel };
    }
    return {
      start: end - range,
      end,
      step,
      vars,
      builtins: {
        $__rate_interval: `${Math.max(step + scrape, 4 * scrape)}s`,
        $__interval: `${step}s`,
        $__range: `${range}s`,
      },
    };
  }, [dash, range, tick, scrape, params.toString()]);
  if (error) return <ErrorBox error={error} />;
  if (!dash) return <p class="empty">Loading dashboard…</p>;
  const panels = [];
  for (const p of dash.panels || []) {
    if (p.type === 'row') {
      panels.push(p);
      (p.panels || []).forEach((c) => panels.push(c));
    } else panels.push(p);
  }
  return (
    <>
      <div class="dash-controls">
        {variables.map((v) => (
          <Variable v={v} values={varValues[v.name] || []} selected={params.getAll('var-' + v.name)} onChange={(vals) => setParams({ ['var-' + v.name]: vals })} />
        ))}
        <label class="dash-range">
          Time range
          <select data-testid="time-range" value={from} onChange={(e) => setParams({ from: e.currentTarget.value })}>
            {ranges.map(([k, label]) => (
              <option value={k}>{label}</option>
            ))}
          </select>
        </label>
        <label class="dash-refresh">
          Refresh
          <select data-testid="refresh" value={refresh} onChange={(e) => setParams({ refresh: e.currentTarget.value })}>
            {REFRESH.map(([k, label]) => (
              <option value={k}>{label}</option>
            ))}
          </select>
        </label>
        <button type="button" onClick={() => setTick((n) => n + 1)}>
          Refresh now
        </button>
      </div>
      <p class="hint">{dash.description}</p>
      <div class="dash-grid" data-range={ctx.end - ctx.start} data-step={ctx.step} data-rate-interval={ctx.builtins.$__rate_interval}>
        {panels.map((p) =>
          p.type === 'row' ? (
            <h2 class="dash-row" style={{ gridColumn: '1 / span 24', gridRow: `${(p.gridPos?.y || 0) + 1} / span 1` }}>
              {p.title}
            </h2>
          ) : (
            <Panel key={p.id} panel={p} ctx={ctx} tick={tick} />
          ),
        )}
      </div>
    </>
  );
}

// Dashboards is /dashboards (the first dashboard, Inference) and
// /dashboards/UID.
export default function Dashboards({ uid: chosen }) {
  const { data: index, error } = usePoll(() => bearer('GET', DASHBOARDS), [], 0);
  const uid = chosen || index?.dashboards?.[0]?.uid;
  return (
    <section class="dashboards">
      <h1>Dashboards</h1>
      <p class="hint">
        capstan's Grafana dashboards, drawn from capstan's own metric store (scraped every {index?.scrapeInterval || '…'}, kept for{' '}
        {index?.retention || '…'}); the same panels and PromQL as <code>capstan observability dashboards</code>. Grafana can read the same
        store: a Prometheus datasource at <code>{location.origin + (index?.datasource || '/prometheus')}</code>.
      </p>
      <ErrorBox error={error} />
      {index ? (
        <nav class="dash-tabs" aria-label="Dashboards">
          {index.dashboards.map((d) => (
            <Link href={'/dashboards/' + d.uid + keepTime()} aria-current={d.uid === uid ? 'page' : undefined}>
              {d.title.replace(/^capstan \/ /, '')}
            </Link>
          ))}
        </nav>
      ) : null}
      {index && uid ? <Dashboard key={uid} index={index} uid={uid} /> : null}
    </section>
  );
}

// keepTime carries the time range and refresh to another dashboard (the
// dashboards' links set keepTime), not the variables.
function keepTime() {
  const p = new URLSearchParams(location.search);
  const q = new URLSearchParams();
  for (const k of ['from', 'refresh']) if (p.has(k)) q.set(k, p.get(k));
  const s = q.toString();
  return s ? '?' + s : '';
}
