import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { getConfig, loadConfig, needsSignIn, session, setSession } from './api.js';
import { ErrorBox, Field, useSubmit } from './components.jsx';
import { BASE, Link, currentPath, match, navigate, useRoute } from './router.jsx';
import Apply from './pages/Apply.jsx';
import ClusterDetail from './pages/ClusterDetail.jsx';
import ClusterNew from './pages/ClusterNew.jsx';
import Clusters from './pages/Clusters.jsx';
import Dashboards from './pages/Dashboards.jsx';
import DeploymentDetail from './pages/DeploymentDetail.jsx';
import Deployments from './pages/Deployments.jsx';
import EndpointDetail from './pages/EndpointDetail.jsx';
import Endpoints from './pages/Endpoints.jsx';
import PlanDetail from './pages/PlanDetail.jsx';
import PlanNew from './pages/PlanNew.jsx';
import Plans from './pages/Plans.jsx';
import Spaces from './pages/Spaces.jsx';
import './style.css';

// Routes in order: the first match wins ("/plans/new" before "/plans/:name").
const routes = [
  ['/endpoints', Endpoints],
  ['/endpoints/:name', EndpointDetail],
  ['/plans', Plans],
  ['/plans/new', PlanNew],
  ['/plans/:name', PlanDetail],
  ['/clusters', Clusters],
  ['/clusters/new', ClusterNew],
  ['/clusters/:name', ClusterDetail],
  ['/deployments', Deployments],
  ['/deployments/:kind/:namespace/:name', DeploymentDetail],
  ['/spaces', Spaces],
  ['/dashboards', Dashboards],
  ['/dashboards/:uid', Dashboards],
  ['/apply', Apply],
];

const nav = [
  ['/endpoints', 'Endpoints'],
  ['/plans', 'Training plans'],
  ['/clusters', 'Clusters'],
  ['/deployments', 'Deployments'],
  ['/spaces', 'Spaces'],
  ['/dashboards', 'Dashboards'],
  ['/apply', 'Apply manifest'],
];

function SignIn() {
  const cfg = getConfig();
  const [form, setForm] = useState({ accessKeyId: '', secretAccessKey: '', adminToken: '' });
  const [submit, busy] = useSubmit(async () => {
    setSession({ ...form });
    navigate('/endpoints', true);
  });
  const set = (k) => (e) => setForm({ ...form, [k]: e.currentTarget.value });
  return (
    <section class="signin">
      <h1>Sign in</h1>
      <p>
        This server has credentials configured. The console signs its API calls with them (SigV4 for the SageMaker
        and CloudWatch APIs, the admin token for manifests and nodes); they stay in this tab.
      </p>
      <form
        onSubmit={(e) => {
          // Always: a click that useSubmit ignores must not submit the form natively either.
          e.preventDefault();
          submit();
        }}
      >
        {cfg.auth.sigv4 ? (
          <>
            <Field id="accessKeyId" label="Access key ID">
              <input id="accessKeyId" autocomplete="username" required value={form.accessKeyId} onInput={set('accessKeyId')} />
            </Field>
            <Field id="secretAccessKey" label="Secret access key">
              <input id="secretAccessKey" type="password" autocomplete="current-password" required value={form.secretAccessKey} onInput={set('secretAccessKey')} />
            </Field>
          </>
        ) : null}
        {cfg.auth.adminToken ? (
          <Field id="adminToken" label="Admin token" hint="One of adminTokens in capstan.yaml: manifests, clusters' nodes.">
            <input id="adminToken" type="password" required value={form.adminToken} onInput={set('adminToken')} />
          </Field>
        ) : null}
        <button type="submit" disabled={busy}>
          Sign in
        </button>
      </form>
    </section>
  );
}

function App() {
  const path = useRoute();
  const [, setTick] = useState(0);
  useEffect(() => {
    const on = () => setTick((t) => t + 1);
    window.addEventListener('capstan-session', on);
    return () => window.removeEventListener('capstan-session', on);
  }, []);
  const cfg = getConfig();
  const signedIn = session() != null;
  let page = null;
  if (needsSignIn()) {
    page = <SignIn />;
  } else {
    for (const [pattern, Page] of routes) {
      const params = match(pattern, path);
      if (params) {
        page = <Page {...params} />;
        break;
      }
    }
    if (!page && (path === '/' || path === '')) {
      // The front page is the endpoints list. start() rewrites the URL before
      // the first render; this covers a history entry that still says
      // /console/. Never navigate() here: an event dispatched during render
      // reaches no listener yet (useRoute subscribes in an effect).
      page = <Endpoints />;
    }
    if (!page) {
      page = (
        <section>
          <h1>Not found</h1>
          <p>
            Nothing here: <code>{path}</code>. <Link href="/endpoints">Endpoints</Link>
          </p>
        </section>
      );
    }
  }
  return (
    <>
      <a class="skip" href="#main">
        Skip to content
      </a>
      <header>
        <Link href="/endpoints" class="brand">
          capstan
        </Link>
        <nav aria-label="Sections">
          {nav.map(([href, label]) => (
            <Link href={href} aria-current={path.startsWith(href) ? 'page' : undefined}>
              {label}
            </Link>
          ))}
        </nav>
        <span class="who">
          {cfg.devClock ? <span class="badge">dev clock</span> : null}
          {signedIn ? (
            <button class="link" onClick={() => setSession(null)}>
              Sign out
            </button>
          ) : null}
        </span>
      </header>
      <main id="main">{page}</main>
    </>
  );
}

async function start() {
  const root = document.getElementById('app');
  try {
    await loadConfig();
  } catch (error) {
    render(<ErrorBox error={error} />, root);
    return;
  }
  // Keep the server's clock current (a dev clock moves in jumps).
  setInterval(() => loadConfig().catch(() => {}), 5000);
  // The front page (/console/, the link README prints) is the endpoints
  // list: say so in the URL before the first render, so the nav marks it.
  if (currentPath() === '/') history.replaceState(null, '', BASE + '/endpoints');
  render(<App />, root);
}

start();
