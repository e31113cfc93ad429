import { defineConfig } from 'vitest/config';

/**
 * Four projects, by what their suites need of the machine; test/global-setup.ts prepares, once per
 * project that has a file to run, exactly that:
 *
 *   unit     the server, the CLI and the libraries on PostgreSQL/PGlite: no VM, no sandbox, no node
 *            daemon, no browser, no host package (npm run test:unit)
 *   e2e      real node daemons, OpenSSH and shells (npm run test:e2e)
 *   guest    QEMU guests and bubblewrap sandboxes (npm run test:guest)
 *   browser  the console in Chromium (npm run test:browser)
 *
 * A file belongs to unit unless it is listed below. The projects run one after another, in that
 * order. The guest and browser suites want the machine to themselves (under TCG a guest wants a core of its own; the replica suite holds a controller's
 * hand-over to a bound that a loaded two-core machine stretches), so they run after the others, one
 * file at a time.
 */
const e2eSuites = [
  'test/e2e/capacity.test.ts',
  'test/e2e/iam-flow.test.ts',
  'test/e2e/operator.test.ts',
  'packages/daemon/test/daemon.test.ts',
  'packages/daemon/test/dev-node.test.ts',
  'packages/daemon/test/gateway-session.test.ts',
  'packages/daemon/test/mtls.test.ts',
  'packages/daemon/test/node-streams.test.ts',
  'packages/daemon/test/command-root-rotation.test.ts',
  'packages/daemon/test/quorum-fleet.test.ts',
  'packages/daemon/test/metal-bulk.test.ts',
  'packages/daemon/test/rollouts.test.ts',
  'packages/better-compute/test/break-glass-ssh.test.ts',
  'packages/better-compute/test/tunnels.test.ts',
  'packages/better-compute/test/cli-completion.test.ts',
  'packages/better-compute/test/pki-rotation.test.ts',
  'packages/better-compute/test/cli-remote-argv.test.ts',
  'packages/better-compute/test/ssh-certificate.test.ts',
];

const guestSuites = [
  'test/guest/**/*.test.ts',
  'test/e2e/sandboxes.test.ts',
  'test/e2e/replicas.test.ts',
  'test/e2e/dev-stop.test.ts',
  'packages/daemon/test/qemu-runtime.test.ts',
  'packages/daemon/test/instance-exit.test.ts',
  'packages/daemon/test/qemu-sandbox.test.ts',
  'packages/daemon/test/bwrap-runtime.test.ts',
  'packages/daemon/test/secrets-sandbox.test.ts',
  'packages/daemon/test/runtime-dir.test.ts',
  'packages/daemon/test/install-script.test.ts',
  'packages/daemon/test/provider-bootstrap.test.ts',
  'packages/daemon/test/metal-lab.test.ts',
  'packages/better-compute/test/profiles-disk.test.ts',
  'packages/daemon/test/metal-site.test.ts',
];

const browserSuites = ['apps/console/test/**/*.browser.test.ts'];

const everyTest = [
  'packages/*/src/**/*.test.ts',
  'packages/*/test/**/*.test.ts',
  'apps/*/test/**/*.test.ts',
  'test/**/*.test.ts',
];

const shared = {
  globalSetup: ['test/global-setup.ts'],
  pool: 'forks' as const,
  // Generous: a timeout catches a hang, not a slow host. Under load (CI, two cores shared with other
  // work) a suite that spawns the CLI a dozen times takes several times its quiet duration.
  testTimeout: 120_000,
  hookTimeout: 180_000,
};

/** A project whose files wait for its background host set-up (test/project-ready.ts). */
const readyFirst = (name: string) => ({
  name,
  setupFiles: ['test/project-ready.ts'],
  env: { BETTER_COMPUTE_TEST_PROJECT: name },
});

export default defineConfig({
  resolve: { conditions: ['source'] },
  ssr: { resolve: { conditions: ['source'] } },
  test: {
    projects: [
      {
        extends: true,
        test: {
          ...shared,
          name: 'unit',
          include: everyTest,
          exclude: ['**/node_modules/**', ...e2eSuites, ...guestSuites, ...browserSuites],
          maxWorkers: 2,
          sequence: { groupOrder: 0 },
        },
      },
      {
        extends: true,
        test: {
          ...shared,
          ...readyFirst('e2e'),
          include: e2eSuites,
          maxWorkers: 2,
          sequence: { groupOrder: 1 },
        },
      },
      {
        extends: true,
        test: {
          ...shared,
          ...readyFirst('browser'),
          include: browserSuites,
          maxWorkers: 1,
          sequence: { groupOrder: 2 },
        },
      },
      {
        extends: true,
        test: {
          ...shared,
          ...readyFirst('guest'),
          include: guestSuites,
          maxWorkers: 1,
          sequence: { groupOrder: 3 },
        },
      },
    ],
  },
});
