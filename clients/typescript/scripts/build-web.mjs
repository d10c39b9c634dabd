// Bundles the pay-a-bill page's script (web/app.ts, with the package's sources it imports) for
// the browser into web/dist/app.js, with a source map. Type-checking is `tsc -p web` (run first
// by `npm run build:web`); esbuild only strips the types.
import { build } from 'esbuild';

const web = new URL('../web/', import.meta.url);

await build({
  entryPoints: [new URL('app.ts', web).pathname],
  outfile: new URL('dist/app.js', web).pathname,
  bundle: true,
  format: 'esm',
  platform: 'browser',
  target: 'es2020',
  sourcemap: true,
  logLevel: 'warning',
});
console.log('web/dist/app.js built');
