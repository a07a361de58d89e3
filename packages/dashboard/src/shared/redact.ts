/**
 * Field names that hold credentials in API bodies (envdAccessToken, trafficAccessToken, an
 * upload's x-api-key header, registry passwords). The dashboard drops them from whatever it
 * keeps, so no view can render one.
 */
const SECRET_KEY = /token|secret|password|api[-_]?key|authorization|credential/i;

/** A deep copy of `value` without secret-named fields. */
export function redactSecrets<T>(value: T): T {
  if (Array.isArray(value)) return value.map((v) => redactSecrets(v)) as T;
  if (value && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) if (!SECRET_KEY.test(k)) out[k] = redactSecrets(v);
    return out as T;
  }
  return value;
}
