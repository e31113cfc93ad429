/**
 * What `ssh-cert` checks before it writes anything: the key it sends is an OpenSSH public key, and
 * the server's answer is a Unix account and an OpenSSH user certificate for exactly that key.
 */
import { ComputeError } from '@better-compute/core';
import { CliError } from '../../errors.js';

type Sshpk = typeof import('sshpk');

async function sshpk(): Promise<Sshpk> {
  const loaded = (await import('sshpk')) as Sshpk & { default?: Sshpk };
  return loaded.default ?? loaded;
}

const UNIX_ACCOUNT = /^[a-z_][a-z0-9_-]{0,31}$/;

function invalidResponse(message: string): ComputeError {
  return new ComputeError('INVALID_RESPONSE', message, {
    hint: 'Nothing was written. Check that --url points at a better-compute API you trust.',
  });
}

export const checkCertificate = {
  /** The local key's SHA256 fingerprint; a usage error when the file is no OpenSSH public key. */
  async publicKey(line: string, file: string): Promise<string> {
    const lib = await sshpk();
    try {
      return lib.parseKey(line, 'ssh').fingerprint('sha256').toString();
    } catch {
      throw new CliError('INVALID_ARGUMENT', `--key ${file} is not an OpenSSH public key`, {
        hint: 'Pass the .pub file ssh-keygen wrote beside your private key.',
        details: { field: 'key' },
      });
    }
  },

  /** Throws INVALID_RESPONSE unless the answer certifies `fingerprint` for a Unix account. */
  async answer(answer: { account: unknown; certificate: unknown }, fingerprint: string): Promise<void> {
    if (typeof answer.account !== 'string' || !UNIX_ACCOUNT.test(answer.account))
      throw invalidResponse('the server named an account that is not a Unix account name');
    if (
      typeof answer.certificate !== 'string' ||
      !/^[a-z0-9-]+-cert-v01@openssh\.com [A-Za-z0-9+/=]+( \S*)?$/.test(answer.certificate)
    )
      throw invalidResponse('the server’s answer is not an OpenSSH certificate');
    const lib = await sshpk();
    let certificate;
    try {
      certificate = lib.parseCertificate(answer.certificate, 'openssh');
    } catch {
      throw invalidResponse('the server’s answer is not an OpenSSH certificate');
    }
    if (!certificate.subjects.every((subject) => subject.type === 'user'))
      throw invalidResponse('the server’s certificate is not a user certificate');
    if (certificate.subjectKey.fingerprint('sha256').toString() !== fingerprint)
      throw invalidResponse('the server’s certificate is for another key than yours');
  },
};
