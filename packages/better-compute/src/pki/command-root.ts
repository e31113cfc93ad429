/**
 * The gateway's command signer from the bundle: the command root's private key, opened with the
 * deployment secret, behind the gateway's narrow CommandSigner interface. With a database, the
 * bundle's pins are recorded there (or moved along a signed rotation); a bundle that matches no
 * recorded pin is logged, and `doctor` reports it as an error.
 */
import type { Kysely } from 'kysely';
import { type CommandSigner, ed25519CommandSigner } from '../gateway/signer.js';
import { readPkiBundle } from './bundle.js';
import { recordPins } from './pins.js';
import { requireSecret } from './sealing.js';

export async function bundleCommandSigner(
  path: string,
  secret: string | undefined,
  record?: { db: Kysely<any>; log: (line: string) => void },
): Promise<CommandSigner> {
  const bundle = await readPkiBundle(path);
  const signer = ed25519CommandSigner(await bundle.commandRoot.privateKey(requireSecret(secret)));
  if (record) {
    const mismatched = await recordPins(record.db, bundle);
    if (mismatched.length)
      record.log(
        `better-compute: the PKI bundle's ${mismatched.join(' and ')} key does not match the pin this deployment recorded; run better-compute doctor`,
      );
  }
  return signer;
}
