// Unit tests of the pure front-end parts (no DOM, no JupyterLab): run by `npm run build`.
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['tests/**/*.test.ts'],
    environment: 'node',
    pool: 'threads',
    poolOptions: { threads: { singleThread: true } }
  }
});
