// The endpoint page's actions: a form per variant that sends
// UpdateEndpointWeightsAndCapacities, and Delete behind a dialog that asks
// for the endpoint's name.
import { useEffect, useRef, useState } from 'preact/hooks';
import { sagemaker } from '../api.js';
import { ErrorBox, Field, useSubmit } from '../components.jsx';
import { navigate } from '../router.jsx';

// fieldOf says which of a variant form's fields the server's error is
// about: the member path of a validation error
// ("desiredWeightsAndCapacities.1.member.desiredInstanceCount"), else the
// words of the message; null when it names none.
export function fieldOf(error) {
  const msg = String((error && error.message) || '');
  const m = msg.match(/desiredWeightsAndCapacities\.\d+\.member\.([A-Za-z.]+)/);
  const path = m ? m[1].toLowerCase() : '';
  if (path.includes('maxconcurrency')) return 'max';
  if (path.includes('provisionedconcurrency')) return 'provisioned';
  if (path.includes('desiredweight')) return 'weight';
  if (path.includes('desiredinstancecount')) return 'count';
  if (/weight/i.test(msg)) return 'weight';
  if (/provisioned/i.test(msg)) return 'provisioned';
  if (/concurrency|serverless/i.test(msg)) return 'max';
  if (/instance|capacity|count|reservation|plan/i.test(msg)) return 'count';
  return null;
}

// onSubmit stops the browser's own submission on every submit, the ones
// useSubmit ignores while a call is in flight included (else a second click
// would reload the page), then runs submit.
const onSubmit = (submit) => (e) => {
  e.preventDefault();
  submit();
};

const str = (v) => (v == null ? '' : String(v));

// VariantForm changes one variant's desired weight and instance count (or,
// serverless, its concurrency). Fields left empty are not sent.
function VariantForm({ endpoint, variant, onDone }) {
  const serverless = !!(variant.DesiredServerlessConfig || variant.CurrentServerlessConfig);
  const sc = variant.DesiredServerlessConfig || variant.CurrentServerlessConfig || {};
  const initial = () => ({
    weight: str(variant.DesiredWeight),
    count: str(variant.DesiredInstanceCount),
    max: str(sc.MaxConcurrency),
    provisioned: str(sc.ProvisionedConcurrency),
  });
  const [form, setForm] = useState(initial);
  const [error, setError] = useState(null);
  const [done, setDone] = useState('');
  const id = (f) => `update-${variant.VariantName}-${f}`;
  const set = (k) => (e) => {
    setForm({ ...form, [k]: e.currentTarget.value });
    setDone('');
  };
  const [submit, busy] = useSubmit(async () => {
    setError(null);
    setDone('');
    const d = { VariantName: variant.VariantName };
    const num = (s) => (s.trim() === '' ? undefined : Number(s));
    if (num(form.weight) !== undefined) d.DesiredWeight = num(form.weight);
    if (serverless) {
      const u = {};
      if (num(form.max) !== undefined) u.MaxConcurrency = num(form.max);
      if (num(form.provisioned) !== undefined) u.ProvisionedConcurrency = num(form.provisioned);
      if (Object.keys(u).length) d.ServerlessUpdateConfig = u;
    } else if (num(form.count) !== undefined) {
      d.DesiredInstanceCount = num(form.count);
    }
    try {
      await sagemaker('UpdateEndpointWeightsAndCapacities', {
        EndpointName: endpoint,
        DesiredWeightsAndCapacities: [d],
      });
      setDone('Update accepted: the endpoint is Updating.');
      onDone();
    } catch (err) {
      setError(err);
    }
  });
  const where = error ? fieldOf(error) : null;
  const errText = (f) => (where === f ? `${error.code}: ${error.message}` : undefined);
  return (
    <form class="card endpoint-variant-form" onSubmit={onSubmit(submit)} noValidate data-testid={'update-' + variant.VariantName}>
      <h3>Variant {variant.VariantName}</h3>
      <div class="form-grid">
        <Field id={id('weight')} label="Desired weight" error={errText('weight')} hint={`Now ${str(variant.CurrentWeight) || '—'}`}>
          <input
            id={id('weight')}
            type="number"
            step="any"
            inputMode="decimal"
            value={form.weight}
            onInput={set('weight')}
            aria-describedby={`${id('weight')}-hint` + (where === 'weight' ? ` ${id('weight')}-error` : '')}
            aria-invalid={where === 'weight' ? 'true' : undefined}
          />
        </Field>
        {serverless ? (
          <>
            <Field id={id('max')} label="Max concurrency" error={errText('max')}>
              <input id={id('max')} type="number" step="1" inputMode="numeric" value={form.max} onInput={set('max')}
                aria-invalid={where === 'max' ? 'true' : undefined} />
            </Field>
            <Field id={id('provisioned')} label="Provisioned concurrency" error={errText('provisioned')}>
              <input id={id('provisioned')} type="number" step="1" inputMode="numeric" value={form.provisioned}
                onInput={set('provisioned')} aria-invalid={where === 'provisioned' ? 'true' : undefined} />
            </Field>
          </>
        ) : (
          <Field id={id('count')} label="Desired instance count" error={errText('count')}
            hint={`Now ${str(variant.CurrentInstanceCount) || '0'} running`}>
            <input
              id={id('count')}
              type="number"
              step="1"
              inputMode="numeric"
              value={form.count}
              onInput={set('count')}
              aria-describedby={`${id('count')}-hint` + (where === 'count' ? ` ${id('count')}-error` : '')}
              aria-invalid={where === 'count' ? 'true' : undefined}
            />
          </Field>
        )}
      </div>
      {error && !where ? <ErrorBox error={error} /> : null}
      <div class="toolbar">
        <button type="submit" disabled={busy}>
          {busy ? 'Updating…' : 'Update'}
        </button>
        {done ? (
          <span class="hint" role="status" data-testid={'update-done-' + variant.VariantName}>
            {done}
          </span>
        ) : null}
      </div>
    </form>
  );
}

export function UpdateForms({ endpoint, variants, onDone }) {
  if (!variants.length) return <p class="empty">No deployed variants to change yet.</p>;
  return (
    <>
      {variants.map((v) => (
        <VariantForm key={v.VariantName} endpoint={endpoint} variant={v} onDone={onDone} />
      ))}
    </>
  );
}

// DeleteEndpoint opens a dialog that deletes once the name is typed.
export function DeleteEndpoint({ name }) {
  const dialog = useRef(null);
  const [typed, setTyped] = useState('');
  const [error, setError] = useState(null);
  const [open, setOpen] = useState(false);
  useEffect(() => {
    const d = dialog.current;
    if (!d) return;
    if (open && !d.open) d.showModal();
    if (!open && d.open) d.close();
  }, [open]);
  const [submit, busy] = useSubmit(async () => {
    if (typed !== name) return;
    setError(null);
    try {
      await sagemaker('DeleteEndpoint', { EndpointName: name });
      setOpen(false);
      navigate('/endpoints');
    } catch (err) {
      setError(err);
    }
  });
  return (
    <>
      <button type="button" class="danger" data-testid="delete-endpoint" onClick={() => { setTyped(''); setError(null); setOpen(true); }}>
        Delete endpoint…
      </button>
      <dialog ref={dialog} aria-labelledby="delete-title" onClose={() => setOpen(false)} data-testid="delete-dialog">
        <form onSubmit={onSubmit(submit)} noValidate>
          <h2 id="delete-title">Delete {name}?</h2>
          <p>
            Its replicas stop and its instances are released; requests to it fail. Its endpoint configuration and
            model stay.
          </p>
          <Field id="delete-confirm" label={`Type the endpoint's name (${name}) to confirm`}>
            <input id="delete-confirm" autocomplete="off" value={typed} onInput={(e) => setTyped(e.currentTarget.value)} />
          </Field>
          <ErrorBox error={error} />
          <div class="toolbar">
            <button type="submit" class="danger" disabled={busy || typed !== name} data-testid="delete-confirm-button">
              {busy ? 'Deleting…' : 'Delete'}
            </button>
            <button type="button" class="secondary" onClick={() => setOpen(false)}>
              Cancel
            </button>
          </div>
        </form>
      </dialog>
    </>
  );
}
