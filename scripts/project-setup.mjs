#!/usr/bin/env node
/**
 * A test project's host set-up, run beside the tests that need none of it: the host packages
 * (apt), the console's production build and the guest image are minutes of downloading and
 * unpacking on a fresh machine, so test/global-setup.ts starts them in the background while the
 * unit tests run, and each file of a project that needs them waits for its project's set-up first
 * (test/project-ready.ts).
 *
 *   node scripts/project-setup.mjs NAME [--host GROUP,…] [--console] [--guest-image]
 *
 * Set-ups of several projects run one after another (apt takes one installer at a time); each
 * writes node_modules/.cache/test-setup/NAME.json when it ends, `{ "code": 0 }` or the failure, and
 * its progress to NAME.log beside it.
 */
import { spawn, spawnSync } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ensureConsoleBuilt, withLock } from './ensure.mjs';
import { installHostTools } from './host-tools.mjs';

const root = new URL('..', import.meta.url).pathname;
const stateDir = join(root, 'node_modules', '.cache', 'test-setup');
const statePath = (name) => join(stateDir, `${name}.json`);
const logPath = (name) => join(stateDir, `${name}.log`);

/**
 * Starts a project's set-up in the background and returns at once; its state file says "running"
 * (with the child's pid) before this returns, so a waiter never mistakes a set-up not yet begun for
 * one that ended.
 */
export function startProjectSetup(name, { hostGroups, console: buildConsole, guestImage }) {
  mkdirSync(stateDir, { recursive: true });
  const log = openSync(logPath(name), 'w');
  const args = [join(root, 'scripts', 'project-setup.mjs'), name];
  if (hostGroups.length > 0) args.push('--host', hostGroups.join(','));
  if (buildConsole) args.push('--console');
  if (guestImage) args.push('--guest-image');
  const child = spawn(process.execPath, args, { stdio: ['ignore', log, log], detached: true });
  closeSync(log);
  writeFileSync(statePath(name), JSON.stringify({ pid: child.pid }));
  child.unref();
  console.error(`better-compute: setting up the ${name} tests in the background (${logPath(name)})`);
}

/** Waits until the project's set-up has ended; throws with its log's end when it failed or died. */
export async function waitForProjectSetup(name, { timeoutMs = 30 * 60_000 } = {}) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const state = readState(name);
    if (state === null) return; // Nothing was started for it (a run that set it up in the foreground).
    if ('code' in state) {
      if (state.code === 0) return;
      throw new Error(`the ${name} tests' set-up failed: ${state.error}\n${logTail(name)}`);
    }
    if (!alive(state.pid))
      throw new Error(
        `the ${name} tests' set-up (pid ${state.pid}) ended without a result\n${logTail(name)}`,
      );
    if (Date.now() > deadline)
      throw new Error(`the ${name} tests' set-up took over ${timeoutMs / 60_000} minutes`);
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
}

function readState(name) {
  if (!existsSync(statePath(name))) return null;
  try {
    return JSON.parse(readFileSync(statePath(name), 'utf8'));
  } catch {
    return { pid: 0 }; // Being written: the next look reads it whole.
  }
}

function logTail(name) {
  try {
    return readFileSync(logPath(name), 'utf8').split('\n').slice(-20).join('\n');
  } catch {
    return '';
  }
}

function alive(pid) {
  if (!pid) return true;
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return error.code === 'EPERM';
  }
}

async function run(name, args) {
  const hostAt = args.indexOf('--host');
  const groups = hostAt >= 0 ? args[hostAt + 1].split(',') : [];
  try {
    // One installer at a time: the projects' set-ups queue here.
    if (groups.length > 0)
      withLock('host-setup', () =>
        installHostTools(groups, { log: console.error, why: `the ${name} tests` }),
      );
    if (args.includes('--console')) ensureConsoleBuilt();
    // The image is built by the first suite that asks for it when this cannot (not root, no tools);
    // built here, it is ready in the cache when the guest suites start.
    if (args.includes('--guest-image') && process.getuid?.() === 0) {
      const built = spawnSync(join(root, 'scripts', 'build-guest-image.sh'), [], { stdio: 'inherit' });
      if (built.status !== 0)
        console.error('the guest image did not build here; the guest suites will report why');
    }
    writeFileSync(statePath(name), JSON.stringify({ code: 0 }));
  } catch (error) {
    writeFileSync(
      statePath(name),
      JSON.stringify({ code: 1, error: error instanceof Error ? error.message : String(error) }),
    );
    process.exitCode = 1;
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await run(process.argv[2], process.argv.slice(3));
