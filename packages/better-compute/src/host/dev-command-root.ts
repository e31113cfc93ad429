/**
 * dev's command root: the command root of the dev PKI bundle, `.better-compute/pki.json` (or the
 * configuration's `pki`), sealed with dev's own secret and made on the first start, so a restarted
 * dev signs with the key its daemon pinned. A store from before the bundle kept its key in
 * `.better-compute/command-root.pem`: that key becomes the bundle's command root, and the loose
 * file is removed. With --memory the key lives in memory only. A bundle without the sandbox SSH CA
 * (made before it existed) gets one.
 */
import { createPrivateKey } from 'node:crypto';
import { readFile, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { ComputeError } from '@better-compute/core';
import { type CommandSigner, ed25519CommandSigner, generatedCommandSigner } from '../gateway/signer.js';

export async function devCommandSigner(
  stateDir: string | null,
  options: { secret?: string | undefined; pkiPath?: string | undefined; cwd?: string } = {},
): Promise<CommandSigner> {
  if (!stateDir) return generatedCommandSigner();
  const { readPkiBundle, resolvePkiPath } = await import('../pki/bundle.js');
  const { createPkiBundle } = await import('../pki/create.js');
  const path = options.pkiPath
    ? resolvePkiPath(options.cwd ?? process.cwd(), options.pkiPath)
    : join(stateDir, 'pki.json');
  const secret = options.secret;
  if (!secret) {
    throw new ComputeError('MISSING_ENV', 'dev has no secret to open its PKI bundle with', {
      hint: 'Set BETTER_COMPUTE_SECRET, or the configuration’s secret.',
    });
  }
  let bundle;
  try {
    bundle = await readPkiBundle(path);
  } catch (error) {
    if (!(error instanceof ComputeError) || error.code !== 'PKI_NOT_FOUND') throw error;
    const legacy = join(stateDir, 'command-root.pem');
    const pem = await readFile(legacy, 'utf8').catch(() => undefined);
    const commandRootKey = pem ? createPrivateKey(pem) : undefined;
    try {
      bundle = await createPkiBundle({ path, secret, trustDomain: 'dev.localhost', commandRootKey });
    } catch (created) {
      // Another dev in the same directory made it first.
      if (!(created instanceof ComputeError) || created.code !== 'ALREADY_EXISTS') throw created;
      bundle = await readPkiBundle(path);
    }
    if (pem) await unlink(legacy).catch(() => undefined);
  }
  // A bundle made before sandboxes had their own SSH CA gets one, so `sandbox exec` works in dev.
  if (!bundle.sandboxSshCa) {
    const { addSandboxCa } = await import('../pki/rotation.js');
    try {
      bundle = await addSandboxCa(path, secret);
    } catch (error) {
      if (!(error instanceof ComputeError) || error.code !== 'ALREADY_EXISTS') throw error;
      bundle = await readPkiBundle(path);
    }
  }
  return ed25519CommandSigner(await bundle.commandRoot.privateKey(secret));
}
