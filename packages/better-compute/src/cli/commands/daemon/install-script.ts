/** `daemon install-script [--url] [--plugins] [--out FILE]`: the POSIX installer that joins a machine to a pool. */
import { defineCommand } from '../../define.js';

export default defineCommand({
  name: 'daemon install-script',
  group: 'Operate',
  summary: 'Print the POSIX installer that installs bcd, writes its systemd unit and joins a pool',
  target: 'none',
  output: false,
  flags: {
    url: {
      type: 'string',
      description: 'The server URL the node joins (else the installer’s --url)',
      placeholder: 'URL',
    },
    plugins: { type: 'boolean', description: 'Also prepare /etc/bcd/plugins.d for driver plugins' },
    out: {
      type: 'string',
      description: 'Write the script to this file (never over an existing one)',
      placeholder: 'FILE',
    },
  },
  examples: [
    'better-compute daemon install-script --url https://compute.example.com --out install.sh',
    'sudo sh install.sh --token-file /root/join-token',
    'better-compute daemon install-script --plugins | ssh root@node sh -s -- --url https://compute.example.com --token-file /root/join-token',
  ],
  async run({ flags, io }) {
    const { dirname } = await import('node:path');
    const { bcdBin } = await import('../../../host/dev-node.js');
    const { buildInstaller } = await import('./installer.js');
    if (flags.url !== undefined && !/^https?:\/\/[^\s'"]+$/.test(flags.url)) {
      const { CliError } = await import('../../errors.js');
      throw new CliError('INVALID_ARGUMENT', '--url must be an http(s) URL', {
        hint: 'Pass the server’s origin, such as https://compute.example.com.',
        details: { field: 'url' },
      });
    }
    const script = buildInstaller({
      daemonDir: dirname(dirname(bcdBin())),
      url: flags.url,
      plugins: flags.plugins ?? false,
    });
    if (flags.out) {
      const { createOutFile } = await import('../shared.js');
      const file = await createOutFile(io.cwd, flags.out, 'an installer is never written over a file');
      await file.write(script);
      io.err?.(`wrote ${flags.out}`);
    } else {
      io.out(script);
    }
    return undefined;
  },
});
