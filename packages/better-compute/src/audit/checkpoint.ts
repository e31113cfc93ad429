/**
 * The checkpoint body of https://c2sp.org/tlog-checkpoint: the log's origin line, the tree size in
 * decimal and the root hash in standard base64, each newline-terminated. The audit log has one
 * per tenant: its origin is `<deployment name>/audit/<tenant id>`.
 */

export interface Checkpoint {
  origin: string;
  size: number;
  root: Uint8Array;
}

export function auditOrigin(deployment: string, tenantId: string): string {
  return `${deployment}/audit/${tenantId}`;
}

export function formatCheckpoint(checkpoint: Checkpoint): string {
  return `${checkpoint.origin}\n${checkpoint.size}\n${Buffer.from(checkpoint.root).toString('base64')}\n`;
}

/** Parses a checkpoint body; extension lines after the root are allowed and ignored. */
export function parseCheckpoint(text: string): Checkpoint | { error: string } {
  const lines = text.split('\n');
  if (lines.length < 4 || lines.at(-1) !== '') return { error: 'a checkpoint has at least three lines' };
  const [origin, size, root] = lines as [string, string, string];
  if (origin.length === 0) return { error: 'the checkpoint has no origin' };
  if (!/^(0|[1-9][0-9]{0,15})$/.test(size) || !Number.isSafeInteger(Number(size))) {
    return { error: `the tree size "${size}" is not a whole number` };
  }
  if (!/^[A-Za-z0-9+/]{43}=$/.test(root)) return { error: 'the root hash is not 32 bytes of base64' };
  if (lines.slice(3, -1).some((line) => line.length === 0)) return { error: 'a checkpoint line is empty' };
  return { origin, size: Number(size), root: new Uint8Array(Buffer.from(root, 'base64')) };
}
