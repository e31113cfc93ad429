/**
 * The JWT signing key pair, kept in `iam.signing_keys` so every replica signs and verifies with the
 * same key. The first replica that needs one creates it; a race keeps the one that committed first
 * (a unique index allows one active key). Keys are cached in memory once read.
 */
import { generateKeyPair, exportJWK, importJWK, type JWK, type CryptoKey } from 'jose';
import type { Kysely } from 'kysely';
import { ulid } from '@better-compute/core';
import type { IamDatabase } from './schema.js';

export const JWT_ALG = 'EdDSA';
/** The `iss` of every session JWT IAM signs, and the only one it accepts. */
export const JWT_ISSUER = 'better-iam';

export interface ActiveKey {
  kid: string;
  privateKey: CryptoKey;
}

export class SigningKeys {
  readonly #db: Kysely<IamDatabase>;
  readonly #now: () => Date;
  #active: Promise<ActiveKey> | null = null;
  readonly #verifiers = new Map<string, Promise<CryptoKey | null>>();

  constructor(db: Kysely<IamDatabase>, now: () => Date) {
    this.#db = db;
    this.#now = now;
  }

  active(): Promise<ActiveKey> {
    this.#active ??= this.#loadOrCreate().catch((error: unknown) => {
      this.#active = null;
      throw error;
    });
    return this.#active;
  }

  async #loadOrCreate(): Promise<ActiveKey> {
    const existing = await this.#readActive();
    if (existing) return existing;
    const pair = await generateKeyPair(JWT_ALG, { extractable: true });
    const kid = `sk_${ulid()}`;
    const publicJwk = { ...(await exportJWK(pair.publicKey)), kid, alg: JWT_ALG, use: 'sig' };
    const privateJwk = { ...(await exportJWK(pair.privateKey)), kid, alg: JWT_ALG };
    await this.#db
      .insertInto('iam.signing_keys')
      .values({
        kid,
        alg: JWT_ALG,
        public_jwk: JSON.stringify(publicJwk),
        private_jwk: JSON.stringify(privateJwk),
        created_at: this.#now(),
      })
      .onConflict((oc) => oc.doNothing())
      .execute();
    const winner = await this.#readActive();
    if (!winner) throw new Error('no active signing key after creating one');
    return winner;
  }

  async #readActive(): Promise<ActiveKey | null> {
    const row = await this.#db
      .selectFrom('iam.signing_keys')
      .select(['kid', 'private_jwk'])
      .where('retired_at', 'is', null)
      .executeTakeFirst();
    if (!row) return null;
    const privateKey = (await importJWK(JSON.parse(row.private_jwk) as JWK, JWT_ALG)) as CryptoKey;
    return { kid: row.kid, privateKey };
  }

  /** The public key of `kid`, or null when there is none. Unknown kids are not remembered. */
  verifier(kid: string): Promise<CryptoKey | null> {
    let found = this.#verifiers.get(kid);
    if (!found) {
      found = (async () => {
        const row = await this.#db
          .selectFrom('iam.signing_keys')
          .select('public_jwk')
          .where('kid', '=', kid)
          .executeTakeFirst();
        if (!row) {
          this.#verifiers.delete(kid);
          return null;
        }
        return (await importJWK(JSON.parse(row.public_jwk) as JWK, JWT_ALG)) as CryptoKey;
      })();
      this.#verifiers.set(kid, found);
      found.catch(() => this.#verifiers.delete(kid));
    }
    return found;
  }

  /** The JWKS document: every key's public half. */
  async jwks(): Promise<{ keys: JWK[] }> {
    await this.active();
    const rows = await this.#db
      .selectFrom('iam.signing_keys')
      .select('public_jwk')
      .orderBy('created_at')
      .execute();
    return { keys: rows.map((row) => JSON.parse(row.public_jwk) as JWK) };
  }
}
