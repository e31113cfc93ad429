/**
 * What every event type declares: the kind of subject it is about and the schema of its payload
 * (catalog.ts lists them; the groups with a file of their own, such as release-events.ts, too).
 */
import type { z } from 'zod';

/** What an event is about: its subject's kind (the subject's id travels with the event). */
export type SubjectKind =
  | 'reservation'
  | 'node'
  | 'pool'
  | 'joinToken'
  | 'siteToken'
  | 'joinRequest'
  | 'project'
  | 'site'
  | 'webhook'
  | 'command'
  | 'batch'
  | 'confirmation'
  | 'fleet'
  | 'secret'
  | 'profile'
  | 'providerAccount'
  | 'machine'
  | 'workflow'
  | 'image'
  | 'flavor'
  | 'instance'
  | 'sshCert'
  | 'tunnel'
  | 'sandbox'
  | 'sandboxTemplate'
  | 'sandboxSnapshot'
  | 'sandboxVolume'
  | 'auditLog'
  | 'release'
  | 'rollout';

export interface EventTypeSpec {
  subject: SubjectKind;
  data: z.ZodType;
  summary: string;
}
