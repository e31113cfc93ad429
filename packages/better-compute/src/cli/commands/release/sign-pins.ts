/**
 * `release sign-pins --key K --pins NEWPINS --threshold N --epoch E [--out F]`: a current release
 * key's signature over a new release-pin set, offline. Nodes move their pins to the new set only
 * when a threshold of the keys they hold signed it and its epoch is past theirs, so each of those
 * keys' holders signs in turn: the first with `--pins`, `--threshold` and `--epoch`, the next with
 * `--statement` (the file the one before wrote). The control plane takes it with `releases
 * rotate-pins`. No configuration, no server.
 */
import { CliError } from '../../errors.js';
import { defineCommand } from '../../define.js';
import { readJsonFile, writeJsonOut } from '../files.js';
import { keyFlag, outFlag, readReleaseKeyFile } from './shared.js';

/** A statement with 64 pins and 32 signatures is some 12 KiB; anything past this is not one. */
const MAX_STATEMENT_BYTES = 256 * 1024;

export default defineCommand({
  name: 'release sign-pins',
  group: 'Fleet',
  summary: 'Sign a new set of release keys with a current one, so nodes follow the change (offline)',
  description:
    'A threshold of the release keys nodes hold now must sign the same statement: the first signer gives --pins, --threshold and --epoch (one past the current, which starts at 0), each further signer adds to it with --statement. Register it with "releases rotate-pins".',
  target: 'none',
  flags: {
    key: keyFlag,
    pins: {
      type: 'string',
      repeated: true,
      description: 'The new release key ids (sha256/…), repeated or separated by commas',
      placeholder: 'KEYID',
    },
    threshold: {
      type: 'number',
      integer: true,
      min: 1,
      description: 'How many of the new keys must sign a release (default: every one)',
      placeholder: 'N',
    },
    epoch: {
      type: 'number',
      integer: true,
      min: 1,
      description: 'The statement’s epoch: one past the epoch the nodes hold (the first change is 1)',
      placeholder: 'E',
    },
    statement: {
      type: 'string',
      description: 'A statement another current key signed, to add this key’s signature to',
      placeholder: 'FILE',
    },
    out: { ...outFlag, description: 'A new file for the statement (never written over); stdout without it' },
  },
  examples: [
    'better-compute release sign-pins --key k1.pem --pins sha256/…,sha256/… --threshold 2 --epoch 1 --out pins-1.json',
    'better-compute release sign-pins --key k2.pem --statement pins-1.json --out pins-1b.json',
  ],
  async run({ flags, io }) {
    const { readReleasePinStatement, releasePinStatementBody, signReleasePinStatement } =
      await import('@better-compute/core/release');
    const pins = (flags.pins ?? []).flatMap((value) => value.split(',')).map((pin) => pin.trim());
    const newSet = pins.length > 0 || flags.threshold !== undefined || flags.epoch !== undefined;
    if (flags.statement !== undefined && newSet)
      throw new CliError('INVALID_ARGUMENT', '--statement adds a signature to a statement as it is', {
        hint: 'Give --statement FILE alone, or --pins, --threshold and --epoch for a new statement.',
        details: { field: 'statement' },
      });
    if (flags.statement === undefined && (pins.length === 0 || flags.epoch === undefined))
      throw new CliError('INVALID_ARGUMENT', 'a new statement needs --pins and --epoch', {
        hint: 'Name the new release keys with --pins and the next epoch with --epoch (or add to a statement with --statement FILE).',
        details: { field: pins.length === 0 ? 'pins' : 'epoch' },
      });
    const key = await readReleaseKeyFile(io, flags.key);
    const document =
      flags.statement !== undefined
        ? readReleasePinStatement(
            await readJsonFile(
              io,
              flags.statement,
              '--statement',
              MAX_STATEMENT_BYTES,
              'Give the file "release sign-pins" wrote.',
            ),
            flags.statement,
          )
        : releasePinStatementBody({
            pins,
            threshold: flags.threshold,
            epoch: flags.epoch!,
            issuedAt: new Date().toISOString(),
          });
    const signed = signReleasePinStatement(document, key);
    if (flags.out === undefined) return signed;
    const path = await writeJsonOut(io, flags.out, signed, 'a statement is never written over');
    return {
      out: path,
      epoch: signed.statement.epoch,
      pins: signed.statement.pins,
      threshold: signed.statement.threshold,
      keyId: key.keyId,
      signatures: signed.signatures.map((signature) => signature.keyId),
    };
  },
});
