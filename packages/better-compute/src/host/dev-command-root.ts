/**
 * dev's command root: an Ed25519 key kept in `.better-compute/command-root.pem` (0600) so a
 * restarted dev signs with the key its daemon pinned; in memory with --memory. A deployment
 * gets its command root from the PKI bundle instead.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { type CommandSigner, ed25519CommandSigner, generatedCommandSigner } from '../gateway/signer.js';

export async function devCommandSigner(stateDir: string | null): Promise<CommandSigner> {
  if (!stateDir) return generatedCommandSigner();
  const file = join(stateDir, 'command-root.pem');
  try {
    return ed25519CommandSigner(await readFile(file, 'utf8'));
  } catch {
    const signer = generatedCommandSigner();
    const { writeFile, rename } = await import('node:fs/promises');
    await writeFile(`${file}.${process.pid}.tmp`, signer.privateKeyPem, { mode: 0o600 });
    await rename(`${file}.${process.pid}.tmp`, file);
    return signer;
  }
}
