/**
 * `audit witness cosign --key PATH --state DIR (--url URL --tenant T | --checkpoint FILE|-)`: an
 * independent witness. It checks the log's signature under the audit key's pin and, when it holds
 * an earlier checkpoint of that log, the consistency proof from it (fetched with audit.consistency,
 * or carried by the file); then it cosigns (C2SP cosignature/v1), moves its state forward and prints
 * the cosigned checkpoint. A smaller or inconsistent checkpoint is AUDIT_TAMPERED, and nothing is
 * signed. The methods it calls are public: it needs no credential.
 */
import { ComputeError, isTenantId } from '@better-compute/core';
import { CliError } from '../../errors.js';
import { defineCommand } from '../../define.js';
import { pinFlag } from './flags.js';

/** A key file is one line; anything larger is not one. */
const MAX_KEY_BYTES = 4096;
const MAX_CHECKPOINT_BYTES = 1 << 20;

export default defineCommand({
  name: 'audit witness cosign',
  group: 'Audit',
  summary: 'Witness a tenant’s audit log: check a checkpoint extends the last one cosigned, then cosign it',
  target: 'token',
  calls: ['audit.checkpoint', 'audit.consistency'],
  flags: {
    key: {
      type: 'string',
      required: true,
      description: 'The witness key file (`audit witness keygen`); refused when others can read it',
      placeholder: 'PATH',
    },
    state: {
      type: 'string',
      required: true,
      description: 'The witness’s state directory: the last checkpoint it cosigned, per log',
      placeholder: 'DIR',
    },
    checkpoint: {
      type: 'string',
      description:
        'A file (or - for standard input) holding the answer of audit.checkpoint or audit.consistency, instead of fetching it with --url',
      placeholder: 'FILE',
    },
    pin: pinFlag,
  },
  examples: [
    'better-compute audit witness cosign --key witness.key --state witness-state --url https://compute.example.com --tenant acme --pin sha256/…',
    'better-compute audit witness cosign --key witness.key --state witness-state --checkpoint answer.json --pin sha256/…',
  ],
  async run({ flags, global, io, api }) {
    const [{ readFile, stat }, { resolve }] = await Promise.all([
      import('node:fs/promises'),
      import('node:path'),
    ]);
    const { parseWitnessKey } = await import('../../../audit/cosignature.js');
    const { cosignCheckpoint, lastCosigned, openLogCheckpoint, witnessInputOf } =
      await import('../../../audit/witness.js');
    const tenant = global.tenant;
    if (!flags.checkpoint && (tenant === undefined || !isTenantId(tenant)))
      throw new CliError(
        'INVALID_ARGUMENT',
        'name the log to witness: --tenant T (with --url), or --checkpoint FILE',
        {
          hint: 'Pass --url https://compute.example.com --tenant acme, or a file with --checkpoint.',
          details: { field: 'tenant' },
        },
      );
    const pin = await witnessPin(flags.pin, io);
    const keyPath = resolve(io.cwd, flags.key);
    const keyStat = await stat(keyPath).catch(() => null);
    if (!keyStat?.isFile() || keyStat.size > MAX_KEY_BYTES)
      throw new CliError('NOT_FOUND', `${flags.key} is not a witness key file`, {
        hint: 'Make one with `better-compute audit witness keygen --name NAME --out PATH`.',
      });
    if ((keyStat.mode & 0o077) !== 0)
      throw new CliError('INVALID_STATE', `${flags.key} can be read by other users`, {
        hint: `Run chmod 600 ${flags.key}: a witness key is a secret, as an ssh key is.`,
      });
    const key = parseWitnessKey(await readFile(keyPath, 'utf8'));
    if ('error' in key)
      throw new CliError('INVALID_ARGUMENT', `${flags.key}: ${key.error}`, { details: { field: 'key' } });
    const stateDir = resolve(io.cwd, flags.state);

    let input;
    if (flags.checkpoint) {
      const text =
        flags.checkpoint === '-'
          ? ((await io.stdin?.()) ?? '')
          : await readFile(resolve(io.cwd, flags.checkpoint), 'utf8').catch(() => {
              throw new CliError('NOT_FOUND', `cannot read ${flags.checkpoint}`, {
                hint: 'Give the file that holds the answer of audit.checkpoint or audit.consistency.',
              });
            });
      if (text.length > MAX_CHECKPOINT_BYTES)
        throw new CliError('INVALID_ARGUMENT', 'the checkpoint is over 1 MiB');
      let value: unknown;
      try {
        value = JSON.parse(text);
      } catch {
        throw new CliError('INVALID_ARGUMENT', 'the checkpoint file is not JSON', {
          hint: 'Give the answer of audit.checkpoint or audit.consistency as the API printed it.',
        });
      }
      input = witnessInputOf(value);
    } else {
      const client = await api();
      const latest = (await client.call('audit.checkpoint', { tenantId: tenant! })) as {
        note: string;
        signer: string;
      };
      input = witnessInputOf(latest);
      // Only what the witness needs: the proof from the checkpoint it holds to the one fetched.
      const fetched = openLogCheckpoint(input.checkpoint, pin, tenant);
      const held = await lastCosigned(stateDir, fetched.origin);
      if (held && held.size > 0 && held.size < fetched.size) {
        input = witnessInputOf(
          await client.call('audit.consistency', {
            tenantId: tenant!,
            fromSize: held.size,
            toSize: fetched.size,
          }),
        );
      }
    }
    return cosignCheckpoint({
      key,
      stateDir,
      pin,
      input,
      now: new Date(),
      tenantId: flags.checkpoint ? undefined : tenant,
    });
  },
});

/** The audit key's pin a witness trusts: --pin or BETTER_COMPUTE_AUDIT_PIN (a witness has no bundle). */
async function witnessPin(
  pin: string | undefined,
  io: { cwd: string; env: Record<string, string | undefined> },
) {
  const { resolveAuditPin } = await import('../../../audit/keys.js');
  try {
    return await resolveAuditPin({ cwd: io.cwd, pin, env: io.env });
  } catch (error) {
    if (error instanceof ComputeError && error.code === 'PKI_NOT_FOUND')
      throw new ComputeError('AUDIT_KEY_MISSING', 'a witness needs the audit key’s pin', {
        hint: 'Pass the pin the deployment published: --pin sha256/… (or BETTER_COMPUTE_AUDIT_PIN).',
      });
    throw error;
  }
}
