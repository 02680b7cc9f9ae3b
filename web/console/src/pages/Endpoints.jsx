// The Endpoints list: every endpoint ListEndpoints gives (all pages, 100 a
// call), newest first. The table shows as soon as the list arrives; each
// row's variants, instance counts and training plan come from a
// DescribeEndpoint made afterwards, a few at a time, and made again only when
// the endpoint's status or LastModifiedTime changes — so the page is two
// calls however many endpoints there are, and a poll of an unchanged list
// describes nothing.
import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import { sagemaker } from '../api.js';
import { ErrorBox, Status, Table, fmtDate, usePoll } from '../components.jsx';
import { Link } from '../router.jsx';
import './Endpoints.css';

// listAllEndpoints follows NextToken to the end.
export async function listAllEndpoints() {
  const all = [];
  let NextToken;
  do {
    const page = await sagemaker('ListEndpoints', {
      MaxResults: 100,
      SortBy: 'CreationTime',
      SortOrder: 'Descending',
      ...(NextToken ? { NextToken } : {}),
    });
    all.push(...(page.Endpoints || []));
    NextToken = page.NextToken;
  } while (NextToken);
  return all;
}

// describeConcurrency bounds the DescribeEndpoint calls in flight.
const describeConcurrency = 6;

const version = (e) => e.EndpointStatus + '@' + e.LastModifiedTime;

// useDetails describes the listed endpoints whose version it has not seen,
// describeConcurrency at a time, re-rendering at most once a frame; it
// returns name → DescribeEndpoint's answer.
function useDetails(list) {
  const cache = useRef(new Map());
  const [, setTick] = useState(0);
  useEffect(() => {
    if (!list) return undefined;
    let cancelled = false;
    let frame = 0;
    const redraw = () => {
      if (!frame) frame = requestAnimationFrame(() => ((frame = 0), setTick((t) => t + 1)));
    };
    const todo = list.filter((e) => {
      const c = cache.current.get(e.EndpointName);
      return !c || c.version !== version(e);
    });
    let next = 0;
    const worker = async () => {
      while (!cancelled && next < todo.length) {
        const e = todo[next++];
        try {
          const d = await sagemaker('DescribeEndpoint', { EndpointName: e.EndpointName });
          cache.current.set(e.EndpointName, { version: version(e), d });
          redraw();
        } catch {
          // Deleted meanwhile: the next list drops it.
        }
      }
    };
    for (let i = 0; i < describeConcurrency; i++) worker();
    return () => {
      cancelled = true;
      if (frame) cancelAnimationFrame(frame);
    };
  }, [list]);
  return cache.current;
}

const planName = (arn) => (arn ? arn.slice(arn.lastIndexOf('/') + 1) : '');

function variantsOf(d) {
  return [...(d.ProductionVariants || [])];
}

function Instances({ d }) {
  const vs = variantsOf(d);
  if (vs.length && vs.every((v) => v.CurrentServerlessConfig || v.DesiredServerlessConfig)) return <span>serverless</span>;
  const cur = vs.reduce((n, v) => n + (v.CurrentInstanceCount || 0), 0);
  const want = vs.reduce((n, v) => n + (v.DesiredInstanceCount || 0), 0);
  return <span>{cur === want ? cur : `${cur} → ${want}`}</span>;
}

function Plans({ d }) {
  const names = [
    ...new Set(
      variantsOf(d)
        .map((v) => v.CapacityReservationConfig && planName(v.CapacityReservationConfig.MlReservationArn))
        .filter(Boolean),
    ),
  ];
  if (names.length === 0) return <span class="hint">on-demand</span>;
  return names.map((n, i) => (
    <>
      {i ? ', ' : ''}
      <Link href={'/plans/' + encodeURIComponent(n)}>{n}</Link>
    </>
  ));
}

function columns(details) {
  const detail = (render) => (e) => {
    const c = details.get(e.EndpointName);
    return c ? render(c.d) : <span class="hint">…</span>;
  };
  return [
    {
      title: 'Name',
      render: (e) => <Link href={'/endpoints/' + encodeURIComponent(e.EndpointName)}>{e.EndpointName}</Link>,
    },
    { title: 'Status', render: (e) => <Status value={e.EndpointStatus} /> },
    { title: 'Variants', render: detail((d) => variantsOf(d).map((v) => v.VariantName).join(', ') || '—') },
    { title: 'Instances', render: detail((d) => <Instances d={d} />) },
    { title: 'Training plan', render: detail((d) => <Plans d={d} />) },
    { title: 'Created', render: (e) => fmtDate(e.CreationTime) },
    { title: 'Last modified', render: (e) => fmtDate(e.LastModifiedTime) },
  ];
}

export default function Endpoints() {
  const { data, error, loading } = usePoll(listAllEndpoints, []);
  const details = useDetails(data);
  const [filter, setFilter] = useState('');
  const rows = useMemo(() => {
    const f = filter.trim().toLowerCase();
    return (data || [])
      .filter((e) => !f || e.EndpointName.toLowerCase().includes(f))
      .map((e) => ({ ...e, key: e.EndpointName }));
  }, [data, filter]);
  const counts = useMemo(() => {
    const c = {};
    for (const e of data || []) c[e.EndpointStatus] = (c[e.EndpointStatus] || 0) + 1;
    return c;
  }, [data]);
  return (
    <section>
      <h1>Endpoints</h1>
      <p class="hint">
        SageMaker endpoints this server runs: create them with the AWS CLI or SDKs (<code>create-endpoint</code>) or
        HyperPod manifests. Open one for its configuration, live metrics and actions.
      </p>
      <ErrorBox error={error} />
      <div class="toolbar">
        <div class="field endpoints-filter">
          <label for="endpoints-filter">Filter by name</label>
          <input
            id="endpoints-filter"
            type="search"
            value={filter}
            onInput={(e) => setFilter(e.currentTarget.value)}
            placeholder="name contains…"
          />
        </div>
        {data ? (
          <p class="endpoints-counts" data-testid="endpoints-count" aria-live="polite">
            {data.length} endpoint{data.length === 1 ? '' : 's'}
            {Object.keys(counts).length
              ? ' — ' +
                Object.entries(counts)
                  .map(([s, n]) => `${n} ${s}`)
                  .join(', ')
              : ''}
          </p>
        ) : null}
      </div>
      {loading && !data ? (
        <p class="empty">Loading…</p>
      ) : (
        <Table
          columns={columns(details)}
          rows={rows}
          label="Endpoints"
          testid="endpoints"
          empty={filter ? 'No endpoint matches the filter.' : 'No endpoints yet.'}
        />
      )}
    </section>
  );
}
