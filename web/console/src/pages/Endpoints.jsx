// The Endpoints list: every endpoint ListEndpoints gives (all pages, 100 a
// call), newest first. Nothing is described per row, so the page stays one
// or two calls however many endpoints there are; an endpoint's variants,
// counts and plan are on its own page.
import { useMemo, useState } from 'preact/hooks';
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

const columns = [
  {
    title: 'Name',
    render: (e) => <Link href={'/endpoints/' + encodeURIComponent(e.EndpointName)}>{e.EndpointName}</Link>,
  },
  { title: 'Status', render: (e) => <Status value={e.EndpointStatus} /> },
  { title: 'Created', render: (e) => fmtDate(e.CreationTime) },
  { title: 'Last modified', render: (e) => fmtDate(e.LastModifiedTime) },
];

export default function Endpoints() {
  const { data, error, loading } = usePoll(listAllEndpoints, []);
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
        HyperPod manifests. Open one for its variants, live metrics and actions.
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
          columns={columns}
          rows={rows}
          label="Endpoints"
          testid="endpoints"
          empty={filter ? 'No endpoint matches the filter.' : 'No endpoints yet.'}
        />
      )}
    </section>
  );
}
