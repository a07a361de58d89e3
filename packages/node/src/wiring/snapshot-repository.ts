import { ConfigError, type NodeConfig } from '../config/index.js';
import {
  createRepository,
  RepositoryConfigError,
  RuntimeCache,
  SnapshotStore,
  type RepositoryConfig,
} from '@agentenv/snapshot';

/**
 * The repository `snapshot.repository_backend` names, opened, with this node's runtime cache (not
 * opened yet: the snapshot catalog pins what it holds first, RepositorySnapshotCatalog.open).
 */
export async function openSnapshotRepository(
  config: NodeConfig,
): Promise<{ store: SnapshotStore; cache: RuntimeCache }> {
  let repoConfig: RepositoryConfig;
  if (config.snapshot.repositoryBackend === 'oss') {
    const o = config.backend.oss;
    if (!o)
      throw new ConfigError(
        'snapshot.repository_backend is "oss" but [backend.oss] is missing (bucket, region, …)',
      );
    repoConfig = {
      backend: 'oss',
      bucket: o.bucket,
      region: o.region ?? '',
      ...(o.endpoint ? { endpoint: o.endpoint } : {}),
      ...(o.prefix ? { prefix: o.prefix } : {}),
      ...(o.addressingStyle ? { addressingStyle: o.addressingStyle } : {}),
      ...(o.accessKeyId ? { accessKeyId: o.accessKeyId } : {}),
      ...(o.accessKeySecret ? { secretAccessKey: o.accessKeySecret } : {}),
      ...(o.credentialProcess ? { credentialProcess: o.credentialProcess } : {}),
    };
  } else {
    repoConfig = { backend: 'posix_fs', path: config.backend.posixFs.snapshotStore };
  }
  try {
    const repository = createRepository(repoConfig);
    await repository.open();
    const store = new SnapshotStore({ repository });
    const cache = new RuntimeCache({
      dir: config.snapshot.localCachePath,
      capacityBytes: Math.round(config.snapshot.cacheCapacityGb * 2 ** 30),
      store,
    });
    return { store, cache };
  } catch (e) {
    if (e instanceof RepositoryConfigError) throw new ConfigError(e.message);
    throw e;
  }
}
