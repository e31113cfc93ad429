/**
 * The `ssh.trust` command: keeps the files the node's sshd reads for break-glass logins current.
 * sshd_config points at them once (docs/break-glass-ssh.md) and sshd reads them at each login, so
 * writing them is enough, with no reload:
 *
 *   TrustedUserCAKeys        <dir>/trusted-user-ca-keys   the break-glass CA's public key
 *   RevokedKeys              <dir>/revoked-keys           a KRL of the revoked certificates' serials
 *   AuthorizedPrincipalsFile <dir>/principals/%u          `<account>@<nodeId>` for each account
 *
 * Each file is replaced atomically (written beside, then renamed), so sshd never reads half of one.
 * The payload is checked line by line: nothing in it can add an option or a second key to a file.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { type CommandOutcome, outcomeOf } from './state.js';

const CA_LINE = /^ssh-ed25519 [A-Za-z0-9+/]+={0,2}( [A-Za-z0-9@._:-]{1,200})?$/;
const ACCOUNT = /^[a-z_][a-z0-9_-]{0,31}$/;
const PRINCIPAL = /^[a-z_][a-z0-9_-]{0,31}@node_[A-Za-z0-9]{1,64}$/;
const SERIAL = /^[0-9]{1,19}$/;

/** Where the files go: BCD_SSH_DIR, else /etc/ssh/bcd. */
export function sshTrustDir(env: Record<string, string | undefined> = process.env): string {
  return env.BCD_SSH_DIR ?? '/etc/ssh/bcd';
}

interface TrustPayload {
  caPublicKeys: string[];
  principals: Record<string, string[]>;
  revokedSerials: string[];
}

function checked(payload: Record<string, unknown>, nodeId: string): TrustPayload | string {
  const { caPublicKeys, principals, revokedSerials } = payload;
  if (!Array.isArray(caPublicKeys) || caPublicKeys.length < 1 || caPublicKeys.length > 4)
    return 'caPublicKeys must list one to four CA keys';
  if (!caPublicKeys.every((line) => typeof line === 'string' && CA_LINE.test(line)))
    return 'caPublicKeys must hold ssh-ed25519 public key lines';
  if (!principals || typeof principals !== 'object' || Array.isArray(principals))
    return 'principals must map accounts to principals';
  const entries = Object.entries(principals as Record<string, unknown>);
  if (entries.length > 256) return 'principals names too many accounts';
  for (const [account, names] of entries) {
    if (!ACCOUNT.test(account)) return `principals names an account that is not a Unix account name`;
    if (!Array.isArray(names) || names.length > 16) return `principals of ${account} must be a short list`;
    for (const name of names)
      if (typeof name !== 'string' || !PRINCIPAL.test(name) || !name.endsWith(`@${nodeId}`))
        return `principals of ${account} must be <account>@${nodeId}`;
  }
  if (!Array.isArray(revokedSerials) || revokedSerials.length > 100_000)
    return 'revokedSerials must be a list';
  if (!revokedSerials.every((serial) => typeof serial === 'string' && SERIAL.test(serial)))
    return 'revokedSerials must hold decimal serial numbers';
  return {
    caPublicKeys: caPublicKeys as string[],
    principals: principals as Record<string, string[]>,
    revokedSerials: revokedSerials as string[],
  };
}

function replace(path: string, content: string | Buffer, mode = 0o644): void {
  const next = `${path}.next`;
  writeFileSync(next, content, { mode });
  renameSync(next, path);
}

const failed = (error: string): CommandOutcome => outcomeOf('failed', null, error);

/** Writes the trust files for this node from an ssh.trust payload. */
export function applySshTrust(dir: string, nodeId: string, payload: Record<string, unknown>): CommandOutcome {
  const trust = checked(payload, nodeId);
  if (typeof trust === 'string') return failed(`refused: ${trust}`);
  try {
    mkdirSync(join(dir, 'principals'), { recursive: true, mode: 0o755 });
    const caFile = join(dir, 'trusted-user-ca-keys');
    replace(caFile, `${trust.caPublicKeys.join('\n')}\n`);
    // A KRL revokes serials under each CA; with nothing revoked an empty list is enough.
    if (trust.revokedSerials.length === 0) replace(join(dir, 'revoked-keys'), '');
    else {
      const spec = join(dir, 'revoked-keys.spec');
      const krl = join(dir, 'revoked-keys.krl.next');
      writeFileSync(spec, `${trust.revokedSerials.map((serial) => `serial: ${serial}`).join('\n')}\n`);
      rmSync(krl, { force: true });
      const made = spawnSync('ssh-keygen', ['-q', '-k', '-f', krl, '-s', caFile, spec], {
        encoding: 'utf8',
        timeout: 30_000,
      });
      rmSync(spec, { force: true });
      if (made.status !== 0)
        return failed(
          `ssh-keygen could not write the revocation list: ${(made.stderr || made.error?.message || '').trim().slice(0, 500)}`,
        );
      renameSync(krl, join(dir, 'revoked-keys'));
    }
    const wanted = new Set(Object.keys(trust.principals));
    for (const [account, names] of Object.entries(trust.principals))
      replace(join(dir, 'principals', account), `${names.join('\n')}\n`);
    for (const file of readdirSync(join(dir, 'principals')))
      if (!wanted.has(file)) rmSync(join(dir, 'principals', file), { force: true });
  } catch (error) {
    return failed(`writing the SSH trust files in ${dir} failed: ${(error as Error).message}`);
  }
  return outcomeOf('succeeded', {
    dir,
    caKeys: trust.caPublicKeys.length,
    accounts: Object.keys(trust.principals).sort(),
    revoked: trust.revokedSerials.length,
  });
}
