/**
 * bcd's own supervisor (`bcd run --supervise`; the package's systemd unit runs it, and systemd
 * restarts the supervisor should it die). It runs `bcd run` as its child and stays out of its way:
 * signals are passed on, and the child's exit is the supervisor's, with two exceptions. A child that
 * stops with RESTART_EXIT_CODE (it installed an update) is started again at once, from the bundle
 * now in place. A child started while an update is on trial (update.json, phase `trial`) that exits
 * before it recorded itself healthy, or is still not healthy at the trial's deadline, is stopped,
 * and the previous bundle is put back before the next start: the old version then reports why.
 *
 * This file is its own bundle (dist/supervisor.cjs), never replaced by a self-update, so a new
 * build that cannot even start still has something outside it that returns to the old one. It
 * imports only Node and update-state.ts.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { resolve } from 'node:path';
import { readUpdate, RESTART_EXIT_CODE, rollBack } from './update-state.js';

/** How long past a trial's deadline a child still not healthy is given before it is stopped. */
const DEADLINE_GRACE_MS = 2_000;
/** How long a child asked to stop has before it is killed. */
const STOP_GRACE_MS = 10_000;

function stateDirOf(args: string[]): string {
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    if (arg === '--state-dir' && args[i + 1]) return resolve(args[i + 1]!);
    if (arg.startsWith('--state-dir=')) return resolve(arg.slice('--state-dir='.length));
  }
  return resolve(process.env.BCD_STATE_DIR ?? '/var/lib/bcd');
}

/** Control characters out, one line, bounded: the child's words travel into a command's error. */
const plain = (text: string) =>
  text
    .replace(/[\u0000-\u001f\u007f-\u009f]+/g, ' ')
    .trim()
    .slice(0, 300);

/**
 * Supervises `bcd run` with `args` (the run flags, --supervise removed) by starting `launcher`
 * (bin/bcd.cjs) again each time. Answers the exit status the supervisor ends with.
 */
export async function supervise(
  launcher: string,
  args: string[],
  log: (line: string) => void = (line) => process.stderr.write(`${line}\n`),
): Promise<number> {
  const stateDir = stateDirOf(args);
  let stopping: NodeJS.Signals | null = null;
  let child: ChildProcess | null = null;
  const onSignal = (signal: NodeJS.Signals) => {
    stopping = signal;
    child?.kill(signal);
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  try {
    for (let starts = 0; ; starts++) {
      const record = readUpdate(stateDir);
      const onTrial = record?.phase === 'trial';
      const started = Date.now();
      const current = spawn(process.execPath, [launcher, 'run', ...args], {
        env: { ...process.env, BCD_SUPERVISED: '1' },
        stdio: ['inherit', 'inherit', 'pipe'],
      });
      child = current;
      // The child's standard error is passed through; its last lines say why a build did not start.
      const tail: string[] = [];
      current.stderr!.on('data', (chunk: Buffer) => {
        process.stderr.write(chunk);
        for (const line of chunk.toString('utf8').split('\n').filter(Boolean)) {
          tail.push(line);
          if (tail.length > 5) tail.shift();
        }
      });
      let timedOut = false;
      const deadline = onTrial ? Date.parse(record!.deadline) : NaN;
      const watch = onTrial
        ? setInterval(() => {
            const now = readUpdate(stateDir);
            if (now?.phase !== 'trial' || Date.now() < deadline + DEADLINE_GRACE_MS || timedOut) return;
            timedOut = true;
            log(`bcd supervisor: version ${now.to} is not healthy at its deadline; stopping it`);
            current.kill('SIGTERM');
            setTimeout(() => current.kill('SIGKILL'), STOP_GRACE_MS).unref();
          }, 500)
        : undefined;
      const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((done) =>
        current.on('exit', (c, s) => done([c, s])),
      );
      clearInterval(watch);
      child = null;
      if (stopping) return code ?? 128 + (signal === 'SIGKILL' ? 9 : 15);
      const after = readUpdate(stateDir);
      if (onTrial && after?.phase === 'trial' && after.commandId === record!.commandId) {
        const how = code !== null ? `exited with code ${code}` : `was ended by ${signal}`;
        const reason = timedOut
          ? `version ${after.to} did not reconnect and pass its health check within its ${Math.round((deadline - Date.parse(after.startedAt)) / 1000)} s`
          : `version ${after.to} ${how} ${Math.round((Date.now() - started) / 1000)} s after it started, before it was healthy${tail.length ? `: ${plain(tail.at(-1)!)}` : ''}`;
        try {
          rollBack(stateDir, after, reason);
          log(`bcd supervisor: returned to version ${after.from}: ${reason}`);
        } catch (error) {
          log(`bcd supervisor: returning to the previous bundle failed: ${(error as Error).message}`);
          return 1;
        }
        continue;
      }
      if (code === RESTART_EXIT_CODE) {
        log('bcd supervisor: the daemon asked to be started again');
        continue;
      }
      return code ?? 1;
    }
  } finally {
    process.off('SIGTERM', onSignal);
    process.off('SIGINT', onSignal);
  }
}
