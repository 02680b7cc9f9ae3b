import { defineConfig } from 'vite';

// The console is served by `capstan serve` under /console/ from assets the
// Go binary embeds (internal/console/dist): no CDN, works offline.
export default defineConfig({
  base: '/console/',
  esbuild: { jsx: 'automatic', jsxImportSource: 'preact' },
  build: {
    outDir: '../../internal/console/dist',
    emptyOutDir: true,
    // Deterministic output: the built assets are committed and the test
    // command checks they match the sources.
    sourcemap: false,
    chunkSizeWarningLimit: 300,
  },
});
