// The Wasm half of bench/edge-gate.sh: loads the gate-bench module that `wasm-bindgen --target
// nodejs` wrote, warms it up, runs `check_rounds` in five batches of ROUNDS requests and prints
// the median batch's microseconds per request, a bare number, as the native binary does.
// Usage: node bench/edge-gate.mjs PATH/TO/gate_bench.js [ROUNDS, default 20000]
import { createRequire } from 'node:module';
import { resolve } from 'node:path';

const [modulePath, roundsArgument = '20000'] = process.argv.slice(2);
const rounds = Number(roundsArgument);
if (!modulePath || !Number.isInteger(rounds) || rounds <= 0) {
  console.error('usage: node bench/edge-gate.mjs PATH/TO/gate_bench.js [ROUNDS]');
  process.exit(1);
}
const { check_rounds: checkRounds } = createRequire(import.meta.url)(resolve(modulePath));

const batches = 5;
checkRounds(Math.floor(rounds / 10) + 1);
const microsPerRequest = [];
for (let batch = 0; batch < batches; batch++) {
  const started = process.hrtime.bigint();
  const admitted = checkRounds(rounds);
  const elapsedNanos = process.hrtime.bigint() - started;
  if (admitted !== rounds) {
    console.error(`edge-gate.mjs: the gate admitted ${admitted} of ${rounds} requests`);
    process.exit(1);
  }
  microsPerRequest.push(Number(elapsedNanos) / 1e3 / rounds);
}
microsPerRequest.sort((a, b) => a - b);
console.log(microsPerRequest[Math.floor(batches / 2)].toFixed(3));
