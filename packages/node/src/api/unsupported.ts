import type { FastifyPluginAsync } from 'fastify';
import { unsupported } from '@agentenv/common';

/**
 * E2B features AgentENV does not have (docs/compatibility.md). A client that asks for one gets
 * E2B's error shape, 501, and a message naming the feature and why, never a silent success that
 * ignored what it asked for.
 */

/** A request field AgentENV refuses: where it is, and why it is not there. */
interface Refused {
  readonly field: string;
  readonly why: string;
}

const NO_EGRESS_PROXY = 'sandbox egress leaves from its node directly (allowOut/denyOut CIDRs apply)';

const CREATE_FIELDS: readonly Refused[] = [
  { field: 'iam', why: 'it issues no workload identity tokens (Secret.iamToken)' },
  { field: 'mcp', why: "it runs no MCP gateway (E2B's mcp-gateway template)" },
];

const NETWORK_FIELDS: readonly Refused[] = [
  { field: 'egressProxy', why: NO_EGRESS_PROXY },
  { field: 'rules', why: `it rewrites no outbound HTTPS request: ${NO_EGRESS_PROXY}` },
  { field: 'httpsPorts', why: "the node's proxy reaches sandbox ports over plain HTTP" },
];

const present = (o: object | undefined, field: string) =>
  o !== undefined && (o as Record<string, unknown>)[field] !== undefined;

function refuse(o: object | undefined, fields: readonly Refused[], prefix = ''): void {
  const r = fields.find((f) => present(o, f.field));
  if (r) throw unsupported(`${prefix}${r.field}`, r.why);
}

/** Refuses a create body (POST /sandboxes, /v2/sandboxes) that asks for a feature AgentENV lacks. */
export function refuseUnsupportedCreate(body: { network?: object }): void {
  refuse(body, CREATE_FIELDS);
  refuse(body.network, NETWORK_FIELDS, 'network.');
}

/** Refuses a network update (PUT /sandboxes/{id}/network) that asks for what AgentENV lacks. */
export function refuseUnsupportedNetworkUpdate(body: object): void {
  refuse(body, NETWORK_FIELDS);
}

/**
 * Refuses a template build from a cloud registry (Template.fromAWSRegistry, fromGCPRegistry):
 * AgentENV pulls with a username and password only (`type: 'registry'`).
 */
export function refuseUnsupportedBuild(body: { fromImageRegistry?: { type: string } }): void {
  const type = body.fromImageRegistry?.type;
  if (type !== undefined && type !== 'registry')
    throw unsupported(
      `fromImageRegistry of type '${type}' (Template.fromAWSRegistry/fromGCPRegistry)`,
      'it pulls private images with a username and password only (Template.fromImage with credentials)',
    );
}

const SECRETS_WHY = 'it keeps no secret store; pass values to a sandbox as envs';

/** E2B's secret store (`Secret.*`): every route answers that AgentENV has none. */
export const unsupportedRoutes: FastifyPluginAsync = async (app) => {
  const secrets = async () => {
    throw unsupported('secrets (Secret.create/update/getInfo/list/destroy)', SECRETS_WHY);
  };
  for (const url of ['/secrets', '/secrets/:secretID']) {
    app.route({ method: ['GET', 'POST'], url, handler: secrets });
  }
  app.delete('/secrets/:secretID', secrets);
};
