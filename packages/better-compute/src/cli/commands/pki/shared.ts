/** What the pki commands share: the --pki flag, the bundle path, and the table of keys. */
import type { ResolvedIO } from '../../define.js';

export const pkiFlag = {
  pki: {
    type: 'string',
    description: 'The PKI bundle (default BETTER_COMPUTE_PKI, else .better-compute/pki.json)',
    placeholder: 'PATH',
  },
} as const;

/** --pki, else BETTER_COMPUTE_PKI, against the working directory; else the default. */
export async function bundlePath(io: ResolvedIO, flag: string | undefined): Promise<string> {
  const { resolvePkiPath } = await import('../../../pki/bundle.js');
  return resolvePkiPath(io.cwd, flag ?? (io.env.BETTER_COMPUTE_PKI || undefined));
}

/** The secret that seals the bundle: BETTER_COMPUTE_SECRET from the environment, never an argument. */
export function secretOf(io: ResolvedIO): string | undefined {
  return io.env.BETTER_COMPUTE_SECRET;
}

/** `pki show`'s table: one row per key. */
export function keyRows(result: unknown): unknown[] | undefined {
  const keys = (result as { keys?: unknown[] } | undefined)?.keys;
  return Array.isArray(keys) ? keys : undefined;
}
