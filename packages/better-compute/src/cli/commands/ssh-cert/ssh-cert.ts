/**
 * `ssh-cert --node ID [--key FILE.pub] [--account NAME] [--minutes N] [--connect HOST [--ssh PROGRAM]
 * [-- COMMAND…]]`: nodes.issueSshCert. Sends only your public key, checks the answer is an OpenSSH
 * user certificate for that key and a Unix account, and writes it beside the key as
 * `<key>-cert.pub`. With --connect it then runs your OpenSSH client to HOST as that account, keeping
 * your ssh configuration (bastions and jump hosts still apply), and exits with ssh's status. The
 * command after `--` is quoted for the node's shell word by word (remote-argv.ts), so the node runs
 * exactly the vector given.
 */
import { defineCommand } from '../../define.js';
import { CliError, RemoteExitError } from '../../errors.js';
import { remoteCommandLine } from '../../remote-argv.js';

const UNIX_ACCOUNT = /^[a-z_][a-z0-9_-]{0,31}$/;
/** A host name or an IPv4/IPv6 address: never anything ssh would read as an option. */
const HOST =
  /^(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*|[0-9A-Fa-f:.]{2,45})$/;

function usage(message: string, field: string, hint: string): CliError {
  return new CliError('INVALID_ARGUMENT', message, { hint, details: { field } });
}

export default defineCommand({
  name: 'ssh-cert',
  group: 'Access',
  summary: 'Get a short-lived SSH certificate for a node, and optionally connect (nodes.issueSshCert)',
  target: 'token',
  calls: ['nodes.issueSshCert'],
  flags: {
    node: { type: 'id', kind: 'node', required: true, description: 'The node to open', placeholder: 'ID' },
    key: {
      type: 'string',
      description: 'Your public key file (default ~/.ssh/id_ed25519.pub, else ~/.ssh/id_ecdsa.pub)',
      placeholder: 'FILE.pub',
    },
    account: {
      type: 'string',
      default: 'root',
      description: 'The Unix account to log in as',
      placeholder: 'NAME',
    },
    minutes: {
      type: 'number',
      integer: true,
      min: 1,
      max: 60,
      default: 15,
      description: 'How long the certificate is valid (never past your session)',
    },
    connect: {
      type: 'string',
      description: 'Then run ssh to this host name or address of the node',
      placeholder: 'HOST',
    },
    ssh: {
      type: 'string',
      default: 'ssh',
      description: 'The OpenSSH client --connect runs',
      placeholder: 'PROGRAM',
    },
  },
  examples: [
    'better-compute ssh-cert --tenant acme --node node_01k5w… && ssh -i ~/.ssh/id_ed25519 root@10.0.0.5',
    'better-compute ssh-cert --tenant acme --node node_01k5w… --connect 10.0.0.5 -- journalctl -u bcd -n 50',
  ],
  async run({ flags, rest, io, api }) {
    if (rest.length > 0 && flags.connect === undefined)
      throw usage(
        'a command after -- runs only with --connect',
        'connect',
        'Add --connect HOST, or leave the command out.',
      );
    if (flags.connect !== undefined && (flags.connect.startsWith('-') || !HOST.test(flags.connect)))
      throw usage(
        `--connect must be a host name or an IP address (got "${flags.connect.slice(0, 80)}")`,
        'connect',
        'Pass the node’s address, such as 10.0.0.5 or node7.example.com; ssh options go in your ssh configuration.',
      );
    // Before a certificate is issued: a word that cannot cross costs no certificate.
    const command = remoteCommandLine(rest);
    if (!UNIX_ACCOUNT.test(flags.account))
      throw usage(
        `--account must be a Unix account name (got "${flags.account.slice(0, 40)}")`,
        'account',
        'Pass an account such as root.',
      );
    const { existsSync, readFileSync, writeFileSync } = await import('node:fs');
    const { join, resolve } = await import('node:path');
    const home = io.env.HOME ?? io.env.USERPROFILE ?? '';
    const keyFile = flags.key
      ? resolve(io.cwd, flags.key)
      : [join(home, '.ssh', 'id_ed25519.pub'), join(home, '.ssh', 'id_ecdsa.pub')].find((path) =>
          existsSync(path),
        );
    if (!keyFile)
      throw new CliError(
        'INVALID_ARGUMENT',
        'no public key: ~/.ssh/id_ed25519.pub and ~/.ssh/id_ecdsa.pub do not exist',
        {
          hint: 'Make one with ssh-keygen -t ed25519, or pass --key FILE.pub.',
          details: { field: 'key' },
        },
      );
    if (!keyFile.endsWith('.pub'))
      throw usage(
        '--key must be a public key file ending in .pub; the private key never leaves your machine',
        'key',
        'Pass the .pub file beside your private key.',
      );
    let publicKey: string;
    try {
      publicKey = readFileSync(keyFile, 'utf8').trim();
    } catch (error) {
      throw new CliError(
        'INVALID_ARGUMENT',
        `--key ${keyFile} cannot be read (${(error as NodeJS.ErrnoException).code ?? 'error'})`,
        {
          details: { field: 'key' },
        },
      );
    }
    if (/PRIVATE KEY/.test(publicKey) || publicKey.includes('\n'))
      throw usage(
        `--key ${keyFile} holds a private key or several lines; send only a public key`,
        'key',
        'Pass the one-line .pub file beside your private key.',
      );
    const { checkCertificate } = await import('./check.js');
    const local = await checkCertificate.publicKey(publicKey, keyFile);
    const answer = await (
      await api()
    ).call('nodes.issueSshCert', {
      nodeId: flags.node,
      publicKey,
      account: flags.account,
      minutes: flags.minutes,
    });
    await checkCertificate.answer(answer, local);
    const certificateFile = `${keyFile.slice(0, -'.pub'.length)}-cert.pub`;
    writeFileSync(certificateFile, `${answer.certificate}\n`, { mode: 0o644 });
    const { certificate: _certificate, caPublicKey: _ca, ...record } = answer;
    if (flags.connect === undefined) return { ...record, certificateFile };
    if (!io.spawn)
      throw new CliError(
        'UNSUPPORTED',
        'this program cannot run ssh (its CliIO has no spawn); the certificate is written',
        {
          hint: `Run ssh -i ${keyFile.slice(0, -4)} -l ${answer.account} ${flags.connect} yourself.`,
          details: { certificateFile },
        },
      );
    const status = await io.spawn(flags.ssh, [
      '-i',
      keyFile.slice(0, -'.pub'.length),
      '-o',
      `CertificateFile="${certificateFile}"`,
      '-o',
      'IdentitiesOnly=yes',
      '-l',
      answer.account,
      '--',
      flags.connect,
      ...(command === undefined ? [] : [command]),
    ]);
    if (status !== 0) throw new RemoteExitError(status, `ssh exited with status ${status}`);
    return undefined;
  },
});
