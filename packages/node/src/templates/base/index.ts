export { ensureTemplate, type Template, type EnsureTemplateOptions } from './template.js';
export { BASE_RECIPE, recipeHash, sha256Hex, type RootfsRecipe } from './recipe.js';
