import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

// Built once at `npm run build` into dist/app and served from memory at /dashboard by the node
// and the gateway. Everything is an external file: the pages' CSP allows no inline script or style.
export default defineConfig({
  root: fileURLToPath(new URL('./src/app', import.meta.url)),
  base: '/dashboard/',
  publicDir: false,
  oxc: { jsx: { runtime: 'automatic', importSource: 'preact' } },
  build: {
    outDir: fileURLToPath(new URL('./dist/app', import.meta.url)),
    emptyOutDir: true,
    target: 'es2022',
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
    reportCompressedSize: false,
  },
});
