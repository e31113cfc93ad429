/**
 * What the images commands share: the table columns, and a local file's digest and size, so
 * `images register` can fill --sha256 and --size from a file the CLI can read.
 */
import { CliError } from '../../errors.js';

export interface ImageView {
  id: string;
  name: string;
  scope: string;
  channel: string;
  os: string;
  architecture: string;
  diskFormat: string;
  sizeBytes: number;
}

export function imageColumns(i: ImageView): Record<string, unknown> {
  return {
    id: i.id,
    name: i.name,
    scope: i.scope,
    channel: i.channel,
    os: i.os,
    arch: i.architecture,
    format: i.diskFormat,
    size: `${Math.max(1, Math.round(i.sizeBytes / 2 ** 20))} MiB`,
  };
}

/**
 * The SHA-256 and size of a file: given ones are used as they are; otherwise the source must be a
 * file this machine can read (an absolute path), which is hashed here.
 */
export async function fileFacts(
  commandName: string,
  flag: string,
  source: string,
  given: { sha256?: string | undefined; size?: number | undefined },
): Promise<{ source: string; sha256: string; sizeBytes: number }> {
  if (given.sha256 !== undefined && given.size !== undefined)
    return { source, sha256: given.sha256.toLowerCase(), sizeBytes: given.size };
  if (!source.startsWith('/'))
    throw new CliError(
      'INVALID_ARGUMENT',
      `--${flag} ${source} is not a file here: give its --${flag === 'source' ? '' : `${flag}-`}sha256 and --${flag === 'source' ? '' : `${flag}-`}size`,
      { hint: `Run "better-compute help ${commandName}" for its flags.`, details: { field: flag } },
    );
  const [{ createReadStream }, { stat }, { createHash }] = await Promise.all([
    import('node:fs'),
    import('node:fs/promises'),
    import('node:crypto'),
  ]);
  const info = await stat(source).catch(() => null);
  if (!info?.isFile())
    throw new CliError('NOT_FOUND', `--${flag} ${source} is not a file this machine can read`, {
      hint: 'Give the digest and size of a file on the node, or register from a machine that has the file.',
      details: { field: flag },
    });
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(source)) hash.update(chunk as Buffer);
  const sha256 = hash.digest('hex');
  if (given.sha256 !== undefined && given.sha256.toLowerCase() !== sha256)
    throw new CliError('INVALID_ARGUMENT', `--${flag} ${source} has SHA-256 ${sha256}, not the one given`, {
      details: { field: flag },
    });
  return { source, sha256, sizeBytes: info.size };
}
