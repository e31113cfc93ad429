/**
 * Runs once before any test file: builds the packages when a source is newer than the last build,
 * so suites that run the real binaries never race each other rebuilding dist/, and installs the
 * host programs they run.
 */
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';

export default function setup(): void {
  const root = join(import.meta.dirname, '..');
  execFileSync(process.execPath, [join(root, 'scripts', 'ensure.mjs')], { cwd: root, stdio: 'inherit' });
  // The host programs suites run for real, installed in one apt run before files start in parallel.
  execFileSync(process.execPath, [join(root, 'scripts', 'host-tools.mjs')], { cwd: root, stdio: 'inherit' });
}
