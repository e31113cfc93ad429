/**
 * The state directory (mode 0700, files 0600): the node's identity (`node.json`: URL, node id,
 * node credential, pinned command root), a pending join (`join.json`), the ledger of commands
 * this node has started (`commands.json`, so a restarted daemon never runs one twice) and the
 * last session status (`status.json`, no secrets), the node's key pair (`node-key.json`), its
 * certificate (`certificate.json`), the gateway replicas last heard of (`gateways.json`), the
 * approver set it pinned (`approvers.json`) and the approved batch leaves it has run whose windows
 * are still open (`quorum-leaves.json`, approvers.ts). Every write replaces the file atomically.
 */
import {
  chmodSync,
  closeSync,
  fsyncSync,
  mkdirSync,
  openSync,
  readFileSync,
  renameSync,
  writeSync,
} from 'node:fs';
import { join } from 'node:path';

export interface NodeIdentity {
  url: string;
  nodeId: string;
  nodeCredential: string;
  /** The command root's public key (SPKI PEM) this node trusts; pinned at join or at the first session. */
  commandRoot: string | null;
  /** CA certificates (PEM) to trust for a TLS gateway before the node holds its own certificate (--ca-file). */
  gatewayCa?: string | null;
  /**
   * `site-agent` when it joined with a site token (`stok_…`): it then runs its site's BMC commands
   * (metal.bmc), which a worker refuses, and says `site.agent` in its hello.
   */
  role?: 'site-agent';
}

/** The node's key pair (ECDSA P-256), made at join; the private half never leaves this directory. */
export interface NodeKey {
  privateKeyPem: string;
  publicKeyPem: string;
}

/** The node's certificate from the machine CA, and the CAs the gateway said to trust. */
export interface NodeCertificate {
  certificatePem: string;
  notBefore: string;
  notAfter: string;
  caCertificates: string[];
}

export interface PendingJoin {
  /** The role the token gave (a site token's `site-agent`), kept for the identity once approved. */
  role?: 'site-agent';
  url: string;
  joinRequestId: string;
  claimSecret: string;
}

export interface LedgerEntry {
  state: 'started' | 'done';
  at: string;
  result?: CommandOutcome;
}

export interface CommandOutcome {
  state: 'succeeded' | 'failed' | 'cancelled';
  exitCode: number | null;
  stdout: string;
  stderr: string;
  result: Record<string, unknown> | null;
  error: string | null;
}

/** The outcome of a command that runs no program (no exit code, no output): a result or a reason. */
export function outcomeOf(
  state: CommandOutcome['state'],
  result: Record<string, unknown> | null,
  error: string | null = null,
): CommandOutcome {
  return { state, exitCode: null, stdout: '', stderr: '', result, error };
}

/** The approver set this node trusts for destructive commands, as approvers.ts pinned it. */
export interface PinnedApprovers {
  /** An ApproverSet; read back through `readApproverSet` (approvers.ts), never trusted as it lies. */
  set: unknown;
  pinnedAt: string;
}

/** The release keys a node pinned, and how many must sign a release it installs. */
export interface PinnedReleaseKeys {
  pins: string[];
  threshold: number;
  pinnedAt: string;
  /**
   * Where the pin came from: `bcd join --release-pins`, the first session's welcome, or a signed
   * release-pin statement the daemon followed.
   */
  source: 'join' | 'welcome' | 'statement';
  /** The statement epoch these pins came with; absent (0) for the pins of the join. */
  epoch?: number;
}

/** A batch leaf this node has run a command for: the leaf is `<batchId>#<index>`. */
export interface UsedLeaf {
  commandId: string;
  /** The batch's window end; past it the entry is dropped, as the quorum check refuses the leaf anyway. */
  notAfter: string;
}

export interface SessionStatus {
  pid: number;
  connected: boolean;
  since: string;
  lastHeartbeatAt: string | null;
  nodeState: string | null;
  commandsRun: number;
}

/** The ledger keeps this many entries; older ones have long expired, so the expiry check refuses them. */
const LEDGER_LIMIT = 10_000;

export class StateDir {
  constructor(readonly dir: string) {}

  ensure(): void {
    mkdirSync(this.dir, { recursive: true, mode: 0o700 });
    chmodSync(this.dir, 0o700);
  }

  private read<T>(name: string): T | null {
    try {
      return JSON.parse(readFileSync(join(this.dir, name), 'utf8')) as T;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
      throw new Error(`${join(this.dir, name)} is unreadable: ${(error as Error).message}`);
    }
  }

  /** Written to a temporary file, synced, then renamed over the old one: never half a file. */
  private write(name: string, value: unknown): void {
    this.ensure();
    const path = join(this.dir, name);
    const temporary = `${path}.${process.pid}.tmp`;
    const fd = openSync(temporary, 'w', 0o600);
    try {
      writeSync(fd, `${JSON.stringify(value, null, 2)}\n`);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(temporary, path);
  }

  identity(): NodeIdentity | null {
    return this.read<NodeIdentity>('node.json');
  }
  saveIdentity(identity: NodeIdentity): void {
    this.write('node.json', identity);
  }
  pendingJoin(): PendingJoin | null {
    return this.read<PendingJoin>('join.json');
  }
  savePendingJoin(join: PendingJoin | null): void {
    this.write('join.json', join ?? {});
  }

  nodeKey(): NodeKey | null {
    return this.read<NodeKey>('node-key.json');
  }
  saveNodeKey(key: NodeKey): void {
    this.write('node-key.json', key);
  }
  certificate(): NodeCertificate | null {
    return this.read<NodeCertificate>('certificate.json');
  }
  saveCertificate(certificate: NodeCertificate): void {
    this.write('certificate.json', certificate);
  }
  /** The gateway replicas' URLs the last welcome listed, tried after the ones given. */
  gateways(): string[] {
    const saved = this.read<{ urls?: unknown }>('gateways.json');
    return Array.isArray(saved?.urls)
      ? saved.urls.filter((url): url is string => typeof url === 'string')
      : [];
  }
  saveGateways(urls: string[]): void {
    this.write('gateways.json', { urls });
  }

  ledger(): Record<string, LedgerEntry> {
    return this.read<Record<string, LedgerEntry>>('commands.json') ?? {};
  }
  /** Records a command before it runs (at most once) or its outcome after; synced before returning. */
  record(id: string, entry: LedgerEntry): void {
    const ledger = this.ledger();
    ledger[id] = entry;
    const ids = Object.keys(ledger);
    for (const old of ids.slice(0, Math.max(0, ids.length - LEDGER_LIMIT))) delete ledger[old];
    this.write('commands.json', ledger);
  }

  pinnedApprovers(): PinnedApprovers | null {
    return this.read<PinnedApprovers>('approvers.json');
  }
  savePinnedApprovers(pinned: PinnedApprovers): void {
    this.write('approvers.json', pinned);
  }
  usedLeaves(): Record<string, UsedLeaf> {
    const saved = this.read<Record<string, UsedLeaf>>('quorum-leaves.json');
    return saved && typeof saved === 'object' && !Array.isArray(saved) ? saved : {};
  }
  /** Synced before returning, so a leaf is recorded as used before its command is queued. */
  saveUsedLeaves(leaves: Record<string, UsedLeaf>): void {
    this.write('quorum-leaves.json', leaves);
  }

  /** The release keys this node trusts for its own updates (release-pins.ts): read back checked. */
  releasePins(): PinnedReleaseKeys | null {
    return this.read<PinnedReleaseKeys>('release-pins.json');
  }
  saveReleasePins(pinned: PinnedReleaseKeys): void {
    this.write('release-pins.json', pinned);
  }

  status(): SessionStatus | null {
    return this.read<SessionStatus>('status.json');
  }
  saveStatus(status: SessionStatus): void {
    this.write('status.json', status);
  }
}
