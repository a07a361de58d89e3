export { createSourceChain, type ImageSource, type NamedSource, type SourceChainParts } from './chain.js';
export { BaseTemplate } from './base.js';
export { ColdImages } from './cold.js';
export { RepositorySnapshotCatalog } from './snapshots.js';
