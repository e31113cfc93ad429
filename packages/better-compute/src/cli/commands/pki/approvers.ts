/**
 * `pki approvers`: the destructive-batch quorum's approver set in the PKI bundle. `--pub … --threshold
 * T` installs the first set (epoch 1); `--set NEXT.json --signature S.json …` changes it, only with a
 * threshold of the current approvers' signatures (`batch sign-approvers`). Public keys only, so it
 * needs no secret. Servers read the set at start; daemons pin it at their next session.
 */
import { CliError } from '../../errors.js';
import { defineCommand } from '../../define.js';
import { bundlePath, pkiFlag } from './shared.js';

/** A `.pub` PEM is under 1 KiB and a signature file a few; a wrong path costs a message, not memory. */
const MAX_FILE_BYTES = 1024 * 1024;
const SET_HINT =
  'An approver set file is { "trustDomain", "threshold", "approvers": [{ "publicKey": … }] }, as "better-compute batch sign-approvers --approvers" reads it.';

export default defineCommand({
  name: 'pki approvers',
  group: 'PKI',
  summary:
    'Set the destructive-batch quorum’s approvers: the first set from public keys, or a change signed by the current set',
  description:
    'With --pub and --threshold, installs the first approver set (epoch 1, the bundle’s trust domain) when the bundle has none. ' +
    'With --set and --signature, appends the next set when a threshold of the current approvers signed it with ' +
    '"batch sign-approvers"; otherwise nothing is written. Servers read the set when they start; each node daemon ' +
    'pins it at its next session.',
  target: 'none',
  flags: {
    ...pkiFlag,
    pub: {
      type: 'string',
      repeated: true,
      description: 'An approver’s public key, the PATH.pub of "batch keygen" (once per approver)',
      placeholder: 'FILE',
    },
    threshold: {
      type: 'number',
      integer: true,
      min: 1,
      max: 64,
      description:
        'How many approvers must sign a batch: of the --pub keys, or of the --set when its file has none',
      placeholder: 'T',
    },
    set: {
      type: 'string',
      description: 'The next approver set, the file "better-compute batch sign-approvers --approvers" signed',
      placeholder: 'FILE',
    },
    signature: {
      type: 'string',
      repeated: true,
      description:
        'A current approver’s signature over --set, written by "batch sign-approvers" (once per approver)',
      placeholder: 'FILE',
    },
  },
  examples: [
    'better-compute pki approvers --pub alice.pem.pub --pub bob.pem.pub --pub carol.pem.pub --threshold 2',
    'better-compute pki approvers --set next-set.json --threshold 2 --signature alice.sig.json --signature bob.sig.json',
    'better-compute pki show --query approvers.set > published-set.json',
  ],
  async run({ flags, io, log }) {
    const { installApproverSet, changeApproverSet } = await import('../../../pki/approvers.js');
    const { readJsonFile, readTextFile } = await import('../batch/files.js');
    const path = await bundlePath(io, flags.pki);
    const pubs = flags.pub ?? [];
    const signatures = flags.signature ?? [];
    const changing = flags.set !== undefined || signatures.length > 0;
    if (pubs.length > 0 && changing)
      throw new CliError(
        'INVALID_ARGUMENT',
        '--pub installs the first set and --set changes it: give one or the other',
        {
          details: { field: 'pub' },
        },
      );
    let result;
    if (changing) {
      if (flags.set === undefined)
        throw new CliError(
          'INVALID_ARGUMENT',
          'a change names the new set: pass --set FILE with the signatures over it',
          {
            details: { field: 'set' },
          },
        );
      if (signatures.length === 0)
        throw new CliError(
          'INVALID_ARGUMENT',
          'a change needs the current approvers’ signatures: pass --signature FILE for each',
          {
            hint: 'Each current approver runs "better-compute batch sign-approvers --key … --epoch N --approvers NEXT.json --out SIG.json".',
            details: { field: 'signature' },
          },
        );
      if (signatures.length > 64)
        throw new CliError('INVALID_ARGUMENT', `at most 64 --signature files, not ${signatures.length}`, {
          details: { field: 'signature' },
        });
      const next = {
        name: flags.set,
        value: await readJsonFile(io, flags.set, '--set', MAX_FILE_BYTES, SET_HINT),
      };
      const signed = [];
      for (const name of signatures)
        signed.push({
          name,
          value: await readJsonFile(
            io,
            name,
            '--signature',
            MAX_FILE_BYTES,
            'Give the file "batch sign-approvers" wrote.',
          ),
        });
      result = await changeApproverSet(path, next, signed, { threshold: flags.threshold });
    } else {
      if (pubs.length === 0)
        throw new CliError(
          'INVALID_ARGUMENT',
          'give the approvers’ keys (--pub FILE, once each) with --threshold, or a change with --set and --signature',
          {
            hint: 'Make each approver’s key with "better-compute batch keygen --out PATH" and give its PATH.pub.',
            details: { field: 'pub' },
          },
        );
      if (pubs.length > 64)
        throw new CliError('INVALID_ARGUMENT', `at most 64 approvers (--pub), not ${pubs.length}`, {
          details: { field: 'pub' },
        });
      if (flags.threshold === undefined)
        throw new CliError(
          'INVALID_ARGUMENT',
          `--threshold is required: how many of the ${pubs.length} approvers must sign a batch`,
          {
            details: { field: 'threshold' },
          },
        );
      const keys = [];
      for (const name of pubs)
        keys.push({ name, value: await readTextFile(io, name, '--pub', MAX_FILE_BYTES) });
      result = await installApproverSet(path, keys, flags.threshold);
    }
    const { set, signatures: signedBy } = result.entry;
    log(
      `Approver set of ${set.trustDomain} at epoch ${set.epoch}: ${set.threshold} of ${set.approvers.length} must sign a destructive batch.`,
    );
    log(
      'Servers read it when they start: restart serve (or dev). Each node daemon pins it at its next session.',
    );
    return {
      path: result.bundle.path,
      trustDomain: set.trustDomain,
      epoch: set.epoch,
      threshold: set.threshold,
      kids: set.approvers.map((approver) => approver.kid),
      signedBy: signedBy.map((signature) => signature.kid),
      set,
    };
  },
});
