/**
 * Where a webhook may send (SSRF rules). An endpoint is `https://`, or `http://` to loopback only;
 * no credentials in the URL; and no address outside the public internet (private, link-local,
 * CGNAT, multicast, broadcast, unspecified, reserved, cloud metadata, in any spelling: the core's
 * `classifyHost` judges it) unless the deployment allows private addresses (metadata, broadcast,
 * unspecified and multicast never). The URL is checked when it is set, and again at every attempt
 * after its name is resolved: the request then connects to the address checked, so a name that
 * resolves elsewhere later (DNS rebinding) gains nothing.
 */
import {
  ADDRESS_KIND_WORDS,
  type AddressKind,
  classifyHost,
  ComputeError,
  hostInWords,
} from '@better-compute/core';
import type { ResolvedAddress } from '../../config/define-config.js';
import type { WebhookRuntime } from './settings.js';

/** Whether the deployment lets a webhook reach an address of this kind. */
function kindAllowed(
  kind: AddressKind,
  runtime: Pick<WebhookRuntime, 'allowLoopback' | 'allowPrivateAddresses'>,
): boolean {
  switch (kind) {
    case 'public':
      return true;
    case 'loopback':
      return runtime.allowLoopback;
    case 'private':
    case 'link-local':
    case 'cgnat':
    case 'reserved':
      return runtime.allowPrivateAddresses;
    case 'metadata':
    case 'multicast':
    case 'broadcast':
    case 'unspecified':
      return false;
  }
}

function refused(message: string, hint: string): ComputeError {
  return new ComputeError('INVALID_ARGUMENT', message, { hint, details: { field: 'url' } });
}

/**
 * Checks an endpoint URL as a caller gives it, before anything is stored; answers the URL in its
 * normal form. Names are resolved only at delivery time (deliveryAddress).
 */
export function checkEndpoint(
  text: string,
  runtime: Pick<WebhookRuntime, 'allowLoopback' | 'allowPrivateAddresses'>,
): string {
  const hint =
    'Give an https:// URL of a public receiver, like https://hooks.example.com/compute (http:// only to 127.0.0.1, [::1] or localhost).';
  if (/[\u0000-\u0020\u007f-\u009f]/.test(text))
    throw refused('url must not contain spaces or control characters', hint);
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw refused('url must be an absolute URL, like https://hooks.example.com/compute', hint);
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:')
    throw refused(`url must be https:// (or http:// to loopback), not ${url.protocol}//`, hint);
  if (url.username || url.password)
    throw refused(
      'url must not carry a user name or password (user:pass@); they would be sent and stored in the clear',
      'Verify deliveries by their webhook-signature header instead, or put a token in the path.',
    );
  if (url.hash) throw refused('url must not have a #fragment: it is never sent', hint);
  if (url.hostname === '') throw refused('url must name a host', hint);
  const host = classifyHost(url.hostname);
  const kind = host.kind === 'name' ? null : host.kind;
  if (kind !== null && !kindAllowed(kind, runtime))
    throw refused(
      `url points at ${ADDRESS_KIND_WORDS[kind as Exclude<AddressKind, 'public'>]} (${hostInWords(host)}), which this deployment does not deliver to`,
      kind === 'metadata' || kind === 'multicast' || kind === 'broadcast' || kind === 'unspecified'
        ? hint
        : `${hint} An operator can allow ${kind === 'loopback' ? 'loopback' : 'private'} addresses in the deployment's webhooks settings.`,
    );
  if (url.protocol === 'http:' && kind !== 'loopback')
    throw refused(`url must be https:// unless it points at loopback (got http:// to ${host.host})`, hint);
  return url.href;
}

/** Why an attempt was not sent: the endpoint's name resolved to an address it may not reach. */
export class AddressRefused extends Error {}

/**
 * The address an attempt connects to: the endpoint's host resolved now, every address it resolves
 * to checked by the same classifyHost (one refused address refuses them all, so a name cannot mix a
 * public address with an internal one), `http://` only to loopback.
 */
export async function deliveryAddress(url: URL, runtime: WebhookRuntime): Promise<ResolvedAddress> {
  const target = classifyHost(url.hostname);
  // A name is resolved as the URL spells it; an address (in any spelling) is connected to as checked.
  const name = target.family === null ? url.hostname.toLowerCase() : target.host;
  // The settings may have changed since the URL was set: a name rule (localhost…) is asked again.
  if (target.kind !== 'name' && !kindAllowed(target.kind, runtime))
    throw new AddressRefused(
      `${hostInWords(target)} is ${ADDRESS_KIND_WORDS[target.kind as Exclude<AddressKind, 'public'>]}, which this deployment does not deliver to`,
    );
  let addresses: ResolvedAddress[];
  if (target.family !== null) addresses = [{ address: target.host, family: target.family }];
  else {
    try {
      addresses = await runtime.lookup(name);
    } catch (error) {
      throw new AddressRefused(
        `${name} does not resolve: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`,
      );
    }
  }
  if (addresses.length === 0) throw new AddressRefused(`${name} resolves to no address`);
  for (const { address } of addresses) {
    const resolved = classifyHost(address);
    // A resolver answers addresses; anything else (a name) is not connected to.
    const kind: AddressKind = resolved.kind === 'name' ? 'reserved' : resolved.kind;
    if (!kindAllowed(kind, runtime))
      throw new AddressRefused(
        `${name} resolves to ${hostInWords(resolved)}, ${ADDRESS_KIND_WORDS[kind as Exclude<AddressKind, 'public'>]}, which this deployment does not deliver to`,
      );
    if (url.protocol === 'http:' && kind !== 'loopback')
      throw new AddressRefused(`http:// is delivered only to loopback, and ${name} resolves to ${address}`);
  }
  return addresses[0]!;
}
