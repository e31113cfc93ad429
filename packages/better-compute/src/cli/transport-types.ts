/** The transport a token command gets from `context.api()`. Types only: the code loads lazily. */
import type { CallInput, CallOutput, WatchCallbackOptions, WatchHandle } from '@better-compute/client';
import type { MethodName } from '@better-compute/core/methods';

/** Where a command's credential came from; never the token itself. */
export interface CredentialInfo {
  source: 'env' | 'better-iam' | 'profile' | 'stdin';
  /** The profile's name, for saved credentials. */
  profile?: string;
  /** The file it was read from. */
  path?: string;
  /** The deployment it was saved for; null when saved in process. */
  url?: string | null;
  tenantId?: string | null;
  expiresAt?: string | null;
}

export interface CliApi {
  /** Calls a method of the table, typed. */
  call<K extends MethodName>(method: K, input: CallInput<K>): Promise<CallOutput<K>>;
  /** Calls any method by name, plugin methods (`plugins.ID.GROUP.METHOD`) included. */
  request(method: string, input: unknown): Promise<unknown>;
  /** `remote` over HTTP with --url, `in-process` through the configuration's handler. */
  readonly mode: 'remote' | 'in-process';
  readonly endpoint: string;
  /** The tenant filled into tenant-scoped calls. */
  readonly tenant: string | undefined;
  readonly credential: CredentialInfo | null;
  /** Follows the live event stream (the client's $watch); a credential is required, as for events.list. */
  watch(options: WatchCallbackOptions): Promise<WatchHandle>;
  /** Opens a tunnel's WebSocket with a ticket from tunnels.open; UNSUPPORTED in process (no --url). */
  tunnel(ticket: string): Promise<import('ws').WebSocket>;
}
