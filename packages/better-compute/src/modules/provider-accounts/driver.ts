/**
 * The contract a provider driver implements (docs/provider-accounts.md#the-driver-contract), and the
 * one driver of this release, `ssh`. A driver never sees the database or IAM: the service has
 * decided the call, checked the account's document and opened its credentials (only for the call)
 * before the driver runs, and records what the driver reports.
 */
import type { ProviderAccountConfig } from '@better-compute/core/methods';
import { oneLine, runSsh, SshError, type SshTarget } from './ssh.js';

/** One machine an account holds, by the address the driver reaches it at. */
interface ProviderMachine {
  /** Stable within the account: the ssh driver's user@host:port. */
  address: string;
}

/**
 * Exported because exported functions' inferred types name it (TS4058 otherwise), though no file
 * imports it by name: knip.jsonc skips what is tagged so.
 * @lintignore
 */
export interface ProviderOffer {
  host: string;
  reachable: boolean;
  error: string | null;
  hostname: string | null;
  cores: number | null;
  memoryMiB: number | null;
  gpus: { model: string; memoryMiB: number | null }[];
  /** The node id the machine's bcd holds, as the machine says; the service checks it. */
  nodeId: string | null;
}

/** What bootstrapping one machine needs: the installer, and the join token for its stdin. */
interface BootstrapInput {
  machine: ProviderMachine;
  /** The project's own installer (`daemon install-script`), with the join URL baked in. */
  installer: string;
  /** A fresh single-use join token; it goes to the installer's standard input only. */
  joinToken: string;
}

/** The credentials a driver is handed, opened, for one call. */
type OpenedCredentials = Record<string, string>;

export interface ProviderDriver {
  name: string;
  /** The machines the account holds now. */
  listMachines(config: ProviderAccountConfig): ProviderMachine[];
  /** What each machine can supply, and whether it is already a node; one machine's failure is its row. */
  offers(
    config: ProviderAccountConfig,
    credentials: OpenedCredentials,
    machines: ProviderMachine[],
  ): Promise<ProviderOffer[]>;
  /**
   * Runs the installer on one machine with the token on its standard input; answers the node id
   * its bcd joined as. Idempotent: a machine that is already a node is not joined again (the
   * installer keeps its identity) and answers that node's id. Throws with a one-line reason.
   */
  bootstrap(
    config: ProviderAccountConfig,
    credentials: OpenedCredentials,
    input: BootstrapInput,
  ): Promise<{ nodeId: string }>;
  /**
   * A cloud driver also creates machines (then bootstraps them) and deletes them. The ssh driver's
   * servers are rented outside the platform, so it has neither: the service answers UNSUPPORTED.
   */
  createMachines?(
    config: ProviderAccountConfig,
    credentials: OpenedCredentials,
    request: { count: number; offer: string },
  ): Promise<ProviderMachine[]>;
  deleteMachine?(
    config: ProviderAccountConfig,
    credentials: OpenedCredentials,
    machine: ProviderMachine,
  ): Promise<void>;
}

/** Where the ssh driver keeps the installer on the host between its upload and its run. */
const INSTALLER_PATH = '/var/lib/better-compute-bootstrap/install.sh';

/**
 * What the driver asks a host: one `key=value` line per fact. POSIX sh with coreutils and awk,
 * which a Debian minbase has; nvidia-smi only where it exists.
 */
const PROBE = [
  'printf "hostname=%s\\n" "$(uname -n)"',
  'printf "cores=%s\\n" "$(nproc 2>/dev/null || getconf _NPROCESSORS_ONLN)"',
  'awk \'/^MemTotal:/ {print "memkb=" $2}\' /proc/meminfo',
  'if [ -r /var/lib/bcd/node.json ]; then printf "node=%s\\n" "$(tr -d "\\n" < /var/lib/bcd/node.json)"; fi',
  'if command -v nvidia-smi >/dev/null 2>&1; then nvidia-smi --query-gpu=name,memory.total --format=csv,noheader,nounits 2>/dev/null | sed "s/^/gpu=/"; fi',
  'true',
].join('; ');

function nodeIdOf(json: string | undefined): string | null {
  if (json === undefined) return null;
  try {
    const id = (JSON.parse(json) as { nodeId?: unknown }).nodeId;
    return typeof id === 'string' && /^node_[0-9a-z]{26}$/.test(id) ? id : null;
  } catch {
    return null;
  }
}

function parseProbe(host: string, stdout: string): ProviderOffer {
  const facts = new Map<string, string[]>();
  for (const line of stdout.split('\n')) {
    const eq = line.indexOf('=');
    if (eq <= 0) continue;
    const key = line.slice(0, eq);
    facts.set(key, [...(facts.get(key) ?? []), line.slice(eq + 1)]);
  }
  const int = (value: string | undefined) => {
    const n = Number.parseInt(value ?? '', 10);
    return Number.isSafeInteger(n) && n >= 0 ? n : null;
  };
  const memKb = int(facts.get('memkb')?.[0]);
  return {
    host,
    reachable: true,
    error: null,
    hostname: facts.get('hostname')?.[0] ? oneLine(facts.get('hostname')![0]!).slice(0, 253) : null,
    cores: int(facts.get('cores')?.[0]),
    memoryMiB: memKb === null ? null : Math.floor(memKb / 1024),
    gpus: (facts.get('gpu') ?? []).slice(0, 64).map((row) => {
      const comma = row.lastIndexOf(',');
      return {
        model: oneLine(comma < 0 ? row : row.slice(0, comma)).slice(0, 200),
        memoryMiB: comma < 0 ? null : int(row.slice(comma + 1).trim()),
      };
    }),
    nodeId: nodeIdOf(facts.get('node')?.[0]),
  };
}

function targetOf(config: ProviderAccountConfig, address: string): SshTarget {
  const host = config.settings.hosts.find((entry) => entry.address === address);
  if (!host) throw new SshError(`${address} is not a host of the account`);
  return host;
}

const sshDriver: ProviderDriver = {
  name: 'ssh',
  listMachines: (config) => config.settings.hosts.map((host) => ({ address: host.address })),
  async offers(config, credentials, machines) {
    return Promise.all(
      machines.map(async ({ address }): Promise<ProviderOffer> => {
        try {
          const result = await runSsh(targetOf(config, address), credentials.privateKey!, PROBE, {
            timeoutMs: 30_000,
          });
          if (result.code !== 0)
            throw new SshError(`the probe exited ${result.code}: ${oneLine(result.stderr)}`);
          return parseProbe(address, result.stdout);
        } catch (error) {
          if (!(error instanceof SshError)) throw error;
          return {
            host: address,
            reachable: false,
            error: error.message,
            hostname: null,
            cores: null,
            memoryMiB: null,
            gpus: [],
            nodeId: null,
          };
        }
      }),
    );
  },
  async bootstrap(config, credentials, { machine, installer, joinToken }) {
    const target = targetOf(config, machine.address);
    const key = credentials.privateKey!;
    const upload = await runSsh(
      target,
      key,
      `umask 077 && mkdir -p ${INSTALLER_PATH.replace(/\/[^/]+$/, '')} && cat > ${INSTALLER_PATH}`,
      { stdin: installer, timeoutMs: 120_000 },
    );
    if (upload.code !== 0)
      throw new SshError(`uploading the installer failed (${upload.code}): ${oneLine(upload.stderr)}`);
    // The token is the installer's standard input (--token-file -), never an argument.
    const install = await runSsh(target, key, `sh ${INSTALLER_PATH} --token-file -`, {
      stdin: `${joinToken}\n`,
      timeoutMs: 600_000,
    });
    if (install.code !== 0)
      throw new SshError(
        `the installer exited ${install.code}: ${oneLine(install.stderr.split('\n').filter(Boolean).at(-1) ?? '')}`,
      );
    const identity = await runSsh(target, key, 'cat /var/lib/bcd/node.json', { timeoutMs: 30_000 });
    const nodeId = identity.code === 0 ? nodeIdOf(identity.stdout.trim()) : null;
    if (!nodeId) throw new SshError('the installer finished but the host holds no node identity');
    return { nodeId };
  },
};

export const providerDrivers: Record<string, ProviderDriver> = { ssh: sshDriver };
