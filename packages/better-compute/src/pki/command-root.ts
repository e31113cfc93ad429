/**
 * The gateway's command signer from the bundle: the command root's private key, opened with the
 * deployment secret, behind the gateway's narrow CommandSigner interface.
 */
import { type CommandSigner, ed25519CommandSigner } from '../gateway/signer.js';
import { readPkiBundle } from './bundle.js';
import { requireSecret } from './sealing.js';

export async function bundleCommandSigner(path: string, secret: string | undefined): Promise<CommandSigner> {
  const bundle = await readPkiBundle(path);
  return ed25519CommandSigner(await bundle.commandRoot.privateKey(requireSecret(secret)));
}
