/**
 * Release-pin statements: how the release keys a daemon pinned at join change. A statement names a
 * new pin set (keys and threshold) and an epoch, and is signed by release keys; it moves a holder
 * of the pins of an earlier epoch forward only when a threshold of the keys that holder pins signed
 * it and its epoch is past the holder's. So a control plane that was taken over cannot make a node
 * trust a key of its own: it holds no threshold of the offline release keys. The signature covers a
 * context line of its own, so no manifest signature can be read as one (docs/releases.md).
 * Node only (node:crypto); the schema is pure (manifest.ts).
 */
import { type KeyObject, sign, verify } from 'node:crypto';
import { ComputeError } from '../errors.js';
import { canonicalBytes } from './canonical.js';
import {
  RELEASE_PIN_SIGNING_CONTEXT,
  type ReleasePinStatement,
  type ReleasePinStatementBody,
  type ReleaseSignature,
  releasePinStatementSchema,
} from './manifest.js';
import {
  decodeReleasePublicKey,
  encodeReleasePublicKey,
  readReleaseTrust,
  type ReleaseKey,
  releaseKeyId,
} from './signatures.js';

/** The pins a holder trusts now: key ids, how many must sign, and the epoch they came with (0 at join). */
export interface HeldReleasePins {
  pins: string[];
  threshold: number;
  epoch: number;
}

/** The bytes a pin statement's signatures cover: the context line, then the body's canonical JSON. */
export function releasePinSigningBytes(body: ReleasePinStatementBody): Uint8Array {
  const context = new TextEncoder().encode(RELEASE_PIN_SIGNING_CONTEXT);
  const bytes = canonicalBytes(body);
  const out = new Uint8Array(context.length + bytes.length);
  out.set(context);
  out.set(bytes, context.length);
  return out;
}

/**
 * The body of a statement for a new pin set: the pins checked as a deployment's are (each a key id
 * or a public key, no key twice, a threshold from 1 to their number) and kept as key ids.
 */
export function releasePinStatementBody(input: {
  pins: readonly unknown[];
  threshold: number | undefined;
  epoch: number;
  issuedAt: string;
}): ReleasePinStatementBody {
  const trust = readReleaseTrust(input.pins, input.threshold, 'INVALID_ARGUMENT', 'pins');
  const parsed = releasePinStatementSchema.shape.statement.safeParse({
    kind: 'bcd-release-pins',
    epoch: input.epoch,
    pins: trust.pins.map((pin) => pin.keyId),
    threshold: trust.threshold,
    issuedAt: input.issuedAt,
  });
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new ComputeError('INVALID_ARGUMENT', `${issue.path.join('.') || 'statement'}: ${issue.message}`, {
      details: { field: String(issue.path[0] ?? 'statement') },
      hint: 'The epoch is a whole number past the one the nodes hold (the first statement is epoch 1).',
    });
  }
  return parsed.data;
}

/** Reads a pin statement document; anything else (an unknown field included) is INVALID_ARGUMENT. */
export function readReleasePinStatement(value: unknown, name: string): ReleasePinStatement {
  const parsed = releasePinStatementSchema.safeParse(value);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const where = issue.path.join('.');
    throw new ComputeError(
      'INVALID_ARGUMENT',
      `${name} is not a release-pin statement: ${where ? `${where}: ` : ''}${issue.message}`,
      {
        details: { field: where || 'statement' },
        hint: 'Give the file "better-compute release sign-pins" wrote, unchanged.',
      },
    );
  }
  return parsed.data;
}

function signatureOver(body: ReleasePinStatementBody, key: ReleaseKey): ReleaseSignature {
  return {
    keyId: key.keyId,
    publicKey: encodeReleasePublicKey(key.publicKey),
    sig: sign(null, releasePinSigningBytes(body), key.privateKey).toString('base64'),
  };
}

/** The key a signature is by when it is what it claims and verifies over the body, else null. Never throws. */
function signerOf(body: ReleasePinStatementBody, signature: ReleaseSignature): string | null {
  const key: KeyObject | null = decodeReleasePublicKey(signature.publicKey);
  if (!key || releaseKeyId(key) !== signature.keyId) return null;
  try {
    const sig = Buffer.from(signature.sig, 'base64');
    return sig.length === 64 && verify(null, releasePinSigningBytes(body), key, sig) ? signature.keyId : null;
  } catch {
    return null;
  }
}

/**
 * Adds a release key's signature to a statement (a new one when `document` is a bare body), after
 * checking the signatures it carries: a statement changed after signing is RELEASE_UNVERIFIED, a
 * key that already signed it ALREADY_EXISTS (a threshold counts distinct keys).
 */
export function signReleasePinStatement(
  document: ReleasePinStatementBody | ReleasePinStatement,
  key: ReleaseKey,
): ReleasePinStatement {
  const statement = 'statement' in document ? document : { statement: document, signatures: [] };
  statement.signatures.forEach((signature, index) => {
    if (signerOf(statement.statement, signature) === null)
      throw new ComputeError(
        'RELEASE_UNVERIFIED',
        `signature ${index + 1} (${signature.keyId}) does not verify over this statement`,
        {
          details: { index, keyId: signature.keyId },
          hint: 'The statement was changed after signing: sign the original again.',
        },
      );
  });
  if (statement.signatures.some((signature) => signature.keyId === key.keyId))
    throw new ComputeError('ALREADY_EXISTS', `${key.keyId} has already signed this statement`, {
      details: { keyId: key.keyId, epoch: statement.statement.epoch },
      hint: 'A threshold counts distinct keys: have another current release key sign it.',
    });
  return {
    statement: statement.statement,
    signatures: [...statement.signatures, signatureOver(statement.statement, key)],
  };
}

/**
 * Checks a statement against the pins held now: its epoch must be past theirs (INVALID_STATE
 * otherwise: an old or replayed statement), and a threshold of the held keys must have signed it
 * (RELEASE_UNVERIFIED otherwise; keys not held do not count, and the new keys' own signatures count
 * only when they were already held). Answers the pins it moves to.
 */
export function verifyReleasePinStatement(
  document: unknown,
  held: HeldReleasePins,
): HeldReleasePins & { signers: string[] } {
  const { statement, signatures } = readReleasePinStatement(document, 'the statement');
  if (statement.epoch <= held.epoch)
    throw new ComputeError(
      'INVALID_STATE',
      `the statement's epoch ${statement.epoch} is not past the pinned epoch ${held.epoch}`,
      {
        details: { epoch: statement.epoch, pinnedEpoch: held.epoch },
        hint: `Sign a statement with an epoch past ${held.epoch} (release sign-pins --epoch ${held.epoch + 1}).`,
      },
    );
  const signers: string[] = [];
  for (const signature of signatures) {
    if (!held.pins.includes(signature.keyId) || signers.includes(signature.keyId)) continue;
    if (signerOf(statement, signature) !== null) signers.push(signature.keyId);
  }
  if (signers.length < held.threshold)
    throw new ComputeError(
      'RELEASE_UNVERIFIED',
      `the statement of epoch ${statement.epoch} has ${signers.length} valid signature${signers.length === 1 ? '' : 's'} by the pinned release keys; ${held.threshold} are needed`,
      {
        details: { epoch: statement.epoch, signers, threshold: held.threshold },
        hint: 'Have more of the current release keys sign it (release sign-pins --key KEY --statement FILE).',
      },
    );
  return { pins: statement.pins, threshold: statement.threshold, epoch: statement.epoch, signers };
}

/**
 * Follows a chain of statements from the pins held: those of an epoch past the held one, in epoch
 * order, each verified under the pins the one before it reached. One that does not verify refuses
 * the whole chain (the error says which), so a holder either reaches the end or keeps what it had.
 */
export function followReleasePinStatements(
  held: HeldReleasePins,
  statements: readonly unknown[],
): HeldReleasePins {
  const read = statements.map((value, index) => readReleasePinStatement(value, `statement ${index + 1}`));
  const ahead = read
    .filter((document) => document.statement.epoch > held.epoch)
    .sort((a, b) => a.statement.epoch - b.statement.epoch);
  let reached: HeldReleasePins = held;
  for (const document of ahead) {
    const { signers: _signers, ...next } = verifyReleasePinStatement(document, reached);
    reached = next;
  }
  return reached;
}
