/**
 * Which node a template build was registered on: a build's state (registration, uploaded COPY
 * files, progress) lives on that node until its result is stored in the shared repository, so
 * every call of one build must reach it. Entries expire after `ttlMs`.
 */
export class TemplateAffinity {
  private readonly nodes = new Map<string, { nodeId: string; at: number }>();

  constructor(
    private readonly ttlMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  remember(templateId: string, nodeId: string): void {
    this.nodes.delete(templateId);
    this.nodes.set(templateId, { nodeId, at: this.now() });
    for (const [k, v] of this.nodes) {
      if (this.now() - v.at < this.ttlMs) break;
      this.nodes.delete(k);
    }
  }

  nodeOf(templateId: string): string | undefined {
    const e = this.nodes.get(templateId);
    return e && this.now() - e.at < this.ttlMs ? e.nodeId : undefined;
  }
}
