/**
 * The `bcd` program: `bcd join`, `bcd run`, `bcd status`. Secrets never come from argv: the join
 * token is read from a file or standard input, and the node credential lives in the state
 * directory only.
 */
import { join as joinPath } from 'node:path';
import { parseArgs } from 'node:util';
import { DAEMON_VERSION, gatewayUrls, runAgent } from './agent.js';
import { join, readCaFile } from './join.js';
import { safe } from './http.js';
import { readMachineInventory } from './inventory.js';
import { DEFAULT_INSTANCE_RANGE, parseRange } from './runtimes/vm-network.js';
import { StateDir } from './state.js';

const USAGE = `usage:
  bcd join --url URL [--url GATEWAY_URL]... --token-file FILE|- [--state-dir DIR] [--ca-file FILE] [--gpu-inventory FILE] [--hostname NAME] [--command-root FILE] [--label KEY=VALUE]... [--timeout SECONDS]
  bcd run [--state-dir DIR] [--url GATEWAY_URL]... [--ca-file FILE] [--gpu-inventory FILE] [--scripts-dir DIR] [--inventory-interval SECONDS] [--instance-range CIDR]
  bcd status [--state-dir DIR]
  bcd inventory [--gpu-inventory FILE]
  bcd version`;

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
        label: { type: 'string', multiple: true },
        timeout: { type: 'string' },
        'inventory-interval': { type: 'string' },
        'stop-grace': { type: 'string' },
        'instance-range': { type: 'string' },
      },
    });
  } catch (error) {
    err(`INVALID_ARGUMENT: ${safe((error as Error).message)}\n${USAGE}`);
    return 2;
  }
  const flags = parsed.values;
  const state = new StateDir(flags['state-dir'] ?? process.env.BCD_STATE_DIR ?? '/var/lib/bcd');
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
        const { nodeId } = await join({
          url: flags.url[0]!,
          caFile: flags['ca-file'],
          gatewayUrls: flags.url.slice(1),
          tokenFile: flags['token-file'],
          state,
          gpuInventoryFile: flags['gpu-inventory'],
          hostname: flags.hostname,
          commandRootFile: flags['command-root'],
          labels,
          progress: err,
          timeoutMs: seconds('timeout', flags.timeout),
        });
        out(JSON.stringify({ nodeId, stateDir: state.dir }));
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
        const controller = new AbortController();
        const stop = () => controller.abort();
        process.once('SIGTERM', stop);
        process.once('SIGINT', stop);
        await runAgent({
          state,
          scriptsDir: flags['scripts-dir'] ?? defaultScriptsDir(),
          gpuInventoryFile: flags['gpu-inventory'],
          inventoryIntervalMs: seconds('inventory-interval', flags['inventory-interval']),
          stopGraceMs: seconds('stop-grace', flags['stop-grace']),
          instanceRange,
          urls: flags.url,
          log: err,
          signal: controller.signal,
        });
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
