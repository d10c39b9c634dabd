// The size of the browser entry (src/index.ts) as an app would ship it: bundled by esbuild for
// the browser (which fails if anything in it imports a Node module), then minified, then the
// minified bundle gzipped with node:zlib. Prints the three sizes in bytes.
import { gzipSync } from 'node:zlib';

import { build } from 'esbuild';

const entry = new URL('../src/index.ts', import.meta.url).pathname;

async function bundle(minify) {
  const result = await build({
    entryPoints: [entry],
    bundle: true,
    format: 'esm',
    platform: 'browser',
    target: 'es2020',
    minify,
    write: false,
    logLevel: 'error',
  });
  const [output] = result.outputFiles;
  return output.contents;
}

const raw = await bundle(false);
const minified = await bundle(true);
const gzipped = gzipSync(minified, { level: 9 });

console.log('payments-client browser entry (src/index.ts, esbuild, esm, es2020)');
console.log(`raw:      ${String(raw.byteLength).padStart(7)} bytes`);
console.log(`minified: ${String(minified.byteLength).padStart(7)} bytes`);
console.log(`gzipped:  ${String(gzipped.byteLength).padStart(7)} bytes`);
