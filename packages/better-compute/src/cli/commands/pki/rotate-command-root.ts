/** `pki rotate-command-root`: a new command root, vouched for by the old one in a signed statement. */
import { defineCommand } from '../../define.js';
import { bundlePath, pkiFlag, secretOf } from './shared.js';

export default defineCommand({
  name: 'pki rotate-command-root',
  group: 'PKI',
  summary: 'Replace the command root; the old root signs a rotation statement daemons can check',
  target: 'none',
  flags: { ...pkiFlag },
  examples: [
    'better-compute pki rotate-command-root',
    'better-compute pki rotate-command-root --query rotation.to',
  ],
  async run({ flags, io }) {
    const { rotateCommandRoot } = await import('../../../pki/rotation.js');
    const { bundle, rotation } = await rotateCommandRoot(await bundlePath(io, flags.pki), secretOf(io));
    return {
      commandRoot: {
        pin: bundle.commandRoot.pin,
        publicKey: bundle.commandRoot.publicKey.export({ type: 'spki', format: 'pem' }).toString(),
      },
      previous: rotation.from,
      rotation,
    };
  },
});
