/**
 * One sandbox's network: a network namespace the runtime starts the sandbox in, whose single
 * interface carries the same in-sandbox address in every slot (so a restored copy needs no
 * renumbering), and a host-side address, unique per slot, that the node dials to reach the
 * sandbox's ports (NAT to the in-sandbox address).
 */
export interface NetSlot {
  /** Stable small integer, unique among this node's live slots. */
  readonly index: number;
  /** Path of the namespace the sandbox runs in, e.g. /run/netns/aenv-s3. */
  readonly netnsPath: string;
  /** Address the node connects to for sandbox port P: `${hostAddress}:${P}`. */
  readonly hostAddress: string;
  /** Address of the sandbox's interface inside its namespace (identical in every slot). */
  readonly sandboxAddress: string;
  /**
   * Puts the sandbox interface's address and default route back into the namespace. runsc
   * (`--network=sandbox`) moves them into its own netstack and deletes them from the namespace,
   * so call this before every start or restore in the slot, never while a sandbox runs in it.
   * Idempotent.
   */
  reset(): Promise<void>;
}

/** Egress policy of one sandbox; always-denied ranges apply on top and cannot be allowed. */
export interface EgressRules {
  /** false: no traffic leaves the sandbox except what allowOut permits. */
  allowInternet: boolean;
  /** CIDRs or IPs reachable even when allowInternet is false (never the always-denied ranges). */
  allowOut: string[];
  /** CIDRs or IPs never reachable. */
  denyOut: string[];
}
