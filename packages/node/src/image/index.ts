export { ensureTemplate, type Template, type EnsureTemplateOptions } from './template.js';
export { BASE_RECIPE, recipeHash, type RootfsRecipe } from './recipe.js';
export { LayerStore } from './layer-store.js';
export { loadToolsBundle, TOOLS_SANDBOX_PATH, ENVD_PORT, type ToolsBundle } from './tools.js';
export { ImageBuildError } from './errors.js';
export type { Log } from './log.js';
