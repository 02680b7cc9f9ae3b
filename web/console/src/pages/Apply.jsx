// Apply a manifest: the YAML goes to POST …/apply as `capstan apply -f`
// sends it (Content-Type application/yaml). What became of each object is
// listed with links; a refusal lists every cause with the field it names,
// right under the text.
import { useState } from 'preact/hooks';
import { MANIFESTS, WORKSPACES, bearer } from '../api.js';
import { Field, useSubmit } from '../components.jsx';
import { Link } from '../router.jsx';
import { APPLY_DRAFT, deploymentHref, shortKind } from './ClustersShared.jsx';
import './Clusters.css';

const EXAMPLE = `apiVersion: inference.sagemaker.aws.amazon.com/v1
kind: JumpStartModel
metadata: {name: demo}
spec:
  sageMakerEndpoint: {name: demo}
  model: {modelHubName: SageMakerPublicHub, modelId: deepseek-llm-r1-distill-qwen-1-5b}
  server: {instanceType: ml.g5.8xlarge}
  autoScalingSpec: {minReplicaCount: 1, maxReplicaCount: 4, cooldownPeriod: 60}
`;

// The node API's apply takes NodePool and HyperpodNodeClass documents, the
// spaces API's Workspace and WorkspaceTemplate ones; `capstan apply` sends
// them there (spaces first, then nodes) before the body's other documents.
const NODE_APPLY = '/apis/karpenter.sh/v1/apply';
const NODE_API_VERSION = /(?:^\s*apiVersion\s*:|"apiVersion"\s*:)\s*["']?karpenter\.(?:sh|sagemaker\.amazonaws\.com)\//m;
const SPACE_APPLY = WORKSPACES + '/apply';
const SPACE_API_VERSION = /(?:^\s*apiVersion\s*:|"apiVersion"\s*:)\s*["']?workspace\.jupyter\.org\//m;

// splitDocuments cuts the text at "---" lines (as the server does) into the
// spaces API's documents, the node API's and the rest; null when there are
// none of the first two, so the body goes to the manifests API as typed.
export function splitDocuments(text) {
  const docs = [];
  let cur = [];
  for (const ln of text.split('\n')) {
    if (/^---(\s|$)/.test(ln)) {
      docs.push(cur.join('\n'));
      cur = [ln.slice(3).replace(/^\s*#.*$/, '')];
      continue;
    }
    cur.push(ln);
  }
  docs.push(cur.join('\n'));
  const meaningful = (d) => d.split('\n').some((l) => l.trim() && !l.trim().startsWith('#') && l.trim() !== '...');
  const kept = docs.filter(meaningful);
  const spaces = kept.filter((d) => SPACE_API_VERSION.test(d));
  const nodes = kept.filter((d) => NODE_API_VERSION.test(d));
  if (!spaces.length && !nodes.length) return null;
  const rest = kept.filter((d) => !SPACE_API_VERSION.test(d) && !NODE_API_VERSION.test(d));
  return { spaces: spaces.join('\n---\n'), nodes: nodes.join('\n---\n'), rest: rest.join('\n---\n') };
}

function takeDraft() {
  const d = sessionStorage.getItem(APPLY_DRAFT);
  if (d != null) sessionStorage.removeItem(APPLY_DRAFT);
  return d || '';
}

// where says which document a cause is in, when the body has several or
// the server gave a line.
function where(c, split) {
  const parts = [];
  if (c.object) parts.push(c.object);
  if (!split && c.document != null) parts.push(`document ${c.document + 1}`);
  if (!split && c.line) parts.push(`line ${c.line}`);
  return parts.join(', ');
}

export default function Apply() {
  const [text, setText] = useState(takeDraft);
  const [namespace, setNamespace] = useState('');
  const [result, setResult] = useState(null);
  const [error, setError] = useState(null);

  const [submit, busy] = useSubmit(async () => {
    setError(null);
    setResult(null);
    try {
      const q = namespace.trim() ? '?namespace=' + encodeURIComponent(namespace.trim()) : '';
      const split = splitDocuments(text);
      let items = [];
      if (split) {
        // Line and document numbers in errors count within the part sent.
        for (const [part, url, mark] of [
          [split.spaces, SPACE_APPLY + q, 'space'],
          [split.nodes, NODE_APPLY, 'node'],
        ]) {
          if (!part.trim()) continue;
          try {
            const res = await bearer('POST', url, part, 'application/yaml');
            items = items.concat((res.items || []).map((r) => ({ ...r, [mark]: true })));
          } catch (err) {
            err.split = true;
            if (items.length) err.applied = items;
            throw err;
          }
        }
        if (!split.rest.trim()) {
          setResult(items);
          return;
        }
      }
      try {
        const res = await bearer('POST', `${MANIFESTS}/apply${q}`, split ? split.rest : text, 'application/yaml');
        setResult(items.concat(res.items || []));
      } catch (err) {
        err.split = !!split;
        if (items.length) err.applied = items;
        throw err;
      }
    } catch (err) {
      setError(err);
      if (err.applied) setResult(err.applied);
    }
  });

  // A namespace problem belongs next to the namespace field.
  const nsError = error && !error.causes.length && /namespace/i.test(error.message) && namespace.trim() ? error : null;
  const textError = error && !nsError ? error : null;

  return (
    <section>
      <h1>Apply a manifest</h1>
      <p class="hint">
        InferenceEndpointConfig and JumpStartModel manifests, Workspace and WorkspaceTemplate ones (spaces), and Karpenter
        NodePool and HyperpodNodeClass ones, YAML or JSON, several separated by <code>---</code> — as{' '}
        <code>capstan apply -f</code> takes them. If any document is invalid, nothing of its kind is stored (spaces, then
        node documents, are applied first, as the CLI does).
      </p>
      <form
        noValidate
        onSubmit={(e) => {
          // Here, not in the action: a second submit that useSubmit drops
          // must not fall through to the browser's own form submission.
          e.preventDefault();
          submit();
        }}
      >
        <div class={'field clusters-wide' + (textError ? ' invalid' : '')}>
          <label for="manifest">Manifest YAML</label>
          <textarea
            id="manifest"
            class="clusters-manifest"
            spellcheck={false}
            autocomplete="off"
            value={text}
            placeholder={EXAMPLE}
            aria-invalid={textError ? 'true' : undefined}
            aria-describedby={textError ? 'apply-errors' : undefined}
            onInput={(e) => setText(e.currentTarget.value)}
          />
          {textError ? (
            <div role="alert" class="field-error">
              <strong>{textError.code}</strong>
              {textError.causes.length ? ` — ${textError.causes.length} problem${textError.causes.length > 1 ? 's' : ''}:` : ': ' + textError.message}
              <ul id="apply-errors" class="clusters-errors" data-testid="apply-errors">
                {textError.causes.length ? (
                  textError.causes.map((c) => (
                    <li>
                      {c.field ? (
                        <>
                          <code>{c.field}</code>: {c.message}
                        </>
                      ) : (
                        c.message
                      )}
                      {where(c, textError.split) ? <span class="clusters-where"> ({where(c, textError.split)})</span> : null}
                    </li>
                  ))
                ) : (
                  <li>{textError.message}</li>
                )}
              </ul>
            </div>
          ) : null}
        </div>
        <Field
          id="namespace"
          label="Namespace (optional)"
          hint="For documents that do not name one; default: default."
          error={nsError ? `${nsError.code}: ${nsError.message}` : null}
        >
          <input
            id="namespace"
            value={namespace}
            autocomplete="off"
            aria-describedby="namespace-hint"
            onInput={(e) => setNamespace(e.currentTarget.value)}
          />
        </Field>
        <div class="toolbar">
          <button type="submit" disabled={busy} data-testid="apply">
            {busy ? 'Applying…' : 'Apply'}
          </button>
          {!text ? (
            <button type="button" class="secondary" onClick={() => setText(EXAMPLE)}>
              Use the example
            </button>
          ) : null}
        </div>
      </form>
      {result ? (
        <div class="card" role="status">
          <h2>Applied</h2>
          <ul class="clusters-list" data-testid="apply-results">
            {result.map((r) => (
              <li>
                {r.kind}{' '}
                {r.node ? (
                  r.name
                ) : r.space ? (
                  <Link href="/spaces">
                    {r.namespace}/{r.name}
                  </Link>
                ) : shortKind(r.kind) ? (
                  <Link href={deploymentHref(r.kind, r.namespace, r.name)}>
                    {r.namespace}/{r.name}
                  </Link>
                ) : (
                  `${r.namespace}/${r.name}`
                )}{' '}
                <strong data-testid="apply-action">{r.action}</strong>
                {r.generation ? <span class="hint"> (generation {r.generation})</span> : null}
                {r.warnings && r.warnings.length ? (
                  <ul class="clusters-list">
                    {r.warnings.map((w) => (
                      <li class="flag warn">Warning: {w}</li>
                    ))}
                  </ul>
                ) : null}
              </li>
            ))}
          </ul>
        </div>
      ) : null}
    </section>
  );
}
