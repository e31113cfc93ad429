/**
 * Issue 39 item 1, through the real binary on PostgreSQL: each seal publishes its checkpoint (an
 * `audit.checkpoint` event in the outbox, and the public `audit.checkpoint` method, which needs no
 * credential and gives the signed note only); a checkpoint a reader kept catches a log whose tail was
 * deleted (checkpoints, leaves and entries) or that was rewritten and sealed again, which `verify`
 * alone passes; a witness cosigns in C2SP cosignature/v1, `verify --witness --min-witnesses` counts
 * valid cosignatures only, and the witness refuses a checkpoint that does not extend its own.
 */
import { spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testDatabaseKinds } from '@better-compute/db/testing';
import { auditCheckpointSchema } from '@better-compute/core/methods';
import { sql } from 'kysely';
import { createPkiBundle } from '../src/pki/create.js';
import { auditFixture, writeEntries, type AuditFixture } from './audit-support.js';

const kinds = await testDatabaseKinds();
const bin = join(import.meta.dirname, '..', 'bin', 'better-compute.cjs');
const secret = 'audit trusted test secret, long enough 0123';

function run(cwd: string, args: string[], env: Record<string, string> = {}, input?: string) {
  const result = spawnSync(process.execPath, [bin, ...args], {
    cwd,
    env: { PATH: process.env.PATH ?? '', HOME: cwd, ...env },
    encoding: 'utf8',
    ...(input === undefined ? {} : { input }),
  });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

describe.runIf(kinds.includes('postgres'))('kept checkpoints and witnesses (real binary, postgres)', () => {
  let f: AuditFixture;
  let cwd: string;
  let env: Record<string, string>;
  let pin: string;
  const witnessKeys: Record<string, string> = {};

  /** Seals acme's log until it holds `size` entries (other suites can hold the snapshot back). */
  async function sealTo(size: number) {
    for (let attempt = 0; attempt < 60; attempt++) {
      const sealed = run(cwd, ['audit', 'checkpoint', '--tenant', 'acme'], {
        ...env,
        BETTER_COMPUTE_SECRET: secret,
      });
      expect(sealed.status, sealed.stderr).toBe(0);
      const latest = await f.db
        .selectFrom('compute.audit_checkpoints')
        .select('tree_size')
        .where('tenant_id', '=', 'acme')
        .orderBy('tree_size', 'desc')
        .executeTakeFirst();
      if (Number(latest?.tree_size ?? 0) >= size) return;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    throw new Error(`acme's log never reached ${size}`);
  }
  const verify = (...more: string[]) => run(cwd, ['audit', 'verify', '--tenant', 'acme', ...more], env);
  const cosign = (state: string, key = 'w1.key') =>
    run(
      cwd,
      ['audit', 'witness', 'cosign', '--key', key, '--state', state, '--tenant', 'acme', '--pin', pin],
      env,
    );

  beforeAll(async () => {
    f = await auditFixture();
    cwd = mkdtempSync(join(tmpdir(), 'bc-audit-trusted-'));
    env = { BETTER_COMPUTE_DATABASE_URL: f.database.url! };
    const bundle = await createPkiBundle({
      path: join(cwd, '.better-compute', 'pki.json'),
      secret,
      trustDomain: 'compute.example.com',
    });
    pin = bundle.audit!.pin;
    // Better IAM's tables too: the public method runs in process through the real handler.
    const migrated = run(cwd, ['migrate'], env);
    expect(migrated.status, migrated.stderr).toBe(0);
    for (const name of ['w1', 'w2']) {
      const made = run(cwd, [
        'audit',
        'witness',
        'keygen',
        '--name',
        `${name}.witness.example`,
        '--out',
        `${name}.key`,
      ]);
      expect(made.status, made.stderr).toBe(0);
      witnessKeys[name] = JSON.parse(made.stdout).verifierKey;
    }
    await writeEntries(f.db, 'acme', 5);
    await sealTo(5);
  }, 120_000);
  afterAll(async () => {
    await f?.close();
  });

  it('publishes each checkpoint: a public method with the signed note only, and an event in the outbox', async () => {
    const row = await f.db
      .selectFrom('compute.audit_checkpoints')
      .select(['note', 'signer'])
      .where('tenant_id', '=', 'acme')
      .where('tree_size', '=', 5)
      .executeTakeFirstOrThrow();
    // No BETTER_COMPUTE_TOKEN, no saved profile: the method is public.
    const got = run(cwd, ['api', 'audit.checkpoint', 'tenantId=acme'], env);
    expect(got.status, got.stderr).toBe(0);
    const answer = JSON.parse(got.stdout);
    expect(Object.keys(answer).sort()).toEqual(['note', 'origin', 'rootHash', 'signer', 'size', 'tenantId']);
    expect(answer).toMatchObject({ tenantId: 'acme', origin: 'compute.example.com/audit/acme', size: 5 });
    expect(answer.note).toBe(row.note);
    expect(answer.signer).toBe(row.signer);
    writeFileSync(join(cwd, 'kept.note'), answer.note);

    // An unknown tenant and one without a checkpoint answer alike; malformed input is a 400, not a 5xx.
    const unknown = run(cwd, ['api', 'audit.checkpoint', 'tenantId=nobody'], env);
    expect(unknown.stderr).toMatch(/^NOT_FOUND: tenant nobody has no signed audit checkpoint/);
    expect(run(cwd, ['api', 'audit.checkpoint', 'tenantId=Not A Tenant'], env).stderr).toMatch(
      /^INVALID_ARGUMENT: /,
    );
    const beyond = run(cwd, ['api', 'audit.consistency', 'tenantId=acme', 'fromSize:=6'], env);
    expect(beyond.stderr).toMatch(/^INVALID_ARGUMENT: fromSize 6 is larger/);
    const proof = JSON.parse(
      run(cwd, ['api', 'audit.consistency', 'tenantId=acme', 'fromSize:=2'], env).stdout,
    );
    expect(proof).toMatchObject({ tenantId: 'acme', fromSize: 2, checkpoint: { size: 5, note: row.note } });
    expect(proof.proof.length).toBeGreaterThan(0);

    const events = await f.db
      .selectFrom('compute.events')
      .select(['type', 'subject_type', 'subject_id', 'data', 'tenant_id'])
      .where('type', '=', 'audit.checkpoint')
      .execute();
    const five = events.find((e) => (e.data as { size: number }).size === 5);
    expect(five).toMatchObject({
      subject_type: 'auditLog',
      subject_id: 'compute.example.com/audit/acme',
      tenant_id: 'acme',
    });
    expect(auditCheckpointSchema.strict().parse(five!.data)).toEqual(answer);
  }, 120_000);

  it('verify --trusted passes an untouched log; a witness cosigns, and --min-witnesses counts only valid cosignatures', async () => {
    const first = cosign('state-1');
    expect(first.status, first.stderr).toBe(0);
    expect(JSON.parse(first.stdout)).toMatchObject({
      size: 5,
      previousSize: 0,
      witness: 'w1.witness.example',
    });
    // A copy of the witness at size 5, for the rewrite below.
    cpSync(join(cwd, 'state-1'), join(cwd, 'state-at-5'), { recursive: true });

    await writeEntries(f.db, 'acme', 3, 5);
    await sealTo(8);
    const second = cosign('state-1');
    expect(second.status, second.stderr).toBe(0);
    const cosigned = JSON.parse(second.stdout);
    expect(cosigned).toMatchObject({ size: 8, previousSize: 5 });
    writeFileSync(join(cwd, 'cosigned.note'), cosigned.note);

    const clean = verify('--trusted', 'kept.note');
    expect(clean.status, clean.stderr).toBe(0);
    expect(JSON.parse(clean.stdout)).toMatchObject({
      ok: true,
      trusted: [{ size: 5, ancestor: true, signatureChecked: true }],
    });
    const one = verify('--trusted', 'cosigned.note', '--witness', witnessKeys.w1!, '--min-witnesses', '1');
    expect(one.status, one.stderr).toBe(0);
    expect(JSON.parse(one.stdout).witnesses).toMatchObject({ required: 1, witnessed: { size: 8 } });
    const two = verify(
      '--trusted',
      'cosigned.note',
      '--witness',
      witnessKeys.w1!,
      '--witness',
      witnessKeys.w2!,
      '--min-witnesses',
      '2',
    );
    expect(two.status).toBe(1);
    expect(two.stderr).toMatch(/^INVALID_PROOF: no checkpoint carries 2 valid cosignature/);
    // w2's name and key id on w1's signature: a forged cosignature.
    const w2Id = witnessKeys.w2!.split('+')[1]!;
    const w1Line = cosigned.note.trimEnd().split('\n').at(-1) as string;
    const blob = Buffer.from(w1Line.split(' ')[2]!, 'base64');
    Buffer.from(w2Id, 'hex').copy(blob, 0);
    writeFileSync(
      join(cwd, 'forged.note'),
      `${cosigned.note}\u2014 w2.witness.example ${blob.toString('base64')}\n`,
    );
    const forged = verify(
      '--trusted',
      'forged.note',
      '--witness',
      witnessKeys.w1!,
      '--witness',
      witnessKeys.w2!,
      '--min-witnesses',
      '1',
    );
    expect(forged.status).toBe(1);
    expect(forged.stderr).toMatch(
      /^INVALID_PROOF: checkpoint 8 carries a cosignature by w2\.witness\.example that does not verify/,
    );
    expect(verify('--witness', witnessKeys.w1!).status).toBe(2);

    // check-proof, offline: the proof carries the consistency proofs from the kept sizes.
    const entry = await f.db
      .selectFrom('compute.audit_events')
      .select('id')
      .where('leaf_index', '=', 1)
      .executeTakeFirstOrThrow();
    const proved = run(
      cwd,
      ['audit', 'prove', entry.id, '--tenant', 'acme', '--out', 'proof.json', '--trusted', 'kept.note'],
      env,
    );
    expect(proved.status, proved.stderr).toBe(0);
    const offline = mkdtempSync(join(tmpdir(), 'bc-audit-trusted-offline-'));
    for (const file of ['proof.json', 'kept.note', 'cosigned.note'])
      writeFileSync(join(offline, file), readFileSync(join(cwd, file)));
    const checked = run(offline, [
      'audit',
      'check-proof',
      'proof.json',
      '--pin',
      pin,
      '--trusted',
      'kept.note',
    ]);
    expect(checked.status, checked.stderr).toBe(0);
    expect(JSON.parse(checked.stdout).trusted).toEqual([
      { size: 5, rootHash: expect.any(String), ancestor: true },
    ]);
    const witnessed = run(offline, [
      'audit',
      'check-proof',
      'proof.json',
      '--pin',
      pin,
      '--trusted',
      'cosigned.note',
      '--witness',
      witnessKeys.w1!,
    ]);
    expect(witnessed.status, witnessed.stderr).toBe(0);
  }, 120_000);

  it('a kept checkpoint catches a deleted tail that verify alone passes; the witness refuses the shorter log', async () => {
    const [, size8, root8] = readFileSync(join(cwd, 'cosigned.note'), 'utf8').split('\n');
    expect(size8).toBe('8');
    await sql`delete from compute.audit_checkpoints where tenant_id = 'acme' and tree_size > 5`.execute(f.db);
    await sql`delete from compute.audit_leaves where tenant_id = 'acme' and leaf_index >= 5`.execute(f.db);
    await sql`delete from compute.audit_events where tenant_id = 'acme' and leaf_index >= 5`.execute(f.db);
    const alone = verify();
    expect(alone.status, alone.stderr).toBe(0);
    expect(JSON.parse(alone.stdout)).toMatchObject({ ok: true, entries: 5 });

    const caught = verify('--trusted', 'cosigned.note');
    expect(caught.status).toBe(1);
    expect(caught.stderr.split('\n')[0]).toBe(
      `AUDIT_TAMPERED: tenant acme's audit log was shortened or rewritten: the kept checkpoint of size 8 and root ${Buffer.from(root8!, 'base64').toString('hex')} (hex) is no longer an ancestor of the log: it is larger than the log's latest checkpoint (size 5): the log was shortened`,
    );
    expect(JSON.parse(caught.stdout).problems).toEqual([
      expect.objectContaining({ kind: 'not_an_ancestor', checkpoint: 8 }),
    ]);
    // check-proof against a fresh proof of the shortened log.
    const entry = await f.db
      .selectFrom('compute.audit_events')
      .select('id')
      .where('leaf_index', '=', 1)
      .executeTakeFirstOrThrow();
    run(
      cwd,
      ['audit', 'prove', entry.id, '--tenant', 'acme', '--out', 'short.json', '--trusted', 'cosigned.note'],
      env,
    );
    const short = run(cwd, [
      'audit',
      'check-proof',
      'short.json',
      '--pin',
      pin,
      '--trusted',
      'cosigned.note',
    ]);
    expect(short.status).toBe(1);
    expect(short.stderr).toMatch(
      /^AUDIT_TAMPERED: the kept checkpoint of size 8 and root [0-9a-f]{64} \(hex\) is no longer an ancestor/,
    );

    const refused = cosign('state-1');
    expect(refused.status).toBe(1);
    expect(refused.stderr).toMatch(
      /^AUDIT_TAMPERED: compute\.example\.com\/audit\/acme presents size 5, smaller than the checkpoint of size 8/,
    );
  }, 120_000);

  it('a log rewritten and sealed again passes verify alone, and fails against a kept checkpoint and a witness', async () => {
    await sql`delete from compute.audit_checkpoints where tenant_id = 'acme'`.execute(f.db);
    await sql`delete from compute.audit_leaves where tenant_id = 'acme'`.execute(f.db);
    await sql`update compute.audit_events set leaf_index = null where tenant_id = 'acme'`.execute(f.db);
    await sql`update compute.audit_events set actor = 'prn_nobody' where tenant_id = 'acme' and request_id = 'req_acme_2'`.execute(
      f.db,
    );
    await writeEntries(f.db, 'acme', 2, 20);
    await sealTo(7);
    const alone = verify();
    expect(alone.status, alone.stderr).toBe(0);

    const caught = verify('--trusted', 'kept.note');
    expect(caught.status).toBe(1);
    expect(caught.stderr).toMatch(
      /^AUDIT_TAMPERED: tenant acme's audit log was shortened or rewritten: the kept checkpoint of size 5 and root [0-9a-f]{64} \(hex\) is no longer an ancestor of the log: the consistency proof to checkpoint 7 fails/,
    );
    // The witness that held size 5 fetches the proof from 5 to 7, and it does not verify.
    const refused = cosign('state-at-5');
    expect(refused.status).toBe(1);
    expect(refused.stderr).toMatch(
      /^AUDIT_TAMPERED: compute\.example\.com\/audit\/acme at size 7 does not extend the checkpoint of size 5/,
    );
    // Nothing was signed and its state did not move: it still refuses.
    expect(cosign('state-at-5').status).toBe(1);
  }, 120_000);
});
