/**
 * `batch sign-approvers --key PATH --epoch N --approvers FILE [--threshold T]`: a current
 * approver's signature over a new approver set. The set changes only when a threshold of the
 * CURRENT set signed it at exactly the next epoch (`verifyApproverSetChange`); with `--current
 * FILE` (the published set) this command checks its side of that before signing.
 */
import { CliError } from '../../errors.js';
import { defineCommand } from '../../define.js';
import { readJsonFile, readKeyFile, writeJsonOut } from './files.js';

const MAX_SET_BYTES = 1024 * 1024;
const SET_HINT =
  'An approver set file is { "trustDomain", "threshold", "approvers": [{ "publicKey": … }] } with the PATH.pub keys of "batch keygen".';

export default defineCommand({
  name: 'batch sign-approvers',
  group: 'Batches',
  summary: 'Sign a new approver set at its epoch, as one of the current approvers',
  target: 'none',
  flags: {
    key: {
      type: 'string',
      required: true,
      description: 'Your approver key, one of the current set (mode 0600)',
      placeholder: 'PATH',
    },
    epoch: {
      type: 'number',
      integer: true,
      min: 1,
      required: true,
      description: 'The new set’s epoch: one above the published set’s',
      placeholder: 'N',
    },
    approvers: {
      type: 'string',
      required: true,
      description:
        'The new set: { trustDomain, threshold, approvers: [{ publicKey }] }, keys as PATH.pub PEM or base64url SPKI',
      placeholder: 'FILE',
    },
    threshold: {
      type: 'number',
      integer: true,
      min: 1,
      description: 'How many approvers of the new set must sign a batch (else the file’s)',
      placeholder: 'T',
    },
    current: {
      type: 'string',
      description: 'The published set: checks the epoch follows it and your key is in it',
      placeholder: 'FILE',
    },
    out: {
      type: 'string',
      description: 'Write the signature to this new file instead of stdout',
      placeholder: 'FILE',
    },
  },
  examples: [
    'better-compute batch sign-approvers --key approver.pem --epoch 2 --approvers next-set.json --threshold 2 > set-signature.json',
    'better-compute batch sign-approvers --key approver.pem --epoch 2 --approvers next-set.json --current published-set.json --out sig.json',
  ],
  async run({ flags, io, log }) {
    const quorum = await import('@better-compute/core/quorum');
    const file = await readJsonFile(io, flags.approvers, '--approvers', MAX_SET_BYTES, SET_HINT);
    if (typeof file !== 'object' || file === null || Array.isArray(file))
      throw new CliError('INVALID_ARGUMENT', `${flags.approvers} (--approvers) is not a JSON object`, {
        hint: SET_HINT,
      });
    const given = file as Record<string, unknown>;
    if (given.epoch !== undefined && given.epoch !== flags.epoch)
      throw new CliError(
        'INVALID_ARGUMENT',
        `${flags.approvers} is for epoch ${String(given.epoch)}, not --epoch ${flags.epoch}`,
        {
          details: { field: 'epoch' },
        },
      );
    if (flags.threshold !== undefined && given.threshold !== undefined && given.threshold !== flags.threshold)
      throw new CliError(
        'INVALID_ARGUMENT',
        `${flags.approvers} sets threshold ${String(given.threshold)}, not --threshold ${flags.threshold}`,
        {
          details: { field: 'threshold' },
        },
      );
    const threshold = flags.threshold ?? given.threshold;
    if (threshold === undefined)
      throw new CliError(
        'INVALID_ARGUMENT',
        'the new set needs a threshold: pass --threshold T or set "threshold" in the file',
        {
          details: { field: 'threshold' },
        },
      );
    const next = quorum.readApproverSet({ ...given, epoch: flags.epoch, threshold }, flags.approvers);
    const key = await readKeyFile(io, flags.key);
    if (flags.current !== undefined) {
      const current = quorum.readApproverSet(
        await readJsonFile(io, flags.current, '--current', MAX_SET_BYTES, SET_HINT),
        flags.current,
      );
      if (current.trustDomain !== next.trustDomain)
        throw new CliError(
          'INVALID_ARGUMENT',
          `the new set is for ${next.trustDomain}, the published one for ${current.trustDomain}`,
        );
      if (next.epoch !== current.epoch + 1)
        throw new CliError(
          'INVALID_STATE',
          `--epoch ${next.epoch} does not follow the published set's epoch ${current.epoch}`,
          {
            hint: `Sign the set at epoch ${current.epoch + 1}.`,
            details: { field: 'epoch' },
          },
        );
      if (!current.approvers.some((approver) => approver.kid === key.kid))
        throw new CliError(
          'INVALID_STATE',
          `your key ${key.kid} is not in the published set, so its signature would not count`,
        );
    }
    log(
      `Approver set for ${next.trustDomain} at epoch ${next.epoch}: ${next.threshold} of ${next.approvers.length} must sign a batch.`,
    );
    for (const approver of next.approvers) log(`  ${approver.kid}`);
    const signature: import('@better-compute/core/quorum').ApproverSetSignatureFile = {
      format: quorum.APPROVER_SET_SIGNATURE_FORMAT,
      set: next,
      ...quorum.signApproverSet(key.privateKey, key.kid, next),
    };
    log(`Signed as ${key.kid}.`);
    if (flags.out === undefined) return signature;
    const path = await writeJsonOut(io, flags.out, signature, 'a signature is never written over a file');
    return { out: path, kid: key.kid, epoch: next.epoch };
  },
});
