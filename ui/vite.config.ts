// Builds the UI into the Python package (src/stalwart/master/ui/static), which the master
// serves: index.html at "/", the hashed bundles under "/ui/assets/". The output is committed and
// deterministic (content hashes, no timestamps), so `make ui-check` can compare it with git.
import react from "@vitejs/plugin-react";
import { defineConfig } from "vite";


export default defineConfig({
  base: "/ui/",
  plugins: [react()],
  build: {
    outDir: "../src/stalwart/master/ui/static",  // relative to this folder (Vite's root)
    emptyOutDir: true,
    target: "es2020",
    sourcemap: false,
    modulePreload: { polyfill: false },
    chunkSizeWarningLimit: 1000,
  },
  server: {
    // `npm run dev`: the API of a master on :8080 (`stalwart master`).
    proxy: { "/api": "http://127.0.0.1:8080", "/proxy": "http://127.0.0.1:8080" },
  },
});
