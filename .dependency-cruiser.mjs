// The dependency rules `npm run lint` checks (dependency-cruiser): no import cycles anywhere in
// packages/*/src, the node's layering as CONTRIBUTING.md states it, and the libraries beneath the
// node (@agentenv/snapshot, @agentenv/oci, @agentenv/p2p) never importing it.
const node = '^packages/node/src/';

/** @type {import('dependency-cruiser').IConfiguration} */
export default {
  forbidden: [
    {
      name: 'no-circular',
      comment: 'An import cycle: split the shared part into a module both sides import.',
      severity: 'error',
      from: {},
      to: { circular: true },
    },
    {
      name: 'node-layers-below-orchestrator',
      comment: 'runtime and network sit below the orchestrator: they never import it or the API.',
      severity: 'error',
      from: { path: `${node}(runtime|network)/` },
      to: { path: `${node}(orchestrator|api)/` },
    },
    {
      name: 'node-orchestrator-below-api',
      comment: 'The API calls the orchestrator, never the other way round.',
      severity: 'error',
      from: { path: `${node}orchestrator/` },
      to: { path: `${node}api/` },
    },
    {
      name: 'library-imports',
      comment:
        'The libraries beneath the node (@agentenv/snapshot, @agentenv/oci): of the workspace each imports only itself and @agentenv/common.',
      severity: 'error',
      from: { path: '^packages/(snapshot|oci)/src/' },
      to: { path: '^packages/', pathNot: '^packages/($1|common)/' },
    },
    {
      name: 'p2p-imports',
      comment:
        "The chunk exchange between nodes (@agentenv/p2p) moves the snapshot library's chunks: of the workspace it imports only itself, @agentenv/common and @agentenv/snapshot.",
      severity: 'error',
      from: { path: '^packages/p2p/src/' },
      to: { path: '^packages/', pathNot: '^packages/(p2p|common|snapshot)/' },
    },
    {
      name: 'cli-start-without-connect',
      comment:
        "aenv loads what talks to envd (the Connect client and the protocol's messages, most of the CLI's start) only when a command runs that needs it: outside the modules that talk to envd, only import() or a type-only import may reach them.",
      severity: 'error',
      from: {
        path: '^packages/cli/src/',
        pathNot: '^packages/cli/src/(client/(envd|remote-process)|remote/|terminal/)',
      },
      to: {
        path: [
          '^packages/cli/src/(client/(envd|remote-process)|remote/|terminal/shell)',
          '^node_modules/@connectrpc/',
          '^packages/protocol/',
        ],
        dynamic: false,
        dependencyTypesNot: ['type-only'],
      },
    },
    {
      name: 'no-relative-import-across-packages',
      comment: 'Another package is imported by its name (@agentenv/…), never by a relative path.',
      severity: 'error',
      from: { path: '^packages/([^/]+)/' },
      to: { dependencyTypes: ['local'], path: '^packages/', pathNot: '^packages/$1/' },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    // Workspace packages' builds, except the protocol's: it has no `source` export, so its imports
    // resolve to its dist, and the CLI's rule must see them.
    exclude: { path: ['^packages/(?!protocol/)[^/]+/dist/', '^packages/protocol/src/gen/'] },
    // Type-only imports count: a cycle through types still ties two modules together.
    tsPreCompilationDeps: true,
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['source', 'import', 'types', 'default'],
    },
  },
};
