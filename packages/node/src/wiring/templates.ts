import path from 'node:path';
import type { Logger } from 'pino';
import type { NodeConfig } from '../config/index.js';
import { defaultToolsDir, EnvdClient, envdVersion, type EnvdConnector } from '../envd/index.js';
import { ImageStore } from '@agentenv/oci';
import type { SourceResolver } from '../orchestrator/index.js';
import type { RuntimeCache, SnapshotStore } from '@agentenv/snapshot';
import { BaseTemplate, ColdImages, createSourceChain, RepositorySnapshotCatalog } from '../sources/index.js';
import { BuildFiles, BuildRunner, BuiltTemplates, ImageBoot } from '../templates/index.js';
import { Limiter } from '@agentenv/common';
import { unmountBelow } from '../runtime/index.js';
import type { NodeHost } from './host.js';
import { openSnapshotRepository } from './snapshot-repository.js';

/** Everything a sandbox can start from, and the repository they are kept in. */
export interface NodeTemplates {
  snapshotStore: SnapshotStore;
  snapshotCache: RuntimeCache;
  snapshots: RepositorySnapshotCatalog;
  base: BaseTemplate;
  built: BuiltTemplates;
  buildFiles: BuildFiles;
  /** What creates start from: snapshots, then built templates, then `base`; images; forks. */
  sources: SourceResolver;
  envd: EnvdConnector;
}

/** Opens the snapshot repository and the templates, images and snapshots kept in it. */
export async function openTemplates(
  config: NodeConfig,
  host: NodeHost,
  logger: Logger,
): Promise<NodeTemplates> {
  const home = config.homePath;
  const { driver, network } = host;
  const toolsDir = process.env.AENV_TOOLS_DIR ?? defaultToolsDir();
  const base = new BaseTemplate({ home, driver, network, toolsDir, logger });

  const { store: snapshotStore, cache: snapshotCache } = await openSnapshotRepository(config);
  const snapshots = await RepositorySnapshotCatalog.open(
    snapshotStore,
    snapshotCache,
    path.join(home, 'held-snapshots'),
    logger,
  );

  const limits = config.image;
  const unpackLimits = {
    layerBytes: limits.maxLayerMb * 2 ** 20,
    layerEntries: limits.maxLayerEntries,
    imageBytes: limits.maxImageMb * 2 ** 20,
    imageEntries: limits.maxImageEntries,
  };
  const images = new ImageBoot({ images: new ImageStore({ home, unpackLimits, unmountBelow }), toolsDir });
  const envdVer = await envdVersion(toolsDir);
  const envd: EnvdConnector = (host, port) => new EnvdClient(host, port);
  const buildFiles = new BuildFiles(path.join(home, 'build-files'));
  const built = new BuiltTemplates({
    store: snapshotStore,
    cache: snapshotCache,
    runner: new BuildRunner({
      driver,
      network,
      images,
      // The chain is made below from `built` itself: a build may start from a built template.
      sources: { resolve: (s) => sources.resolve(s) },
      envd,
      files: buildFiles,
      workDir: path.join(home, 'builds'),
    }),
    queue: new Limiter(2),
    envdVersion: envdVer,
    builtin: base,
    logger,
  });
  const sources = createSourceChain({
    snapshots,
    templates: [built, base],
    cold: new ColdImages({ images, envdVersion: envdVer }),
  });
  return { snapshotStore, snapshotCache, snapshots, base, built, buildFiles, sources, envd };
}
