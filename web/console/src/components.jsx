// Pieces every page uses: polling, errors, tables, form fields and buttons
// that cannot submit twice, status badges, charts and formatters.
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';

// usePoll runs load now and every intervalMs (0: once) while the page is
// shown; reload runs it again at once. A failed load keeps the last data.
export function usePoll(load, deps, intervalMs = 5000) {
  const [state, setState] = useState({ data: null, error: null, loading: true });
  const seq = useRef(0);
  const run = useCallback(async () => {
    const id = ++seq.current;
    try {
      const data = await load();
      if (id === seq.current) setState({ data, error: null, loading: false });
    } catch (error) {
      if (id === seq.current) setState((s) => ({ data: s.data, error, loading: false }));
    }
  }, deps);
  useEffect(() => {
    run();
    if (!intervalMs) return undefined;
    const t = setInterval(run, intervalMs);
    return () => {
      clearInterval(t);
      seq.current++;
    };
  }, [run, intervalMs]);
  return { ...state, reload: run };
}

// ErrorBox shows an API error as the server worded it, code first.
export function ErrorBox({ error }) {
  if (!error) return null;
  return (
    <div class="error" role="alert" data-testid="error">
      {error.code ? <strong>{error.code}: </strong> : null}
      {error.message}
    </div>
  );
}

// Field is a labelled input whose error (the server's, for this field) is
// shown next to it and announced to screen readers.
export function Field({ id, label, error, hint, children }) {
  return (
    <div class={'field' + (error ? ' invalid' : '')}>
      <label for={id}>{label}</label>
      {children}
      {hint ? (
        <small id={id + '-hint'} class="hint">
          {hint}
        </small>
      ) : null}
      {error ? (
        <span id={id + '-error'} class="field-error" role="alert" data-testid={'error-' + id}>
          {error}
        </span>
      ) : null}
    </div>
  );
}

// useSubmit wraps an async action so that a second click while it runs does
// nothing: nothing is submitted twice on a double click.
export function useSubmit(action) {
  const [busy, setBusy] = useState(false);
  const inFlight = useRef(false);
  const submit = useCallback(
    async (...args) => {
      if (inFlight.current) return undefined;
      inFlight.current = true;
      setBusy(true);
      try {
        return await action(...args);
      } finally {
        inFlight.current = false;
        setBusy(false);
      }
    },
    [action],
  );
  return [submit, busy];
}

// Table renders rows with a header; empty shows a line instead.
export function Table({ columns, rows, empty = 'None yet.', label, testid }) {
  if (!rows || rows.length === 0) return <p class="empty">{empty}</p>;
  return (
    <div class="table-wrap">
      <table aria-label={label} data-testid={testid}>
        <thead>
          <tr>
            {columns.map((c) => (
              <th scope="col">{c.title}</th>
            ))}
          </tr>
        </thead>
        <tbody>
          {rows.map((r, i) => (
            <tr key={r.key || i}>
              {columns.map((c) => (
                <td data-label={c.title}>{c.render ? c.render(r) : r[c.key]}</td>
              ))}
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

const tone = {
  InService: 'ok', Active: 'ok', Running: 'ok', Ready: 'ok', DeploymentComplete: 'ok', true: 'ok',
  Creating: 'busy', Updating: 'busy', Scheduled: 'busy', Pending: 'busy', SystemUpdating: 'busy', DeploymentInProgress: 'busy', RollingBack: 'busy', Deleting: 'busy',
  Failed: 'bad', Expired: 'bad', OutOfService: 'bad', DeploymentFailed: 'bad', ShutDown: 'bad',
};

export function Status({ value }) {
  return <span class={'status ' + (tone[value] || 'neutral')}>{String(value ?? '—')}</span>;
}

// Chart draws time series with uPlot. series: [{label, values}], x: epoch
// seconds. It redraws in place when the data changes.
export function Chart({ title, x, series, unit = '', height = 180, testid }) {
  const box = useRef(null);
  const plot = useRef(null);
  useEffect(() => {
    if (!box.current) return undefined;
    const width = Math.max(240, box.current.clientWidth || 480);
    const colors = ['#2563eb', '#dc2626', '#16a34a', '#9333ea', '#ea580c'];
    const opts = {
      width,
      height,
      series: [{}, ...series.map((s, i) => ({ label: s.label, stroke: colors[i % colors.length], width: 2 }))],
      axes: [{}, { values: (u, v) => v.map((n) => (n == null ? '' : fmtNumber(n) + unit)) }],
      legend: { live: false },
    };
    const data = [x, ...series.map((s) => s.values)];
    if (plot.current) plot.current.destroy();
    plot.current = new uPlot(opts, data, box.current);
    return undefined;
  }, [x, series, height, unit]);
  useEffect(() => () => plot.current && plot.current.destroy(), []);
  const points = series.reduce((n, s) => n + s.values.filter((v) => v != null).length, 0);
  return (
    <figure class="chart" data-testid={testid} data-points={points}>
      <figcaption>{title}</figcaption>
      <div ref={box} />
      {points === 0 ? <p class="empty">No data in this window.</p> : null}
    </figure>
  );
}

export function fmtNumber(n) {
  if (n == null || Number.isNaN(n)) return '—';
  const a = Math.abs(n);
  if (a >= 1e6) return (n / 1e6).toFixed(1) + 'M';
  if (a >= 1e3) return (n / 1e3).toFixed(1) + 'k';
  if (a >= 10 || a === 0) return String(Math.round(n));
  return n.toFixed(2);
}

// Timestamps arrive as epoch seconds (JSON protocols) or ISO strings.
export function toDate(t) {
  if (t == null || t === '') return null;
  return typeof t === 'number' ? new Date(t * 1000) : new Date(t);
}

export function fmtDate(t) {
  const d = toDate(t);
  return d ? d.toISOString().replace('T', ' ').replace(/:\d\d\.\d+Z$/, ' UTC') : '—';
}

export function fmtDuration(ms) {
  if (ms == null) return '—';
  const neg = ms < 0;
  let s = Math.floor(Math.abs(ms) / 1000);
  const d = Math.floor(s / 86400);
  s -= d * 86400;
  const h = Math.floor(s / 3600);
  s -= h * 3600;
  const m = Math.floor(s / 60);
  const parts = d ? [`${d}d`, `${h}h`] : h ? [`${h}h`, `${m}m`] : [`${m}m`, `${s - m * 60}s`];
  return (neg ? '-' : '') + parts.join(' ');
}

export function fmtMoney(amount, currency = 'USD') {
  const n = Number(amount);
  if (Number.isNaN(n)) return '—';
  return n.toLocaleString('en-US', { style: 'currency', currency: currency || 'USD' });
}
