/**
 * `metal enroll NAME --site SITE --bmc-driver ipmi|redfish --bmc-address HOST --bmc-user USER
 * --bmc-password-file FILE --product-uuid UUID [--mac MAC]…`: metal.enroll. The BMC password is
 * read from a file only, never an argument (a --bmc-password flag does not exist, and the parser
 * does not echo a credential-looking flag); it is sealed by the server and never shown again.
 */
import { CliError } from '../../errors.js';
import { defineCommand, nameFlag } from '../../define.js';
import { defined, keyFlag, withIdempotencyKey } from '../shared.js';

/** The longest BMC password the server takes (metal.enroll's bmcPassword). */
const MAX_PASSWORD = 256;

function refused(message: string): CliError {
  return new CliError('INVALID_ARGUMENT', message, {
    details: { field: 'bmcPasswordFile' },
    hint: 'Put the password alone in a file readable only by you (a trailing newline is dropped) and pass --bmc-password-file FILE.',
  });
}

/** The password from the file: one line, its newline dropped; messages never say what it is. */
async function readPassword(cwd: string | undefined, file: string): Promise<string> {
  const { readFile } = await import('node:fs/promises');
  const { resolve } = await import('node:path');
  let text: string;
  try {
    const bytes = await readFile(resolve(cwd ?? '.', file));
    if (bytes.length > MAX_PASSWORD + 2)
      throw refused(`--bmc-password-file ${file} is longer than a BMC password (${MAX_PASSWORD} characters)`);
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch (error) {
    if (error instanceof CliError) throw error;
    throw refused(
      `--bmc-password-file ${file} cannot be read: ${(error as NodeJS.ErrnoException).code ?? 'not UTF-8 text'}`,
    );
  }
  const password = text.replace(/\r?\n$/, '');
  if (!password) throw refused(`--bmc-password-file ${file} is empty`);
  if (/[\0\r\n]/.test(password))
    throw refused(`--bmc-password-file ${file} holds more than one line or a NUL byte`);
  return password;
}

export default defineCommand({
  name: 'metal enroll',
  group: 'Nodes',
  summary:
    'Enroll a bare-metal machine by its BMC; the password only from --bmc-password-file (metal.enroll)',
  target: 'token',
  calls: ['metal.enroll'],
  flags: {
    name: nameFlag('The machine’s name in the tenant'),
    site: { type: 'id', kind: 'site', required: true, description: 'The site whose agent reaches the BMC' },
    bmcDriver: {
      type: 'string',
      choices: ['ipmi', 'redfish'],
      required: true,
      description: 'How the BMC is spoken to',
    },
    bmcAddress: {
      type: 'string',
      required: true,
      description: 'The BMC’s host name or address',
      placeholder: 'HOST',
    },
    bmcPort: {
      type: 'number',
      integer: true,
      min: 1,
      max: 65535,
      description: 'The BMC’s port (623 for IPMI by default)',
      placeholder: 'PORT',
    },
    bmcUser: { type: 'string', required: true, description: 'The BMC account', placeholder: 'USER' },
    bmcPasswordFile: {
      type: 'string',
      required: true,
      description: 'Read the BMC password from this file (never from an argument)',
      placeholder: 'FILE',
    },
    bmcTlsFingerprint: {
      type: 'string',
      description: 'For redfish: the SHA-256 fingerprint of the BMC’s TLS certificate, pinned by the agent',
      placeholder: 'SHA256',
    },
    productUuid: {
      type: 'string',
      required: true,
      description: 'The machine’s SMBIOS product UUID',
      placeholder: 'UUID',
    },
    mac: {
      type: 'string',
      repeated: true,
      description: 'A NIC’s MAC address, when known (repeat for more)',
      placeholder: 'MAC',
    },
    key: keyFlag,
  },
  examples: [
    'better-compute metal enroll r12-u07 --site site_01k… --bmc-driver ipmi --bmc-address 10.0.0.7 --bmc-user admin --bmc-password-file bmc.pass --product-uuid 4c4c4544-0042-3510-8052-b4c04f4a4e31',
  ],
  async run(context) {
    const { flags, api, io } = context;
    const bmcPassword = await readPassword(io.cwd, flags.bmcPasswordFile);
    const client = await api();
    return withIdempotencyKey(context, flags.key, (idempotencyKey) =>
      client.call(
        'metal.enroll',
        defined({
          siteId: flags.site,
          name: flags.name,
          bmcDriver: flags.bmcDriver as 'ipmi' | 'redfish',
          bmcAddress: flags.bmcAddress,
          bmcPort: flags.bmcPort,
          bmcUser: flags.bmcUser,
          bmcPassword,
          bmcTlsFingerprint: flags.bmcTlsFingerprint,
          productUuid: flags.productUuid,
          macs: flags.mac,
          idempotencyKey,
        }),
      ),
    );
  },
});
