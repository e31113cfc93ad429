/**
 * Runs once per vitest project that has a test file to run, before any file starts: what that
 * project's suites need and nothing more. Vitest skips it for a project with no selected file, so
 * `vitest run path/to/unit.test.ts` never installs host packages or builds the console.
 *
 *   unit     the packages' build (suites run the real CLI binary from dist/)
 *   e2e      + OpenSSH and the shells the suites drive (host group e2e)
 *   guest    + QEMU, bubblewrap, their networks (host group guest), podman and runc for the
 *            server image (host group image) and the guest image
 *   browser  + the console's production build and Chromium (host group browser); the terminal
 *            suite boots a guest, so the guest group too
 *
 * The packages' build is done here, before anything runs. The rest (apt, Next.js, debootstrap:
 * minutes on a fresh machine) starts in the background (scripts/project-setup.mjs) and runs while
 * the unit tests do; each file of the project waits for it first (test/project-ready.ts).
 */
import type { TestProject } from 'vitest/node';
import { ensureDependencies, ensurePackagesBuilt } from '../scripts/ensure.mjs';
import { startProjectSetup } from '../scripts/project-setup.mjs';

export const SETUP_BY_PROJECT: Record<
  string,
  { hostGroups: string[]; console: boolean; guestImage: boolean }
> = {
  unit: { hostGroups: [], console: false, guestImage: false },
  e2e: { hostGroups: ['e2e'], console: false, guestImage: false },
  guest: { hostGroups: ['e2e', 'guest', 'image'], console: false, guestImage: true },
  browser: { hostGroups: ['e2e', 'guest', 'browser'], console: true, guestImage: false },
};

export default async function setup(project: TestProject): Promise<void> {
  const needs = SETUP_BY_PROJECT[project.name];
  if (!needs) throw new Error(`test/global-setup.ts has no set-up for the vitest project ${project.name}`);
  ensureDependencies();
  ensurePackagesBuilt();
  // Missing programs are reported in the set-up's log; the suites that need them say so when they run.
  if (needs.hostGroups.length > 0 || needs.console || needs.guestImage)
    startProjectSetup(project.name, needs);
}
