import { defaultServerConditions } from 'vite';
import { defineConfig } from 'vitest/config';

// One runner for the whole repository. Unit tests are pure and run in parallel; end-to-end groups
// drive real daemons and sandboxes, so each group runs its files one after another.
// Workspace packages resolve to their TypeScript sources (the `source` export condition), so a test
// runs the code as it is in the tree, and a fixture and a test share one copy of each module.
// The other conditions are vitest's own defaults (Vite's, less `module`).
const conditions = ['source', ...defaultServerConditions.filter((c) => c !== 'module')];

export default defineConfig({
  ssr: { resolve: { conditions } },
  test: {
    // Files share their worker's module cache instead of loading every module again per file:
    // the unit project takes seconds, not half a minute, and each end-to-end lane loses ~20 s of
    // loading the SDK and the fixtures (each file stops what it starts in its own hooks).
    isolate: false,
    projects: [
      {
        extends: true,
        test: {
          name: 'unit',
          include: ['packages/*/test/unit/**/*.test.ts', 'deploy/test/unit/**/*.test.ts'],
        },
      },
      {
        extends: true,
        test: {
          name: 'envd',
          include: ['packages/envd/test/e2e/**/*.test.ts'],
          // The E2B SDK's debug mode always dials localhost:49983, so envd e2e files share that port.
          fileParallelism: false,
          testTimeout: 60_000,
          hookTimeout: 120_000,
        },
      },
      {
        extends: true,
        test: {
          name: 'network',
          include: ['packages/node/test/network/**/*.test.ts'],
          fileParallelism: false,
          testTimeout: 120_000,
          hookTimeout: 120_000,
        },
      },
      {
        extends: true,
        test: {
          name: 'runtime',
          include: ['packages/node/test/runtime/**/*.test.ts'],
          fileParallelism: false,
          // The first run builds the base template (a Debian root filesystem) once.
          testTimeout: 300_000,
          hookTimeout: 1_200_000,
        },
      },
      {
        extends: true,
        test: {
          name: 'oci',
          // The image library's own files (real registries on 127.0.0.1, overlay and tmpfs
          // mounts), and the node's file that mounts pulled layers and boots a gVisor sandbox on them.
          include: ['packages/oci/test/e2e/**/*.test.ts', 'packages/node/test/oci/**/*.test.ts'],
          // Files run one after another.
          fileParallelism: false,
          testTimeout: 120_000,
          hookTimeout: 300_000,
        },
      },
      {
        extends: true,
        test: {
          name: 'snapshot',
          // The library's own files (real S3 and POSIX repositories), and the node's file that
          // stores captures of a real gVisor sandbox.
          include: ['packages/snapshot/test/e2e/**/*.test.ts', 'packages/node/test/snapshot/**/*.test.ts'],
          fileParallelism: false,
          // One file boots a real gVisor sandbox (and the base template on a fresh machine).
          testTimeout: 300_000,
          hookTimeout: 1_200_000,
        },
      },
      {
        extends: true,
        test: {
          name: 'node',
          include: ['packages/node/test/e2e/**/*.test.ts'],
          // Every file drives a real aenv-server with real sandboxes; they share the machine.
          fileParallelism: false,
          testTimeout: 120_000,
          hookTimeout: 1_200_000,
        },
      },
      {
        extends: true,
        test: {
          name: 'scheduler',
          include: ['packages/scheduler/test/e2e/**/*.test.ts'],
          // Real aenv-scheduler processes and redis-server on fixed loopback ports (192xx); the
          // node-agent file also boots gVisor test nodes.
          fileParallelism: false,
          testTimeout: 120_000,
          hookTimeout: 1_200_000,
        },
      },
      {
        extends: true,
        test: {
          name: 'p2p',
          // The library's own file (real iroh endpoints on loopback), and the node's file that
          // starts two real nodes sharing an S3 repository.
          include: ['packages/p2p/test/e2e/**/*.test.ts', 'packages/node/test/p2p/**/*.test.ts'],
          fileParallelism: false,
          testTimeout: 300_000,
          hookTimeout: 1_200_000,
        },
      },
      {
        test: {
          name: 'cli',
          include: ['packages/cli/test/e2e/**/*.test.ts'],
          // The aenv CLI against a real aenv-server (the node fixture's port and home, like `node`).
          fileParallelism: false,
          testTimeout: 120_000,
          hookTimeout: 1_200_000,
        },
      },
      {
        extends: true,
        test: {
          name: 'security',
          include: ['packages/*/test/security/**/*.test.ts'],
          // The adversarial suite: real nodes, gateways, schedulers and sandboxes probed as an
          // attacker would (no key, malformed requests, sandbox code); files one after another.
          fileParallelism: false,
          testTimeout: 300_000,
          hookTimeout: 1_200_000,
        },
      },
      {
        test: {
          name: 'deploy',
          include: ['deploy/test/e2e/**/*.test.ts'],
          // Releases, installs into a booted Debian root, Docker images, Compose: slow and exclusive.
          fileParallelism: false,
          testTimeout: 900_000,
          hookTimeout: 1_800_000,
        },
      },
      {
        test: {
          name: 'cluster',
          include: ['packages/gateway/test/cluster/**/*.test.ts'],
          // Real clusters (redis-server, the scheduler, the gateway, several nodes) on one machine.
          fileParallelism: false,
          isolate: false,
          testTimeout: 300_000,
          hookTimeout: 1_200_000,
        },
      },
      {
        extends: true,
        test: {
          name: 'dashboard',
          include: ['packages/dashboard/test/e2e/**/*.test.ts'],
          // Debian's chromium against a real aenv-server (the node fixture's port and home) and a
          // real local cluster.
          fileParallelism: false,
          testTimeout: 180_000,
          hookTimeout: 1_200_000,
        },
      },
    ],
  },
});
