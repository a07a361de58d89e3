/**
 * A peer that holds the cluster's key and answers for every chunk of one snapshot with bytes of
 * the right length and the wrong content (each chunk read from the repository, one byte flipped).
 * Prints `READY <endpoint id> <address>` once serving; SIGTERM stops it.
 */
import { forEachLimit } from '@agentenv/common';
import { ChunkServer, IrohEndpoint } from '@agentenv/p2p';
import { createRepository, SnapshotStore, type RepositoryConfig } from '@agentenv/snapshot';

const args = JSON.parse(process.argv[2] ?? '{}') as {
  repository: RepositoryConfig;
  snapshotId: string;
  apiKey: string;
  bindAddr: string;
  /** Hex; given, so that a node can be configured with this peer before it is ready. */
  secretKey: string;
};
const repository = createRepository(args.repository);
await repository.open();
const store = new SnapshotStore({ repository });
const manifest = await store.readManifest(await store.getRecord(args.snapshotId));
const corrupted = new Map<string, Buffer>();
const hashes = [...new Set(manifest.files.flatMap((f) => f.chunks.map(([hash]) => hash)))];
// Several reads at once, as a node fetches them: the peer is ready sooner.
await forEachLimit(hashes, 16, async (hash) => {
  const data = await repository.readBlob(hash);
  data[0] = data[0]! ^ 0xff;
  corrupted.set(hash, data);
});
const endpoint = await IrohEndpoint.bind({
  secretKey: Buffer.from(args.secretKey, 'hex'),
  bindAddrs: [args.bindAddr],
});
const server = new ChunkServer({
  holder: {
    has: (h) => Promise.resolve(corrupted.has(h)),
    read: (h) => Promise.resolve(corrupted.get(h) ?? null),
  },
  apiKey: args.apiKey,
  selfId: endpoint.id,
});
void endpoint.acceptLoop((l) => void server.serve(l), 5000);
console.log(`READY ${endpoint.id} ${endpoint.addresses()[0]}`);
process.on('SIGTERM', () => {
  server.close();
  void endpoint.close().finally(() => process.exit(0));
});
