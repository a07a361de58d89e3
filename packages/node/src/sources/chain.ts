import { invalid } from '@agentenv/common';
import {
  filesSince,
  type ResolvedTemplate,
  type SandboxSource,
  type SnapshotCatalog,
  type SourceResolver,
} from '../orchestrator/index.js';
/** One link of the chain a name goes through: undefined hands the name to the next link. */
export interface NamedSource {
  find(name: string): Promise<ResolvedTemplate | undefined>;
}

/** Images booted without a build (ColdImages). */
export interface ImageSource {
  resolve(req: Extract<SandboxSource, { kind: 'image' }>): Promise<ResolvedTemplate>;
}

export interface SourceChainParts {
  /** Snapshots by id or name; asked first for a create's templateID. */
  snapshots: SnapshotCatalog;
  /** Templates, in the order they are asked (built templates, then `base`). */
  templates: readonly NamedSource[];
  cold: ImageSource;
}

/**
 * What a create starts from, resolved: a templateID goes to the snapshots, then to each template
 * source in turn (built templates, then `base`); an image goes to the cold images; a fork starts
 * from its parent's capture with the parent's settings.
 */
export function createSourceChain(parts: SourceChainParts): SourceResolver {
  const firstOf = async (links: readonly NamedSource[], name: string): Promise<ResolvedTemplate> => {
    for (const link of links) {
      const found = await link.find(name);
      if (found) return found;
    }
    throw invalid(`template '${name}' not found`);
  };
  const snapshots: NamedSource = { find: (name) => snapshotTemplate(parts.snapshots, name) };
  return {
    resolve(source: SandboxSource): Promise<ResolvedTemplate> {
      switch (source.kind) {
        case 'named':
          return firstOf([snapshots, ...parts.templates], source.name);
        case 'template':
          return firstOf(parts.templates, source.name);
        case 'image':
          return parts.cold.resolve(source);
        case 'fork':
          return Promise.resolve(forkTemplate(source));
      }
    },
  };
}

async function snapshotTemplate(
  catalog: SnapshotCatalog,
  idOrName: string,
): Promise<ResolvedTemplate | undefined> {
  const snap = await catalog.find(idOrName);
  if (!snap) return undefined;
  const { info } = snap;
  return {
    templateId: info.templateId,
    capture: snap.capture,
    defaults: { cpuCount: info.cpuCount, memoryMB: info.memoryMB, diskSizeMB: info.diskSizeMB },
    envdVersion: info.envdVersion,
    snapshotId: info.snapshotID,
    ...(info.filesSince ? { filesSince: info.filesSince } : {}),
    ...(snap.release ? { release: snap.release } : {}),
    ...(snap.envdToken ? { envdToken: snap.envdToken } : {}),
  };
}

/** Children keep the parent's template, resources and envd token (envd's state is in the capture). */
function forkTemplate({ capture, parent: p }: Extract<SandboxSource, { kind: 'fork' }>): ResolvedTemplate {
  return {
    templateId: p.templateId,
    ...(p.alias ? { alias: p.alias } : {}),
    capture,
    defaults: { cpuCount: p.cpuCount, memoryMB: p.memoryMB, diskSizeMB: p.diskSizeMB },
    envdVersion: p.envdVersion,
    filesSince: filesSince(p),
    ...(p.envdAccessToken ? { envdToken: p.envdAccessToken } : {}),
  };
}
