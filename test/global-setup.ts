/**
 * Runs once per vitest project that has a test file to run, before its files start: what that
 * project's suites need and nothing more. Vitest skips it for a project with no selected file, so
 * `vitest run path/to/unit.test.ts` never installs host packages or builds the console.
 *
 *   unit     the packages' build (suites run the real CLI binary from dist/)
 *   e2e      + OpenSSH and the shells the suites drive (host group e2e)
 *   guest    + QEMU, bubblewrap, their networks and the guest image's build (host group guest);
 *            the image itself is built by the first suite that asks for it (guest-support.ts)
 *   browser  + the console's production build and Chromium (host group browser); the terminal
 *            suite boots a guest, so the guest group too
 */
import type { TestProject } from 'vitest/node';
import {
  ensureConsoleBuilt,
  ensureDependencies,
  ensureHostTools,
  ensurePackagesBuilt,
} from '../scripts/ensure.mjs';

export const SETUP_BY_PROJECT: Record<string, { hostGroups: string[]; console: boolean }> = {
  unit: { hostGroups: [], console: false },
  e2e: { hostGroups: ['e2e'], console: false },
  guest: { hostGroups: ['e2e', 'guest'], console: false },
  browser: { hostGroups: ['e2e', 'guest', 'browser'], console: true },
};

export default async function setup(project: TestProject): Promise<void> {
  const needs = SETUP_BY_PROJECT[project.name];
  if (!needs) throw new Error(`test/global-setup.ts has no set-up for the vitest project ${project.name}`);
  ensureDependencies();
  ensurePackagesBuilt();
  if (needs.console) ensureConsoleBuilt();
  // Missing programs are reported here; the suites that need them say so when they run.
  if (needs.hostGroups.length > 0) await ensureHostTools(needs.hostGroups, `the ${project.name} tests`);
}
