import type { ResolvedTemplate, SnapshotCatalog, TemplateCatalog } from '../orchestrator/seams.js';

/** A create's templateID names a snapshot (by id or name) or a template, in that order. */
export class TemplateResolver implements TemplateCatalog {
  constructor(
    private readonly snapshots: SnapshotCatalog,
    private readonly templates: TemplateCatalog,
  ) {}

  async resolve(templateId: string): Promise<ResolvedTemplate> {
    const snap = await this.snapshots.find(templateId);
    if (!snap) return this.templates.resolve(templateId);
    const { info } = snap;
    return {
      templateId: info.templateId,
      capture: snap.capture,
      defaults: { cpuCount: info.cpuCount, memoryMB: info.memoryMB, diskSizeMB: info.diskSizeMB },
      envdVersion: info.envdVersion,
      snapshotId: info.snapshotID,
      ...(snap.release ? { release: snap.release } : {}),
      ...(snap.envdToken ? { envdToken: snap.envdToken } : {}),
    };
  }
}
