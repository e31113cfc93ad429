/**
 * What the provider-accounts commands share: the account positional, the table columns, and the
 * document read from `--config-file PATH` (or `-`, standard input). A credential in the document
 * that is not a secret reference is refused here, before anything is sent, so a pasted key never
 * leaves the machine; the server refuses it too. No schema is loaded: the server checks the rest.
 */
import type { ResolvedIO } from '../../define.js';
import { CliError } from '../../errors.js';

export const accountPositional = {
  name: 'account',
  description: 'The provider account’s id (pacct_…)',
  required: true,
  kind: 'providerAccount',
} as const;

export const configFileFlag = {
  type: 'string',
  required: true,
  description:
    'The account document, a JSON file (driver, settings, credentials as secret:// references); - reads standard input',
  placeholder: 'PATH',
} as const;

export const hostsFlag = {
  type: 'string',
  repeated: true,
  description: 'Only these hosts of the account, user@host:port (comma-separated or repeated)',
  placeholder: 'HOST',
} as const;

export interface AccountSummary {
  id: string;
  name: string;
  driver: string;
  version: number;
  hosts: number;
  updatedAt: string;
}

export function accountColumns(a: AccountSummary): Record<string, unknown> {
  return {
    id: a.id,
    name: a.name,
    driver: a.driver,
    version: a.version,
    hosts: a.hosts,
    updated: a.updatedAt,
  };
}

/** The API's request body limit (BODY_LIMIT_BYTES in core, repeated so help loads nothing). */
const MAX_DOCUMENT_BYTES = 64 * 1024;
const SECRET_REFERENCE = /^secret:\/\/[a-z0-9][a-z0-9-]{0,62}\/sec_[0-9a-z]{26}$/;

function refused(message: string, hint: string): CliError {
  return new CliError('INVALID_ARGUMENT', message, { details: { field: 'config-file' }, hint });
}

/**
 * The document of `--config-file` as a JSON object, refused before anything is sent when it is
 * missing, over 64 KiB, not UTF-8 JSON, not an object, or holds a credential that is not a
 * `secret://` reference (anything that looks like a private key, anywhere in it, too).
 */
export async function readAccountConfig(io: ResolvedIO, file: string): Promise<Record<string, unknown>> {
  let text: string;
  if (file === '-') {
    if (!io.stdin) throw refused('--config-file - needs a standard input to read', 'Pass a file instead.');
    text = await io.stdin();
  } else {
    const [{ readFile, stat }, { resolve }] = await Promise.all([
      import('node:fs/promises'),
      import('node:path'),
    ]);
    const full = resolve(io.cwd, file);
    const info = await stat(full).catch(() => null);
    if (!info?.isFile())
      throw new CliError('NOT_FOUND', `${file} (--config-file) is not a file`, {
        details: { field: 'config-file' },
        hint: 'Name the account’s JSON document (docs/provider-accounts.md shows one).',
      });
    if (info.size > MAX_DOCUMENT_BYTES)
      throw refused(
        `${file} is ${info.size} bytes; an account document is at most 64 KiB`,
        'Trim the document.',
      );
    try {
      text = new TextDecoder('utf-8', { fatal: true }).decode(await readFile(full));
    } catch {
      throw refused(`${file} is not UTF-8 text`, 'Write the document as UTF-8 JSON.');
    }
  }
  const where = file === '-' ? 'standard input' : file;
  if (/-----BEGIN [A-Z ]*PRIVATE KEY-----/.test(text))
    throw refused(
      `${where} holds a private key; an account's credentials are secret references only, and nothing was sent`,
      'Put the key with "better-compute secrets put NAME --value-file KEY_FILE" and name the reference it answers (secret://TENANT/sec_…) in credentials.',
    );
  let config: unknown;
  try {
    config = JSON.parse(text);
  } catch (error) {
    throw refused(
      `${where} is not JSON: ${(error as Error).message}`,
      'Write the document as one JSON object.',
    );
  }
  if (typeof config !== 'object' || config === null || Array.isArray(config))
    throw refused(`${where} is not a JSON object`, 'Write the document as one JSON object.');
  const credentials = (config as { credentials?: unknown }).credentials;
  if (typeof credentials === 'object' && credentials !== null)
    for (const [name, value] of Object.entries(credentials))
      if (typeof value !== 'string' || !SECRET_REFERENCE.test(value))
        throw refused(
          `credentials.${name} is not a secret reference (secret://TENANT/sec_…): a literal credential is never sent or stored, and nothing was sent`,
          'Put the credential with "better-compute secrets put NAME --value-file FILE" and name the reference it answers.',
        );
  return config as Record<string, unknown>;
}
