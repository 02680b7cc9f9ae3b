// Pieces the training-plan pages share: the reservable instance types, time
// left by the server's clock, and mapping a SageMaker ValidationException to
// the form field it names.
import { serverNow } from '../api.js';
import { fmtDuration, toDate } from '../components.jsx';

// The GPU types SearchTrainingPlanOfferings accepts that capstan's catalog
// holds (internal/catalog/data/instance_types.yaml, trainingPlan: true).
export const PLAN_INSTANCE_TYPES = [
  ['ml.p5.48xlarge', '8× H100'],
  ['ml.p5.4xlarge', '1× H100'],
  ['ml.p5e.48xlarge', '8× H200'],
  ['ml.p5en.48xlarge', '8× H200'],
  ['ml.p4d.24xlarge', '8× A100 40GB'],
  ['ml.p4de.24xlarge', '8× A100 80GB'],
  ['ml.p6-b200.48xlarge', '8× B200'],
];

export const PLAN_TARGETS = [
  ['endpoint', 'SageMaker endpoints'],
  ['hyperpod-cluster', 'HyperPod clusters'],
];

export const DAY_MS = 24 * 3600 * 1000;

// planTiming says where a plan stands by the server's clock: ms left until
// its end (null: no end), whether it has ended, and whether it ends within a
// day.
export function planTiming(plan, now = serverNow()) {
  const end = toDate(plan.EndTime);
  const start = toDate(plan.StartTime);
  const left = end ? end.getTime() - now.getTime() : null;
  const expired = plan.Status === 'Expired' || (left != null && left <= 0);
  const untilStart = start ? start.getTime() - now.getTime() : null;
  return { left, expired, expiring: !expired && left != null && left < DAY_MS, untilStart };
}

export function timeLeftText(plan, now) {
  const t = planTiming(plan, now);
  if (t.expired) return 'Expired';
  if (t.left == null) return '—';
  return fmtDuration(t.left);
}

// fields of the purchase form, by the names SageMaker's messages use (the
// members in validation lists are camelCase, the service's own messages use
// the member names).
const FIELD_NAMES = [
  ['instancecount', 'count'],
  ['durationhours', 'duration'],
  ['duration ', 'duration'],
  ['instancetype', 'type'],
  ['instance type', 'type'],
  ['targetresources', 'target'],
  ['endtimebefore', 'end'],
  ['starttimeafter', 'start'],
  ['trainingplanname', 'name'],
  ['trainingplanofferingid', 'offering'],
];

// fieldErrors splits a ValidationException message into the form fields it
// names: {count: '…', end: '…'}; what names no field is under ''. A message
// naming several fields (StartTimeAfter … must be before EndTimeBefore …)
// goes to the first in FIELD_NAMES' order (the end, for a reversed window).
export function fieldErrors(error, extra = {}) {
  if (!error) return {};
  const msg = error.message || '';
  const out = {};
  const m = msg.match(/^\d+ validation errors? detected: (.*)$/s);
  const parts = m ? m[1].split(/; (?=Value )/) : [msg];
  for (const part of parts) {
    const lower = part.toLowerCase();
    let field = '';
    for (const [name, f] of Object.entries(extra)) {
      if (lower.includes(name)) {
        field = f;
        break;
      }
    }
    if (!field) {
      for (const [name, f] of FIELD_NAMES) {
        if (lower.includes(name)) {
          field = f;
          break;
        }
      }
    }
    const text = (error.code ? error.code + ': ' : '') + (m ? part : msg);
    out[field] = out[field] ? out[field] + ' ' + text : text;
  }
  return out;
}

// Date-time inputs hold UTC wall time ("2030-01-01T00:00").
export function toInputValue(d) {
  return d.toISOString().slice(0, 16);
}

export function fromInputValue(v) {
  if (!v) return null;
  const t = Date.parse(v.length === 16 ? v + ':00Z' : v + 'Z');
  return Number.isNaN(t) ? null : new Date(t);
}
