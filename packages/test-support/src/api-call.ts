/**
 * A control-API call to `base` with `apiKey`: status, headers and the parsed body (the text when
 * it is not JSON). A string body is sent as it is, anything else as JSON.
 */
export async function callApi(
  base: string,
  apiKey: string,
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
) {
  const r = await fetch(`${base}${path}`, {
    method,
    headers: {
      'x-api-key': apiKey,
      ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
      ...headers,
    },
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await r.text();
  let json: unknown;
  try {
    json = text ? JSON.parse(text) : undefined;
  } catch {
    json = text;
  }
  return { status: r.status, headers: r.headers, json: json as Record<string, unknown> & unknown[] };
}
