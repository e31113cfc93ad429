/**
 * Release-pin statements (`@better-compute/core/release`, issue 33 item 4): how the release keys a
 * daemon pinned at join change. A statement moves the pins only when a threshold of the keys held
 * signed it and its epoch is past theirs; a chain is followed whole or not at all; a manifest
 * signature never stands for a statement's.
 */
import { describe, expect, it } from 'vitest';
import { ComputeError } from '../src/errors.js';
import {
  followReleasePinStatements,
  generateReleaseKey,
  readReleaseKey,
  readReleasePinStatement,
  type ReleaseKey,
  releasePinStatementBody,
  signManifest,
  signReleasePinStatement,
  verifyReleasePinStatement,
} from '../src/release/index.js';

const key = (): ReleaseKey => readReleaseKey(generateReleaseKey().privatePem, 'a test key');
const [k1, k2, k3, k4, k5] = [key(), key(), key(), key(), key()];
const issuedAt = '2026-06-01T00:00:00.000Z';
/** The pins a node took at join: k1 and k2, both needed. */
const joined = { pins: [k1.keyId, k2.keyId], threshold: 2, epoch: 0 };

const body = (pins: ReleaseKey[], threshold: number, epoch: number) =>
  releasePinStatementBody({ pins: pins.map((k) => k.keyId), threshold, epoch, issuedAt });
const signed = (b: ReturnType<typeof body>, signers: ReleaseKey[]) =>
  signers.reduce(
    (document, signer) => signReleasePinStatement(document, signer),
    b as Parameters<typeof signReleasePinStatement>[0],
  ) as ReturnType<typeof signReleasePinStatement>;

const codeOf = (run: () => unknown) => {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(ComputeError);
    return { code: (error as ComputeError).code, message: (error as ComputeError).message };
  }
  throw new Error('expected a refusal');
};

describe('release-pin statements', () => {
  it('a statement signed by a threshold of the held keys, with a later epoch, moves the pins', () => {
    const statement = signed(body([k3, k4], 1, 1), [k1, k2]);
    expect(verifyReleasePinStatement(statement, joined)).toEqual({
      pins: [k3.keyId, k4.keyId],
      threshold: 1,
      epoch: 1,
      signers: [k1.keyId, k2.keyId],
    });
    // It survives JSON, as it travels in a file and a welcome.
    expect(verifyReleasePinStatement(JSON.parse(JSON.stringify(statement)), joined).epoch).toBe(1);
  });

  it('one held key where two are needed is RELEASE_UNVERIFIED; keys not held, or the new keys, do not count', () => {
    expect(codeOf(() => verifyReleasePinStatement(signed(body([k3], 1, 1), [k1]), joined))).toEqual({
      code: 'RELEASE_UNVERIFIED',
      message: 'the statement of epoch 1 has 1 valid signature by the pinned release keys; 2 are needed',
    });
    expect(
      codeOf(() => verifyReleasePinStatement(signed(body([k3, k4], 2, 1), [k1, k3, k4, k5]), joined)).code,
    ).toBe('RELEASE_UNVERIFIED');
  });

  it('an epoch not past the held one is INVALID_STATE: an old statement is never taken again', () => {
    const statement = signed(body([k3], 1, 1), [k1, k2]);
    expect(codeOf(() => verifyReleasePinStatement(statement, { ...joined, epoch: 1 }))).toEqual({
      code: 'INVALID_STATE',
      message: "the statement's epoch 1 is not past the pinned epoch 1",
    });
  });

  it('a statement changed after signing does not verify, and cannot be signed further', () => {
    const statement = signed(body([k3], 1, 1), [k1, k2]);
    const changed = { ...statement, statement: { ...statement.statement, pins: [k5.keyId] } };
    expect(codeOf(() => verifyReleasePinStatement(changed, joined)).code).toBe('RELEASE_UNVERIFIED');
    expect(codeOf(() => signReleasePinStatement(changed, k4)).code).toBe('RELEASE_UNVERIFIED');
    expect(codeOf(() => signReleasePinStatement(statement, k1)).code).toBe('ALREADY_EXISTS');
  });

  it('a manifest signature by a held key does not stand for a statement signature', () => {
    const statement = signed(body([k3], 1, 1), [k1]);
    const manifest = {
      version: '1.0.0',
      artifacts: [{ platform: 'linux-x64', size: 1, sha256: 'a'.repeat(64) }],
      minimumVersion: '0.1.0',
      notes: '',
      createdAt: issuedAt,
    };
    const borrowed = { ...signManifest(manifest, k2) };
    const forged = { ...statement, signatures: [...statement.signatures, borrowed] };
    expect(codeOf(() => verifyReleasePinStatement(forged, joined)).code).toBe('RELEASE_UNVERIFIED');
  });

  it('a chain is followed in epoch order, each step under the keys the one before reached', () => {
    const first = signed(body([k3, k4], 2, 1), [k1, k2]);
    const second = signed(body([k5], 1, 2), [k3, k4]);
    // Given out of order, and with a step the node already holds.
    expect(followReleasePinStatements(joined, [second, first])).toEqual({
      pins: [k5.keyId],
      threshold: 1,
      epoch: 2,
    });
    expect(
      followReleasePinStatements({ pins: [k3.keyId, k4.keyId], threshold: 2, epoch: 1 }, [first, second]),
    ).toMatchObject({ epoch: 2 });
    expect(followReleasePinStatements(joined, [])).toEqual(joined);
  });

  it('a chain with a step the keys before did not sign is refused whole', () => {
    const first = signed(body([k3, k4], 2, 1), [k1, k2]);
    // Epoch 2 signed by the join's keys, not by epoch 1's: a skipped step.
    const skipping = signed(body([k5], 1, 2), [k1, k2]);
    expect(codeOf(() => followReleasePinStatements(joined, [first, skipping])).code).toBe(
      'RELEASE_UNVERIFIED',
    );
  });

  it('a malformed statement or body is INVALID_ARGUMENT, naming the field', () => {
    const statement = signed(body([k3], 1, 1), [k1]);
    expect(codeOf(() => readReleasePinStatement({ ...statement, extra: 1 }, 'pins.json')).message).toContain(
      'pins.json is not a release-pin statement',
    );
    expect(
      codeOf(() =>
        readReleasePinStatement({ ...statement, statement: { ...statement.statement, threshold: 3 } }, 'p'),
      ).message,
    ).toContain('statement.threshold: threshold is more than the number of pins');
    expect(codeOf(() => body([k3], 1, 0)).code).toBe('INVALID_ARGUMENT');
    expect(codeOf(() => body([k3, k3], 1, 1)).message).toContain('pins[1] pins');
    expect(codeOf(() => body([k3], 2, 1)).message).toContain('threshold must be a whole number from 1 to 1');
  });
});
