/**
 * Running commands: each one is checked (the command root's signature, this node, not expired,
 * a known kind; a destructive kind also its batch's approvals, approvers.ts), recorded in the
 * ledger before it starts, and run once. An exec.script command runs a maintenance script from the
 * scripts directory by name only, never code sent over the wire; metal.power runs the node's own
 * power script (`power-off`, `power-reset`, `power-cycle`) the same way.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createPublicKey, verify } from 'node:crypto';
import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { type CommandEnvelope, destructiveKind, envelopeBytes } from '@better-compute/core';
import { RUNTIME_COMMAND_KINDS, SANDBOX_COMMAND_KINDS } from '@better-compute/core/runtime-commands';
import { type CommandOutcome, outcomeOf } from './state.js';

export { type CommandEnvelope, envelopeBytes };

const ID = /^cmd_[A-Za-z0-9]{1,64}$/;
/**
 * The kinds this daemon runs: its own, and the runtimes' instance commands. metal.power is
 * destructive: it runs only with its batch's quorum (approvers.ts); the other destructive kinds of
 * core's table stay unknown here, so refused.
 */
const KINDS = new Set<string>([
  'inventory.refresh',
  'exec.script',
  'ssh.trust',
  'metal.power',
  // A site agent's BMC call (metal/command.ts); a worker reports it refused.
  'metal.bmc',
  // A site agent's provisioning network's boot entries (metal/site-provisioning.ts).
  'metal.boot-entries',
  'bcd.update',
  'health.check',
  ...RUNTIME_COMMAND_KINDS,
  ...SANDBOX_COMMAND_KINDS,
]);
const SCRIPT = /^[a-z][a-z0-9-]{0,62}$/;
/** The most output kept per stream; the end is kept, where errors usually are. */
const OUTPUT_LIMIT = 65_536;

/** Why a command is refused, or null when it may run. */
export function refusal(
  message: { command?: unknown; signature?: unknown },
  expect: { nodeId: string; commandRoot: string | null; now: Date },
): string | null {
  const command = message.command as CommandEnvelope | undefined;
  if (!command || typeof command !== 'object' || typeof command.id !== 'string' || !ID.test(command.id))
    return 'the command is malformed';
  if (!expect.commandRoot) return 'no command root is pinned on this node';
  if (typeof message.signature !== 'string') return 'the command is not signed';
  let good = false;
  try {
    good = verify(
      null,
      envelopeBytes(command),
      createPublicKey(expect.commandRoot),
      Buffer.from(message.signature, 'base64'),
    );
  } catch {
    good = false;
  }
  if (!good) return 'the signature does not verify under the pinned command root';
  if (command.nodeId !== expect.nodeId)
    return `the command is for node ${String(command.nodeId)}, not this one`;
  const expires = Date.parse(command.expiresAt);
  if (!Number.isFinite(expires) || expires <= expect.now.getTime()) return 'the command has expired';
  if (typeof command.kind !== 'string' || !KINDS.has(command.kind))
    return `unknown command kind ${String(command.kind).slice(0, 64)}`;
  return null;
}

function keepTail(text: string): string {
  return text.length <= OUTPUT_LIMIT ? text : text.slice(-OUTPUT_LIMIT);
}

export interface RunningScript {
  outcome: Promise<CommandOutcome>;
  /** Asks the script to stop: SIGTERM, then SIGKILL after a grace period. */
  stop(reason: 'cancelled' | 'handed-back'): void;
}

/** The installed script of that name in the scripts directory, or null. */
function scriptPath(scriptsDir: string, name: unknown): string | null {
  const path = typeof name === 'string' && SCRIPT.test(name) ? join(scriptsDir, `${name}.sh`) : null;
  return path && existsSync(path) && statSync(path).isFile() ? path : null;
}

/** A command that ran nothing and failed, for `reason`. */
function notRun(reason: string): RunningScript {
  return { outcome: Promise.resolve(outcomeOf('failed', null, reason)), stop() {} };
}

/**
 * The power scripts (`power-off`, …) run only as metal.power, after their batch's approvals were
 * checked; an exec.script that names one would power a machine off with no quorum at all.
 */
const POWER_SCRIPT = /^power-/;

/** Runs a maintenance script by name from the scripts directory, with a clean environment. */
export function runScript(scriptsDir: string, name: unknown, timeoutMs = 600_000): RunningScript {
  if (typeof name === 'string' && POWER_SCRIPT.test(name))
    return notRun(
      `${name.slice(0, 64)} is a power script: it runs only as metal.power, with its batch's approvals`,
    );
  const path = scriptPath(scriptsDir, name);
  if (!path)
    return notRun(
      `no maintenance script ${typeof name === 'string' ? name.slice(0, 64) : ''} is installed on this node`,
    );
  return spawnScript(scriptsDir, path, timeoutMs);
}

/** Runs the script at `path` (checked by the caller) in `scriptsDir`, with a clean environment. */
function spawnScript(scriptsDir: string, path: string, timeoutMs: number): RunningScript {
  let stopped: 'cancelled' | 'handed-back' | 'timeout' | null = null;
  let child: ChildProcess;
  const outcome = new Promise<CommandOutcome>((resolve) => {
    let stdout = '';
    let stderr = '';
    child = spawn('/bin/sh', [path], {
      cwd: scriptsDir,
      env: { PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin', LANG: 'C.UTF-8' },
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    child.stdout!.on('data', (chunk: Buffer) => (stdout = keepTail(stdout + chunk.toString('utf8'))));
    child.stderr!.on('data', (chunk: Buffer) => (stderr = keepTail(stderr + chunk.toString('utf8'))));
    const timer = setTimeout(() => {
      stopped = 'timeout';
      kill();
    }, timeoutMs);
    child.on('error', (error) => {
      clearTimeout(timer);
      resolve({
        state: 'failed',
        exitCode: null,
        stdout,
        stderr,
        result: null,
        error: `the script did not start: ${error.message}`,
      });
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      const exitCode = code ?? (signal ? 128 + (signalNumbers[signal] ?? 15) : null);
      if (stopped === 'cancelled')
        resolve({
          state: 'cancelled',
          exitCode,
          stdout,
          stderr,
          result: null,
          error: 'cancelled while it ran',
        });
      else if (stopped === 'handed-back')
        resolve({
          state: 'failed',
          exitCode,
          stdout,
          stderr,
          result: null,
          error: 'the daemon stopped while it ran; it was not finished',
        });
      else if (stopped === 'timeout')
        resolve({
          state: 'failed',
          exitCode,
          stdout,
          stderr,
          result: null,
          error: 'the script ran past its time limit',
        });
      else
        resolve({
          state: code === 0 ? 'succeeded' : 'failed',
          exitCode,
          stdout,
          stderr,
          result: null,
          error: code === 0 ? null : `the script exited with ${exitCode}`,
        });
    });
  });
  function kill() {
    try {
      process.kill(-child.pid!, 'SIGTERM');
    } catch {
      /* already gone */
    }
    setTimeout(() => {
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        /* already gone */
      }
    }, 5_000).unref();
  }
  return {
    outcome,
    stop(reason) {
      if (stopped) return;
      stopped = reason;
      kill();
    },
  };
}

/**
 * A power script schedules the action and exits (scripts/power-off.sh): a minute is far past that,
 * and a script still running after it is not going to report anything useful.
 */
const POWER_SCRIPT_TIMEOUT_MS = 60_000;
/** The actions core's kinds table gives metal.power (off, reset, cycle): one list for leaf and script. */
const POWER_ACTIONS = destructiveKind('metal.power')!.fields[0]!.choices!;

/**
 * metal.power on this machine: the node's own power script for the action, run as exec.script
 * runs a script. The daemon has no built-in way to power a machine off: without the script the
 * command fails. A script that powers the machine off schedules it and exits, so the result is
 * reported before the session drops (the package's scripts/power-*.sh do, with systemd).
 */
export function runPowerScript(scriptsDir: string, action: unknown): RunningScript {
  if (typeof action !== 'string' || !POWER_ACTIONS.includes(action))
    return notRun(`metal.power needs an action of ${POWER_ACTIONS.join(', ')}`);
  const name = `power-${action}`;
  const path = scriptPath(scriptsDir, name);
  if (!path) return notRun(`no power script ${name} is installed on this node`);
  return spawnScript(scriptsDir, path, POWER_SCRIPT_TIMEOUT_MS);
}

const signalNumbers: Record<string, number> = { SIGHUP: 1, SIGINT: 2, SIGKILL: 9, SIGTERM: 15 };
