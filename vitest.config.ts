import { defineConfig } from 'vitest/config';

/**
 * Suites that want the machine to themselves: the ones that boot QEMU guests (under TCG each guest
 * wants a core of its own, so two booting beside each other, or beside the rest of the suite,
 * stretch every timeout they have), and the replica suite, which holds the controller's hand-over
 * to 15 s while it kills replicas, a bound a loaded two-core machine stretches. They run after
 * everything else, one file at a time.
 */
const guestSuites = [
  'test/guest/**/*.test.ts',
  'packages/daemon/test/qemu-runtime.test.ts',
  'packages/daemon/test/instance-exit.test.ts',
  'packages/daemon/test/qemu-sandbox.test.ts',
  // No guest boots here, but it mounts the same guest image, which the first guest suite builds.
  'packages/daemon/test/bwrap-runtime.test.ts',
  // A node joined to the console, and a guest booted on it for its serial console in the browser.
  'apps/console/test/terminal.browser.test.ts',
  'test/e2e/replicas.test.ts',
];

const shared = {
  globalSetup: ['test/global-setup.ts'],
  pool: 'forks' as const,
  testTimeout: 30_000,
  hookTimeout: 60_000,
};

export default defineConfig({
  resolve: { conditions: ['source'] },
  ssr: { resolve: { conditions: ['source'] } },
  test: {
    projects: [
      {
        extends: true,
        test: {
          ...shared,
          name: 'main',
          include: [
            'packages/*/src/**/*.test.ts',
            'packages/*/test/**/*.test.ts',
            'apps/*/test/**/*.test.ts',
            'test/**/*.test.ts',
          ],
          exclude: ['**/node_modules/**', ...guestSuites],
          maxWorkers: 2,
          sequence: { groupOrder: 0 },
        },
      },
      {
        extends: true,
        test: {
          ...shared,
          name: 'guests',
          include: guestSuites,
          maxWorkers: 1,
          sequence: { groupOrder: 1 },
        },
      },
    ],
  },
});
