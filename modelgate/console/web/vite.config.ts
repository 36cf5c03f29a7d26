import { defineConfig } from 'vite';

// `npm run dev` proxies the API to a gateway started locally (MODELGATE_URL, default :8080).
const gateway = process.env.MODELGATE_URL ?? 'http://127.0.0.1:8080';

export default defineConfig({
  base: '/console/',
  build: {
    outDir: '../dist',
    emptyOutDir: true,
    // Served from the gateway with no CDN: keep one small bundle and no source maps.
    sourcemap: false,
  },
  server: {
    proxy: {
      '/api': { target: gateway, changeOrigin: false },
    },
  },
});
