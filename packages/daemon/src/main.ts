/**
 * The `bcd` program: `bcd join`, `bcd run`, `bcd status`, `bcd sweep`. Secrets never come from
 * argv: the join token is read from a file or standard input, and the node credential lives in the
 * state directory only.
 */
import { existsSync, fstatSync, readFileSync } from 'node:fs';
import { join as joinPath, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { ComputeError } from '@better-compute/core';
import { DAEMON_VERSION, gatewayUrls, runAgent } from './agent.js';
import { join, readCaFile } from './join.js';
import { safe } from './http.js';
import { readMachineInventory } from './inventory.js';
import { DEFAULT_INSTANCE_RANGE, parseRange } from './runtimes/vm-network.js';
import { runtimeDirFor } from './runtimes/runtime-dir.js';
import { sweep } from './runtimes/teardown.js';
import { StateDir } from './state.js';
import { RESTART_EXIT_CODE } from './update-state.js';

/** Whether `pid` (from the state directory's status.json) is a `bcd run` still running. */
function daemonRuns(pid: number): boolean {
  try {
    const args = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
    return args.includes('run') && args.some((arg) => /(^|\/)bcd(\.cjs)?$/.test(arg));
  } catch {
    return false;
  }
}

const USAGE = `usage:
  bcd join --url URL [--url GATEWAY_URL]... --token-file FILE|- [--state-dir DIR] [--ca-file FILE] [--gpu-inventory FILE] [--hostname NAME] [--command-root FILE] [--approvers FILE] [--release-pins FILE] [--label KEY=VALUE]... [--wait | --no-wait] [--timeout SECONDS]
  bcd run [--state-dir DIR] [--runtime-dir DIR] [--ssh-dir DIR] [--url GATEWAY_URL]... [--ca-file FILE] [--gpu-inventory FILE] [--scripts-dir DIR] [--inventory-interval SECONDS] [--stop-grace SECONDS] [--instance-range CIDR] [--ephemeral] [--supervise] [--pxe-dir DIR [--pxe-subnet CIDR] [--pxe-uplink IF]...]
  bcd sweep [--state-dir DIR] [--runtime-dir DIR]
  bcd status [--state-dir DIR]
  bcd inventory [--gpu-inventory FILE]
  bcd version`;

/**
 * The deploy ramdisk's files in `--ramdisk-dir` (scripts/build-deploy-ramdisk.sh's output): both
 * must be there, or bcd stops before it starts, naming the one that is not.
 */
function ramdiskFiles(dir: string): { kernel: string; initrd: string } {
  const files = { kernel: joinPath(dir, 'vmlinuz'), initrd: joinPath(dir, 'initrd.gz') };
  for (const path of Object.values(files))
    if (!existsSync(path))
      throw new ComputeError('INVALID_ARGUMENT', `--ramdisk-dir: ${path} does not exist`, {
        hint: 'Point it at the directory scripts/build-deploy-ramdisk.sh printed.',
      });
  return files;
}

/** Where the shipped maintenance scripts are: beside the bundle, in ../scripts. */
function defaultScriptsDir(): string {
  return process.env.BCD_SCRIPTS_DIR ?? joinPath(__dirname, '..', 'scripts');
}

export async function main(
  argv: string[],
  out = (line: string) => console.log(line),
  err = (line: string) => console.error(line),
): Promise<number> {
  const [verb, ...rest] = argv;
  let parsed;
  try {
    parsed = parseArgs({
      args: rest,
      strict: true,
      allowPositionals: false,
      options: {
        url: { type: 'string', multiple: true },
        'ca-file': { type: 'string' },
        'token-file': { type: 'string' },
        'state-dir': { type: 'string' },
        'gpu-inventory': { type: 'string' },
        'scripts-dir': { type: 'string' },
        hostname: { type: 'string' },
        'command-root': { type: 'string' },
        approvers: { type: 'string' },
        label: { type: 'string', multiple: true },
        timeout: { type: 'string' },
        'inventory-interval': { type: 'string' },
        'stop-grace': { type: 'string' },
        'instance-range': { type: 'string' },
        'runtime-dir': { type: 'string' },
        'ssh-dir': { type: 'string' },
        ephemeral: { type: 'boolean' },
        supervise: { type: 'boolean' },
        'release-pins': { type: 'string' },
        wait: { type: 'boolean' },
        'no-wait': { type: 'boolean' },
        'pxe-dir': { type: 'string' },
        'pxe-subnet': { type: 'string' },
        'pxe-uplink': { type: 'string', multiple: true },
        'ramdisk-dir': { type: 'string' },
      },
    });
  } catch (error) {
    err(`INVALID_ARGUMENT: ${safe((error as Error).message)}\n${USAGE}`);
    return 2;
  }
  const flags = parsed.values;
  const state = new StateDir(resolve(flags['state-dir'] ?? process.env.BCD_STATE_DIR ?? '/var/lib/bcd'));
  // The VMs' sockets: a short directory keyed by the state directory's path, so its length never matters.
  const runtimeDir = runtimeDirFor(
    state.dir,
    flags['runtime-dir'] ? { ...process.env, BCD_RUNTIME_DIR: flags['runtime-dir'] } : process.env,
  );
  const seconds = (name: 'timeout' | 'inventory-interval' | 'stop-grace', value: string | undefined) => {
    if (value === undefined) return undefined;
    const n = Number(value);
    if (!Number.isFinite(n) || n <= 0 || n > 86_400)
      throw new Error(`--${name} must be a number of seconds from 0 to 86400`);
    return n * 1000;
  };
  try {
    switch (verb) {
      case 'join': {
        if (!flags.url?.length || !flags['token-file']) {
          err(
            `INVALID_ARGUMENT: bcd join needs --url and --token-file (a file, or - for standard input)\n${USAGE}`,
          );
          return 2;
        }
        const labels: Record<string, string> = {};
        for (const item of flags.label ?? []) {
          const at = item.indexOf('=');
          if (at <= 0) throw new Error(`--label ${item.slice(0, 100)} is not KEY=VALUE`);
          labels[item.slice(0, at)] = item.slice(at + 1);
        }
        if (flags.wait && flags['no-wait']) {
          err(`INVALID_ARGUMENT: bcd join takes --wait (the default) or --no-wait, not both\n${USAGE}`);
          return 2;
        }
        const joined = await join({
          url: flags.url[0]!,
          caFile: flags['ca-file'],
          gatewayUrls: flags.url.slice(1),
          tokenFile: flags['token-file'],
          state,
          gpuInventoryFile: flags['gpu-inventory'],
          hostname: flags.hostname,
          commandRootFile: flags['command-root'],
          approversFile: flags.approvers,
          releasePinsFile: flags['release-pins'],
          labels,
          progress: err,
          timeoutMs: seconds('timeout', flags.timeout),
          noWait: flags['no-wait'],
        });
        // The result only: every line of progress went to standard error.
        out(
          JSON.stringify(
            'joinRequestId' in joined
              ? { nodeId: null, joinRequestId: joined.joinRequestId, state: 'pending', stateDir: state.dir }
              : { nodeId: joined.nodeId, stateDir: state.dir },
          ),
        );
        return 0;
      }
      case 'run': {
        // The private range instances' addresses come from: checked here, so a mistyped range stops
        // bcd before it starts rather than when the first instance does.
        const instanceRange =
          flags['instance-range'] ?? (process.env.BCD_INSTANCE_RANGE || DEFAULT_INSTANCE_RANGE);
        try {
          parseRange(instanceRange);
        } catch (error) {
          err(`INVALID_ARGUMENT: --instance-range: ${safe((error as Error).message)}\n${USAGE}`);
          return 2;
        }
        if (flags['ca-file']) {
          const identity = state.identity();
          if (identity) state.saveIdentity({ ...identity, gatewayCa: readCaFile(flags['ca-file']) });
        }
        // A reader of its output that is gone (dev killed) must not end the daemon half way through
        // stopping: what it says is dropped from then on.
        for (const stream of [process.stdout, process.stderr]) stream.on('error', () => {});
        const controller = new AbortController();
        const stop = (why: string) => {
          if (!controller.signal.aborted) return controller.abort();
          // Stopping its VMs and sandboxes is under way: a second signal does not cut it short (a
          // SIGKILL does, and the next start sweeps).
          if (flags.ephemeral) err(`bcd: ${why} again; still stopping its VMs and sandboxes`);
        };
        if (flags.ephemeral) {
          process.on('SIGTERM', () => stop('SIGTERM'));
          process.on('SIGINT', () => stop('SIGINT'));
          // Started with a pipe as standard input (by dev: a socket pair, as Node makes them): its
          // end means the starter is gone, and a daemon whose workloads do not outlive it must not
          // outlive its starter either. A terminal or /dev/null is not watched.
          const input = fstatSync(0);
          if (input.isFIFO() || input.isSocket()) {
            process.stdin.on('end', () => stop('its standard input closed'));
            process.stdin.on('error', () => stop('its standard input closed'));
            process.stdin.resume();
          }
        } else {
          process.once('SIGTERM', () => stop('SIGTERM'));
          process.once('SIGINT', () => stop('SIGINT'));
        }
        if (flags.supervise) {
          // Normally bin/bcd.cjs runs the supervisor's own bundle; this is the same code, in this one.
          const { supervise } = await import('./supervisor.js');
          return supervise(
            process.argv[1]!,
            rest.filter((arg) => arg !== '--supervise'),
            err,
          );
        }
        const ended = await runAgent({
          state,
          scriptsDir: flags['scripts-dir'] ?? defaultScriptsDir(),
          gpuInventoryFile: flags['gpu-inventory'],
          inventoryIntervalMs: seconds('inventory-interval', flags['inventory-interval']),
          stopGraceMs: seconds('stop-grace', flags['stop-grace']),
          instanceRange,
          urls: flags.url,
          log: err,
          signal: controller.signal,
          runtimeDir,
          sshDir: flags['ssh-dir'] ? resolve(flags['ssh-dir']) : undefined,
          ephemeral: flags.ephemeral,
          // A site agent's provisioning network: the site's PXE, its discovery reported (docs/metal-drivers.md).
          provisioning: flags['pxe-dir']
            ? {
                dir: resolve(flags['pxe-dir']),
                subnet: flags['pxe-subnet'],
                uplinks: flags['pxe-uplink'],
                ramdisk: flags['ramdisk-dir'] ? ramdiskFiles(resolve(flags['ramdisk-dir'])) : undefined,
              }
            : undefined,
        });
        if (flags.ephemeral) process.stdin.destroy();
        // An update installed or undone: the supervisor starts the bundle now in place.
        return ended === 'restart' ? RESTART_EXIT_CODE : 0;
      }
      case 'sweep': {
        // Never under a live daemon: it would stop the VMs and sandboxes that daemon runs.
        const running = state.status();
        if (running?.pid && running.pid !== process.pid && daemonRuns(running.pid)) {
          err(
            `INVALID_STATE: bcd run (pid ${running.pid}) holds ${state.dir}; stop it first (an ephemeral one sweeps as it stops)`,
          );
          return 1;
        }
        const report = await sweep({
          stateDir: state.dir,
          runtimeDir,
          log: err,
          graceMs: 10_000,
          instanceRange: flags['instance-range'],
        });
        out(JSON.stringify(report));
        return 0;
      }
      case 'status': {
        const identity = state.identity();
        const status = state.status();
        const certificate = state.certificate();
        out(
          JSON.stringify(
            {
              joined: identity !== null,
              nodeId: identity?.nodeId ?? null,
              url: identity?.url ?? null,
              commandRootPinned: Boolean(identity?.commandRoot),
              certificate: certificate
                ? {
                    notBefore: certificate.notBefore,
                    notAfter: certificate.notAfter,
                    expired: Date.parse(certificate.notAfter) <= Date.now(),
                  }
                : null,
              gateways: gatewayUrls(state),
              pendingJoin: state.pendingJoin()?.joinRequestId ?? null,
              session: status,
              commandsRecorded: Object.keys(state.ledger()).length,
            },
            null,
            2,
          ),
        );
        return identity ? 0 : 1;
      }
      case 'inventory':
        out(JSON.stringify(readMachineInventory({ gpuInventoryFile: flags['gpu-inventory'] }), null, 2));
        return 0;
      case 'version':
        out(DAEMON_VERSION);
        return 0;
      default:
        err(
          `INVALID_ARGUMENT: ${verb ? `unknown command ${safe(verb).slice(0, 50)}` : 'no command'}\n${USAGE}`,
        );
        return 2;
    }
  } catch (error) {
    const code = (error as { code?: string }).code;
    err(`${code && /^[A-Z_]+$/.test(code) ? code : 'FAILED'}: ${safe((error as Error).message)}`);
    return 1;
  }
}
