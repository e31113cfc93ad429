/**
 * The webhooks commands through the real binary against a running server (`dev --memory`, every
 * role): create with --secret-out writes a new 0600 file and prints no secret, the same file again
 * is ALREADY_EXISTS with no webhook created; deliveries reach a loopback receiver and verify with
 * `standardwebhooks` under the secret from the file; deliveries, redeliver, ping, rotate-secret,
 * event-types, and another tenant's NOT_FOUND.
 */
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type DevServer,
  type RunResult,
  type RunningServer,
  runCompute,
  startDev,
} from '../../../test/e2e/support.js';
import { type Receiver, startReceiver } from './webhook-receiver.js';

const work = mkdtempSync(join(tmpdir(), 'bc-webhooks-'));
let server: RunningServer | undefined;
let receiver: Receiver;
let url = '';
let dev: DevServer['dev'];

function compute(args: string[], token = dev.acmeAdmin.apiKey): Promise<RunResult> {
  return runCompute(args, { cwd: work, url, token, timeoutMs: 30_000 });
}

beforeAll(async () => {
  receiver = await startReceiver();
  ({ server, url, dev } = await startDev(work, []));
}, 120_000);

afterAll(async () => {
  await server?.stop();
  await receiver?.close();
  rmSync(work, { recursive: true, force: true });
});

describe('webhooks commands through the real binary', () => {
  let webhookId = '';
  let secret = '';

  it('create --secret-out writes the secret to a new 0600 file and prints the webhook without it', async () => {
    const result = await compute([
      'webhooks',
      'create',
      '--endpoint',
      receiver.url,
      '--events',
      'project.*',
      '--events',
      'site.created',
      '--secret-out',
      'hook.secret',
    ]);
    expect(result.status, result.stderr).toBe(0);
    const printed = JSON.parse(result.stdout);
    webhookId = printed.webhook.id;
    expect(printed).toMatchObject({
      webhook: { url: receiver.url, events: ['project.*', 'site.created'], enabled: true },
      secretOut: join(work, 'hook.secret'),
    });
    secret = readFileSync(join(work, 'hook.secret'), 'utf8').trim();
    expect(secret).toMatch(/^whsec_/);
    expect(statSync(join(work, 'hook.secret')).mode & 0o777).toBe(0o600);
    expect(result.stdout + result.stderr).not.toContain(secret.slice(6));
  });

  it('the same --secret-out again is ALREADY_EXISTS, and no webhook is created', async () => {
    const result = await compute([
      'webhooks',
      'create',
      '--endpoint',
      receiver.url,
      '--events',
      'project.*',
      '--secret-out',
      'hook.secret',
    ]);
    expect(result.status).not.toBe(0);
    expect(result.stderr).toMatch(/^ALREADY_EXISTS: hook\.secret already exists/m);
    expect(readFileSync(join(work, 'hook.secret'), 'utf8').trim()).toBe(secret);
    const listed = await compute(['webhooks', 'list', '--format', 'json']);
    expect(JSON.parse(listed.stdout).items.map((w: { id: string }) => w.id)).toEqual([webhookId]);
  });

  it('a project created through the CLI is delivered, and verifies under the secret in the file', async () => {
    const created = await compute(['projects', 'create', 'hooked']);
    expect(created.status, created.stderr).toBe(0);
    const [received] = await receiver.waitFor((r) => r.length >= 1);
    const payload = new Webhook(secret).verify(
      received!.body,
      received!.headers as Record<string, string>,
    ) as {
      type: string;
      data: { subject: { id: string } };
    };
    expect(payload.type).toBe('project.created');
    expect(payload.data.subject.id).toBe(JSON.parse(created.stdout).id);
  });

  it('deliveries lists it as a table, and redeliver sends it again with the same id', async () => {
    let table = '';
    for (let i = 0; i < 100 && !/succeeded/.test(table); i++) {
      table = (await compute(['webhooks', 'deliveries', webhookId])).stdout;
      if (!/succeeded/.test(table)) await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const lines = table.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^id\s+event\s+state\s+attempts\s+last\s+nextAttempt\s+created$/);
    expect(lines[1]).toMatch(/^msg_\w+\s+project\.created\s+succeeded\s+1\s+200\s+/);
    const deliveryId = lines[1]!.split(/\s+/)[0]!;
    const again = await compute(['webhooks', 'redeliver', webhookId, deliveryId]);
    expect(again.status, again.stderr).toBe(0);
    expect(JSON.parse(again.stdout)).toMatchObject({ id: deliveryId, state: 'pending' });
    await receiver.waitFor((r) => r.length >= 2);
    expect(receiver.received[1]!.headers['webhook-id']).toBe(deliveryId);
    new Webhook(secret).verify(
      receiver.received[1]!.body,
      receiver.received[1]!.headers as Record<string, string>,
    );
  });

  it('ping sends a webhook.ping; rotate-secret --secret-out signs with both secrets', async () => {
    const rotated = await compute([
      'webhooks',
      'rotate-secret',
      webhookId,
      '--secret-out',
      'hook.secret.new',
    ]);
    expect(rotated.status, rotated.stderr).toBe(0);
    const fresh = readFileSync(join(work, 'hook.secret.new'), 'utf8').trim();
    expect(rotated.stdout).not.toContain(fresh.slice(6));
    const pinged = await compute(['webhooks', 'ping', webhookId]);
    expect(pinged.status, pinged.stderr).toBe(0);
    const pingId = JSON.parse(pinged.stdout).id;
    const received = await receiver
      .waitFor((r) => r.some((x) => x.headers['webhook-id'] === pingId))
      .then((r) => r.find((x) => x.headers['webhook-id'] === pingId)!);
    expect(String(received.headers['webhook-signature']).split(' ')).toHaveLength(2);
    for (const key of [secret, fresh]) {
      const payload = new Webhook(key).verify(received.body, received.headers as Record<string, string>) as {
        type: string;
      };
      expect(payload.type).toBe('webhook.ping');
    }
  });

  it('event-types prints the catalog; another tenant gets NOT_FOUND; a member may not create', async () => {
    const types = await compute(['webhooks', 'event-types']);
    expect(types.status).toBe(0);
    expect(types.stdout).toMatch(/^type\s+subject\s+summary$/m);
    expect(types.stdout).toMatch(/^reservation\.created\s+reservation\s+A reservation was made$/m);
    const foreign = await compute(['webhooks', 'get', webhookId], dev.rootAdmin.apiKey);
    expect(foreign.status).not.toBe(0);
    expect(foreign.stderr).toMatch(/^NOT_FOUND: webhook wh_\w+ does not exist/m);
    const member = await compute(
      [
        'webhooks',
        'create',
        '--endpoint',
        receiver.url,
        '--events',
        'site.*',
        '--secret-out',
        'member.secret',
      ],
      dev.acmeMember.apiKey,
    );
    expect(member.stderr).toMatch(/^ACCESS_DENIED/m);
    expect(() => statSync(join(work, 'member.secret'))).toThrow();
  });
});
