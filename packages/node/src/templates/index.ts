export { BuiltTemplates, splitName, type TemplateInfo, type BuildStatus } from './built.js';
export { ImageBoot, type BootableImage, type SandboxDefaults } from './image-boot.js';
export { ensureSandboxLayer, type SandboxLayerOptions } from './sandbox-layer.js';
export { BuildFiles, BuildRunner, checkFilesHash, type BuildSpec } from './builds/index.js';
export { ensureTemplate, BASE_RECIPE, recipeHash, type Template, type RootfsRecipe } from './base/index.js';
