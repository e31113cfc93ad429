/** `pki add-sandbox-ca`: the sandbox SSH CA, for a bundle made before it existed. */
import { defineCommand } from '../../define.js';
import { bundlePath, pkiFlag, secretOf } from './shared.js';

export default defineCommand({
  name: 'pki add-sandbox-ca',
  group: 'PKI',
  summary: 'Add the sandbox SSH CA to a bundle that has none (ALREADY_EXISTS when it has one)',
  target: 'none',
  flags: { ...pkiFlag },
  examples: ['better-compute pki add-sandbox-ca'],
  async run({ flags, io }) {
    const { addSandboxCa } = await import('../../../pki/rotation.js');
    const bundle = await addSandboxCa(await bundlePath(io, flags.pki), secretOf(io));
    const ca = bundle.sandboxSshCa!;
    return { key: 'sandbox-ssh-ca', pin: ca.pin, sshPublicKey: ca.sshPublicKey, createdAt: ca.createdAt };
  },
});
