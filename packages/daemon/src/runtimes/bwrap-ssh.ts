/**
 * The sshd configuration of one bwrap sandbox, written by the daemon in a directory the sandbox
 * cannot see: its host key and certificate, the sandbox CA as the only trusted user CA, the sandbox
 * id as the only principal, no forwarding of any kind, and a forced command that enters the
 * sandbox's namespaces only once a certificate has been accepted.
 */
import { existsSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
// The state directory's path may hold spaces or `$`: every path in the script is one shell word.
import { shellWord } from './sandbox-env.js';

/** An argument in sshd_config, double-quoted (sshd's own quoting) so a path may hold spaces. */
function configWord(text: string): string {
  if (/["\n]/.test(text))
    throw new Error(`the path ${text.slice(0, 200)} holds a quote or a newline, which sshd_config cannot`);
  return `"${text}"`;
}

export async function writeSandboxSshConfig(
  ssh: string,
  sandboxId: string,
  userCaPublicKey: string,
  runJson: string,
): Promise<void> {
  await writeFile(join(ssh, 'user_ca.pub'), `${userCaPublicKey}\n`, { mode: 0o600 });
  await writeFile(join(ssh, 'principals'), `${sandboxId}\n`, { mode: 0o600 });
  // The forced command joins the sandbox's namespaces; the remote command runs through its shell.
  const enter = join(ssh, 'enter');
  await writeFile(
    enter,
    [
      '#!/bin/sh',
      `pid=$(sed -n 's/.*"pid":\\([0-9]*\\).*/\\1/p' ${shellWord(runJson)})`,
      '[ -n "$pid" ] || { echo "the sandbox is not running" >&2; exit 255; }',
      // The sandbox's variables from secrets (sandbox-env.ts), for every session.
      `if [ -f ${shellWord(join(ssh, 'env'))} ]; then . ${shellWord(join(ssh, 'env'))}; fi`,
      'if [ -n "$SSH_ORIGINAL_COMMAND" ]; then',
      '  exec nsenter -t "$pid" --all --preserve-credentials --root --wd -- /bin/sh -c -- "$SSH_ORIGINAL_COMMAND"',
      'fi',
      'exec nsenter -t "$pid" --all --preserve-credentials --root --wd -- /bin/sh -l',
      '',
    ].join('\n'),
    { mode: 0o700 },
  );
  const lines = [
    `HostKey ${configWord(join(ssh, 'host_key'))}`,
    ...(existsSync(join(ssh, 'host_key-cert.pub'))
      ? [`HostCertificate ${configWord(join(ssh, 'host_key-cert.pub'))}`]
      : []),
    `TrustedUserCAKeys ${configWord(join(ssh, 'user_ca.pub'))}`,
    `AuthorizedPrincipalsFile ${configWord(join(ssh, 'principals'))}`,
    'AuthorizedKeysFile none',
    'PubkeyAuthentication yes',
    'PasswordAuthentication no',
    'KbdInteractiveAuthentication no',
    'UsePAM no',
    'PermitRootLogin prohibit-password',
    'AllowUsers root',
    'DisableForwarding yes',
    'PermitTunnel no',
    'X11Forwarding no',
    'AllowAgentForwarding no',
    'AllowTcpForwarding no',
    'PermitUserEnvironment no',
    'PermitTTY yes',
    'PrintMotd no',
    'PrintLastLog no',
    'UseDNS no',
    'LogLevel ERROR',
    // The files it reads are the daemon's own, in its private state directory, out of the sandbox's
    // sight; the checks of the path's parents (a state directory under /tmp) would refuse them.
    'StrictModes no',
    // sshd takes the rest of the line as it stands and runs it through the account's shell.
    `ForceCommand ${shellWord(enter)}`,
    '',
  ];
  await writeFile(join(ssh, 'sshd_config'), lines.join('\n'), { mode: 0o600 });
}
