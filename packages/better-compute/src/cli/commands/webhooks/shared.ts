/** What the webhooks commands share: the endpoint and event flags, and the table columns. */
import type { StringFlag } from '../../define.js';
import { createOutFile } from '../shared.js';

export const endpointFlag = {
  type: 'string',
  description: 'The receiver’s URL: https://, or http:// to 127.0.0.1, [::1] or localhost',
  placeholder: 'URL',
} as const satisfies StringFlag;

export const eventsFlag = {
  type: 'string',
  repeated: true,
  description: 'An event type (reservation.created) or a prefix ending with .* (reservation.*); repeatable',
  placeholder: 'PATTERN',
} as const satisfies StringFlag;

export const secretOutFlag = {
  type: 'string',
  description: 'Write the signing secret to this new file (mode 0600) instead of printing it',
  placeholder: 'FILE',
} as const satisfies StringFlag;

export interface WebhookView {
  id: string;
  url: string;
  events: string[];
  enabled: boolean;
  failingSince: string | null;
  version: number;
  description: string;
}

export function webhookColumns(w: WebhookView): Record<string, unknown> {
  return {
    id: w.id,
    url: w.url,
    events: w.events.join(','),
    enabled: w.enabled ? 'yes' : 'no',
    failingSince: w.failingSince ?? '',
    version: w.version,
  };
}

export interface DeliveryView {
  id: string;
  eventType: string;
  state: string;
  attempts: number;
  nextAttemptAt: string | null;
  createdAt: string;
  attemptLog: { statusCode: number | null; error: string | null }[];
}

export function deliveryColumns(d: DeliveryView): Record<string, unknown> {
  const last = d.attemptLog.at(-1);
  return {
    id: d.id,
    event: d.eventType,
    state: d.state,
    attempts: d.attempts,
    last: last ? (last.statusCode ?? last.error ?? '') : '',
    nextAttempt: d.nextAttemptAt ?? '',
    created: d.createdAt,
  };
}

/**
 * Runs a call that answers a one-time secret. With --secret-out the file is created first,
 * exclusively, with mode 0600 (an existing file is ALREADY_EXISTS and nothing is called), the
 * secret written to it, and the answer printed without it; without, the answer is printed whole,
 * the one time the secret is shown.
 */
export async function withSecretOut<A extends { secret: string; webhook: unknown }>(
  cwd: string,
  secretOut: string | undefined,
  call: () => Promise<A>,
): Promise<unknown> {
  if (secretOut === undefined) return call();
  const file = await createOutFile(
    cwd,
    secretOut,
    'a signing secret is never written over a file',
    '--secret-out',
  );
  let answer: A;
  try {
    answer = await call();
  } catch (error) {
    await file.discard();
    throw error;
  }
  await file.write(`${answer.secret}\n`);
  return { webhook: answer.webhook, secretOut: file.path };
}
