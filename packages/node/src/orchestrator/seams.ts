import type { Capture, Resources } from '../runtime/driver.js';
import type { EgressRules, NetSlot } from '../network/slot.js';

/** A template the orchestrator can create sandboxes from: a captured ready state. */
export interface ResolvedTemplate {
  templateId: string;
  alias?: string;
  /** The ready state: envd up, no per-sandbox data. */
  capture: Capture;
  defaults: Resources;
  envdVersion: string;
}

export interface TemplateCatalog {
  /** Throws ApiError('invalid', …naming the template) when unknown. */
  resolve(templateIdOrAlias: string): Promise<ResolvedTemplate>;
}

/** Network slots for sandboxes (network/). */
export interface SlotProvider {
  acquire(egress: EgressRules): Promise<NetSlot>;
  setEgress(slot: NetSlot, egress: EgressRules): Promise<void>;
  release(slot: NetSlot): Promise<void>;
}
