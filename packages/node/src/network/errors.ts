import { codedError, type DomainErrorKind } from '@agentenv/common';

/**
 * Why a network operation failed. Callers branch on `code` (the API maps the validation codes to a
 * 400); the message is written for a human reading a log or an API error body.
 */
export type NetworkErrorCode =
  /** A CIDR or IP in an egress rule (or in the configuration) does not parse. */
  | 'INVALID_CIDR'
  /** An egress rule names a host instead of an address; only addresses can be enforced. */
  | 'DOMAIN_NOT_SUPPORTED'
  /** The network configuration is inconsistent (bad tag, overlapping ranges, ...). */
  | 'INVALID_CONFIG'
  /** A required program is not installed; the message names the Debian package. */
  | 'MISSING_BINARY'
  /** An `ip`/`iptables`/... invocation failed; the message carries its command line and stderr. */
  | 'COMMAND_FAILED'
  /** Every host-side address of the configured range is in use. */
  | 'EXHAUSTED'
  /** The host-side range is already routed on this machine (another node, a VPN, ...). */
  | 'RANGE_IN_USE'
  /** The slot was not created by this manager. */
  | 'UNKNOWN_SLOT'
  /** The manager has been shut down. */
  | 'SHUT_DOWN'
  /** The process lacks the privileges namespaces and iptables need. */
  | 'NOT_ROOT';

/** What each code is for a client: bad rules are the request's fault, the rest the node's. */
export const NETWORK_ERROR_KIND: Readonly<Record<NetworkErrorCode, DomainErrorKind>> = {
  INVALID_CIDR: 'invalid',
  DOMAIN_NOT_SUPPORTED: 'invalid',
  INVALID_CONFIG: 'internal',
  MISSING_BINARY: 'internal',
  COMMAND_FAILED: 'internal',
  EXHAUSTED: 'unavailable',
  RANGE_IN_USE: 'internal',
  UNKNOWN_SLOT: 'internal',
  SHUT_DOWN: 'unavailable',
  NOT_ROOT: 'internal',
};

/** Every host-side address is in use: sandboxes end and free theirs, so try again in a while. */
const RETRY_AFTER: Partial<Record<NetworkErrorCode, number>> = { EXHAUSTED: 5 };

export class NetworkError extends codedError(NETWORK_ERROR_KIND, RETRY_AFTER) {
  override readonly name = 'NetworkError';
}
