import type { IncomingHttpHeaders } from 'node:http';

/** A node of the cluster as the gateway knows it. */
export interface ClusterNode {
  nodeID: string;
  /** Its API base URL (the advertise URL), e.g. http://10.0.0.5:8000. */
  url: string;
  /** ready, draining, connecting or unhealthy: only ready and draining nodes are asked. */
  status: string;
  /** The node as the gateway's GET /nodes shows it. */
  info: Record<string, unknown>;
}

/** Nodes that hold sandboxes and answer: the ones a merged answer is asked of. */
export const askable = (nodes: readonly ClusterNode[]) =>
  nodes.filter((n) => n.status === 'ready' || n.status === 'draining');

/** A node's answer, or why there is none. */
export type NodeResult<T> =
  | { node: ClusterNode; ok: true; body: T }
  | { node: ClusterNode; ok: false; status: number; message: string };

const CALL_TIMEOUT_MS = 10_000;

/** The request headers a call to a node carries on the client's behalf: its key, nothing else. */
export function forwardedHeaders(headers: IncomingHttpHeaders): Record<string, string> {
  const key = headers['x-api-key'];
  return typeof key === 'string' ? { 'x-api-key': key } : {};
}

/** GETs `path` from every node at once; failures are results, not exceptions. */
export async function askAll<T>(
  nodes: readonly ClusterNode[],
  path: string,
  headers: Record<string, string>,
  fetchImpl: typeof fetch = fetch,
): Promise<NodeResult<T>[]> {
  return Promise.all(
    nodes.map(async (node): Promise<NodeResult<T>> => {
      try {
        const r = await fetchImpl(new URL(path, node.url), {
          headers,
          signal: AbortSignal.timeout(CALL_TIMEOUT_MS),
        });
        const text = await r.text();
        if (!r.ok) {
          let message = text.slice(0, 200);
          try {
            message = (JSON.parse(text) as { message?: string }).message ?? message;
          } catch {
            // not JSON: the text itself
          }
          return { node, ok: false, status: r.status, message };
        }
        return { node, ok: true, body: JSON.parse(text) as T };
      } catch (err) {
        return {
          node,
          ok: false,
          status: 502,
          message: `node ${node.nodeID} did not answer: ${(err as Error).message}`,
        };
      }
    }),
  );
}
