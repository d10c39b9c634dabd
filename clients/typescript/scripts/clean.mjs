// Removes the build folders named on the command line (dist/, .build/), so a build or a test
// run never picks up a file compiled from a source that has since been deleted.
import { rmSync } from 'node:fs';

for (const folder of process.argv.slice(2)) {
  rmSync(new URL(`../${folder}`, import.meta.url), { recursive: true, force: true });
}
