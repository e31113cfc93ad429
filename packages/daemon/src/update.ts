/**
 * bcd updates itself (issue 33 item 4; docs/rollouts.md): a `bcd.update` command carries a release
 * envelope; the daemon checks it against the release keys it pinned (release-pins.ts), the version
 * rule and its platform before anything is fetched, fetches the build through its gateway session,
 * checks the bytes (size and SHA-256), and only then swaps the bundle it runs from: the new one is
 * written beside and synced, the running one is copied to `<bundle>.previous`, and a rename puts
 * the new one in place. It records the trial (update-state.ts) and stops with RESTART_EXIT_CODE;
 * its supervisor starts the new version, which reports the command once it has reconnected and
 * passed its health check, or the supervisor puts the previous bundle back and the old version
 * reports why. A refusal (unpinned signer, too few signatures, a downgrade, a wrong digest, no
 * supervisor) fails the command with the step's code; nothing on disk changes.
 */
import { existsSync, readFileSync, statSync } from 'node:fs';
import { ComputeError } from '@better-compute/core';
import { checkUpgrade, verifyRelease } from '@better-compute/core/release';
import { DAEMON_VERSION } from './version.js';
import { checkRelease, daemonPlatform } from './release-check.js';
import { pinnedReleaseTrust } from './release-pins.js';
import { safe } from './http.js';
import { type CommandOutcome, outcomeOf, type StateDir } from './state.js';
import { runScript } from './commands.js';
import { readUpdate, rollBack, type UpdateRecord, writeFileDurably, writeUpdate } from './update-state.js';

/** The largest build a daemon fetches: far above any bcd bundle. */
const MAX_BUILD_BYTES = 256 * 1024 * 1024;

export interface UpdateEnvironment {
  state: StateDir;
  log: (line: string) => void;
  /** A piece of a stored build from the gateway, over the session. */
  fetchPiece(version: string, platform: string, offset: number): Promise<{ size: number; data: Buffer }>;
  /** The file this daemon runs from (the bundle); null when it does not run from one. */
  bundle: string | null;
  /** Whether something restarts this daemon when it exits for an update (bcd run --supervise). */
  supervised: boolean;
  now?: () => Date;
}

export type UpdateAnswer = { restart: UpdateRecord } | { outcome: CommandOutcome };

/** The file a bundled daemon runs from: `__filename` in the CommonJS bundle, BCD_BUNDLE to override. */
export function runningBundle(): string | null {
  if (process.env.BCD_BUNDLE) return process.env.BCD_BUNDLE;
  return typeof __filename === 'string' && /\.cjs$/.test(__filename) ? __filename : null;
}

const refused = (why: string): UpdateAnswer => ({
  outcome: outcomeOf('failed', null, `refused by the node: ${safe(why).slice(0, 1500)}`),
});

function describe(error: unknown): string {
  if (error instanceof ComputeError || (error as { code?: unknown })?.code)
    return `${String((error as { code: string }).code)}: ${(error as Error).message}`;
  return (error as Error).message ?? String(error);
}

export async function installUpdate(
  command: { id: string; payload: Record<string, unknown> },
  env: UpdateEnvironment,
): Promise<UpdateAnswer> {
  const { release, healthTimeoutSeconds } = command.payload as {
    release?: unknown;
    healthTimeoutSeconds?: unknown;
  };
  if (
    typeof healthTimeoutSeconds !== 'number' ||
    !Number.isInteger(healthTimeoutSeconds) ||
    healthTimeoutSeconds < 10 ||
    healthTimeoutSeconds > 86_400
  )
    return refused(
      'INVALID_ARGUMENT: healthTimeoutSeconds must be a whole number of seconds from 10 to 86400',
    );
  if (!env.supervised)
    return refused(
      'INVALID_STATE: this bcd has no supervisor to start the new version or return to this one; run it as bcd run --supervise (the package’s systemd unit does)',
    );
  if (!env.bundle) return refused('INVALID_STATE: this bcd does not run from a bundle it could replace');
  let trust;
  try {
    trust = pinnedReleaseTrust(env.state);
  } catch (error) {
    return refused(`INVALID_STATE: ${describe(error)}`);
  }
  if (!trust)
    return refused(
      'INVALID_STATE: no release keys are pinned on this node (bcd join --release-pins, or the deployment’s release.pins at its first session)',
    );
  const platform = daemonPlatform();
  let version: string;
  let size: number;
  try {
    // What is signed and whether the move is allowed, before a byte is fetched.
    const verified = verifyRelease(release, { pins: trust });
    checkUpgrade(DAEMON_VERSION, verified.manifest);
    const artifact = verified.manifest.artifacts.find((a) => a.platform === platform);
    if (!artifact)
      throw new ComputeError(
        'NOT_FOUND',
        `release ${verified.manifest.version} has no build for ${platform}`,
      );
    version = verified.manifest.version;
    size = artifact.size;
  } catch (error) {
    return refused(describe(error));
  }
  if (size > MAX_BUILD_BYTES)
    return refused(
      `INVALID_ARGUMENT: the build is ${size} bytes, past the ${MAX_BUILD_BYTES} a node fetches`,
    );
  env.log(`bcd: fetching release ${version} (${platform}, ${size} bytes) through the gateway`);
  const pieces: Buffer[] = [];
  let fetched = 0;
  try {
    while (fetched < size) {
      const piece = await env.fetchPiece(version, platform, fetched);
      if (piece.data.length === 0) throw new Error(`the gateway sent no bytes at offset ${fetched}`);
      if (fetched + piece.data.length > size)
        throw new ComputeError(
          'DIGEST_MISMATCH',
          `the gateway sent more than the ${size} bytes the manifest names`,
        );
      pieces.push(piece.data);
      fetched += piece.data.length;
    }
  } catch (error) {
    return refused(`fetching the build failed: ${describe(error)}`);
  }
  const bytes = Buffer.concat(pieces);
  let step;
  try {
    // The whole check again, now with the bytes: signatures, version rule, size and SHA-256.
    step = checkRelease(release, bytes, { trust }).step;
  } catch (error) {
    return refused(describe(error));
  }
  const bundle = env.bundle;
  const previous = `${bundle}.previous`;
  try {
    const mode = statSync(bundle).mode & 0o777;
    // The running bundle kept as it is, then the new one in its place: each written beside,
    // synced and renamed, so the path always holds a whole bundle, the old or the new.
    writeFileDurably(previous, readFileSync(bundle), mode);
    writeFileDurably(bundle, bytes, mode);
  } catch (error) {
    return refused(`INTERNAL: swapping the bundle failed: ${describe(error)}`);
  }
  const now = (env.now ?? (() => new Date()))();
  const record: UpdateRecord = {
    commandId: command.id,
    from: step.from,
    to: step.to,
    phase: 'trial',
    bundle,
    previous,
    startedAt: now.toISOString(),
    deadline: new Date(now.getTime() + healthTimeoutSeconds * 1000).toISOString(),
    reason: null,
    finishedAt: null,
    reported: false,
  };
  writeUpdate(env.state.dir, record);
  env.log(`bcd: installed release ${step.to} in place of ${step.from}; restarting into it`);
  return { restart: record };
}

/**
 * The daemon's health check (`health.check`, and the check a new version passes before it calls
 * itself healthy): the session is up (it is asked over it), the state directory takes a write, and
 * the node's `health-check` script (shipped with the package) passes when it is installed in the scripts directory.
 */
export async function healthCheck(state: StateDir, scriptsDir: string): Promise<CommandOutcome> {
  try {
    writeFileDurably(`${state.dir}/health-probe`, new Date().toISOString(), 0o600);
  } catch (error) {
    return outcomeOf('failed', null, `the state directory takes no write: ${safe((error as Error).message)}`);
  }
  if (!existsSync(`${scriptsDir}/health-check.sh`))
    return outcomeOf('succeeded', { version: DAEMON_VERSION, script: null });
  const outcome = await runScript(scriptsDir, 'health-check', 60_000).outcome;
  return {
    ...outcome,
    result: { version: DAEMON_VERSION, script: 'health-check' },
    error: outcome.state === 'succeeded' ? null : `the health script failed: ${outcome.error ?? ''}`,
  };
}

/**
 * What a daemon does about a recorded update once its session is up: the new version on trial runs
 * its health check and reports the update succeeded (or, failing it, rolls back and restarts); an
 * old version back after a rollback reports the update failed with the supervisor's reason. Each
 * outcome is written to the ledger first, so a repeated delivery of the command is answered from
 * it. Answers true when the daemon must restart (it rolled back by itself).
 */
export async function settleUpdate(
  state: StateDir,
  scriptsDir: string,
  log: (line: string) => void,
  report: (id: string, outcome: CommandOutcome) => void,
): Promise<boolean> {
  const record = readUpdate(state.dir);
  if (!record || record.reported) return false;
  if (record.phase === 'trial' && record.to === DAEMON_VERSION) {
    const health = await healthCheck(state, scriptsDir);
    if (health.state !== 'succeeded') {
      const reason = `version ${record.to} reconnected but failed its health check: ${health.error ?? 'no reason given'}`;
      rollBack(state.dir, record, reason);
      log(`bcd: ${reason}; returning to ${record.from}`);
      return true;
    }
    const healthy: UpdateRecord = { ...record, phase: 'healthy', finishedAt: new Date().toISOString() };
    writeUpdate(state.dir, healthy);
    const outcome = outcomeOf('succeeded', {
      from: record.from,
      to: record.to,
      restartedInMs: Date.parse(healthy.finishedAt!) - Date.parse(record.startedAt),
    });
    state.record(record.commandId, { state: 'done', at: healthy.finishedAt!, result: outcome });
    report(record.commandId, outcome);
    writeUpdate(state.dir, { ...healthy, reported: true });
    log(`bcd: version ${record.to} is healthy; the update from ${record.from} is done`);
    return false;
  }
  if (record.phase === 'trial') {
    // The trial's version is not the one running: the new bundle never took over.
    rollBack(state.dir, record, `version ${record.to} never started; ${DAEMON_VERSION} is running`);
    return settleUpdate(state, scriptsDir, log, report);
  }
  if (record.phase === 'rolled-back') {
    const outcome = outcomeOf(
      'failed',
      { from: record.from, to: record.to, rolledBack: true },
      `rolled back to ${record.from}: ${record.reason ?? 'no reason recorded'}`,
    );
    state.record(record.commandId, { state: 'done', at: new Date().toISOString(), result: outcome });
    report(record.commandId, outcome);
    writeUpdate(state.dir, { ...record, reported: true });
    log(`bcd: reported that the update to ${record.to} was rolled back: ${safe(record.reason ?? '')}`);
  }
  return false;
}

/** The update this daemon is reporting on itself (its command is answered by settleUpdate, not the queue). */
export function updateInProgress(state: StateDir, commandId: string): boolean {
  const record = readUpdate(state.dir);
  return record !== null && record.commandId === commandId;
}

/** Pieces of a build asked of the gateway over the session: one request at a time, each answered by id. */
export function createPieceFetcher(send: (message: Record<string, unknown>) => boolean) {
  let next = 1;
  const waiting = new Map<
    number,
    {
      resolve: (piece: { size: number; data: Buffer }) => void;
      reject: (error: Error) => void;
      timer: NodeJS.Timeout;
    }
  >();
  return {
    fetch(version: string, platform: string, offset: number) {
      return new Promise<{ size: number; data: Buffer }>((resolve, reject) => {
        const id = next++;
        const timer = setTimeout(() => {
          waiting.delete(id);
          reject(new Error('the gateway did not answer in 30 s'));
        }, 30_000);
        waiting.set(id, { resolve, reject, timer });
        if (!send({ t: 'release.fetch', id, version, platform, offset })) {
          clearTimeout(timer);
          waiting.delete(id);
          reject(new Error('the session to the gateway is down'));
        }
      });
    },
    /** True when the message was an answer to a fetch. */
    onMessage(message: Record<string, unknown>): boolean {
      if (message.t !== 'release.piece') return false;
      const entry = typeof message.id === 'number' ? waiting.get(message.id) : undefined;
      if (!entry) return true;
      waiting.delete(message.id as number);
      clearTimeout(entry.timer);
      if (typeof message.error === 'string') entry.reject(new Error(safe(message.error).slice(0, 500)));
      else if (typeof message.data !== 'string' || typeof message.size !== 'number')
        entry.reject(new Error('the gateway sent a malformed piece'));
      else entry.resolve({ size: message.size, data: Buffer.from(message.data, 'base64') });
      return true;
    },
    closeAll() {
      for (const [id, entry] of waiting) {
        clearTimeout(entry.timer);
        entry.reject(new Error('the session to the gateway ended'));
        waiting.delete(id);
      }
    },
  };
}
