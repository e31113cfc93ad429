/**
 * `bcd join`: the public join with a token read from a file or standard input (never argv), then
 * the claim once an operator approves. While it waits it says so on the progress channel (stderr):
 * one line per change of the request's state, with the time waited, and a reminder every
 * PENDING_REMINDER_MS. A rejected request ends it non-zero with the operator's reason
 * (RESOURCE_FAILED, as every `--wait` whose resource ends failed: docs/decisions/cli-wait.md); a
 * wait past --timeout ends it with TIMEOUT, since a node without its credential cannot go on; an
 * unreachable control plane is tried again until then. The credential it receives is written to
 * the state directory (0600) and printed nowhere.
 */
import { readFileSync } from 'node:fs';
import { hostname as osHostname } from 'node:os';
import WebSocket from 'ws';
import { acceptCertificate, certificateRequest, ensureNodeKey, tlsOptionsFor } from './certificate.js';
import { type ApproverSet, readApproverSet } from '@better-compute/core/quorum';
import { ApiError, callPublic, endpointOf, safe, sessionUrl } from './http.js';
import { readMachineInventory } from './inventory.js';
import { readReleasePinsFile } from './release-pins.js';
import type { StateDir } from './state.js';

export interface JoinOptions {
  url: string;
  tokenFile: string;
  state: StateDir;
  gpuInventoryFile?: string | undefined;
  hostname?: string | undefined;
  /** A command root public key file to pin now, instead of at the first session. */
  commandRootFile?: string | undefined;
  /**
   * The deployment's published approver set (`pki show --query approvers.set`) to pin now, instead
   * of from the first `welcome`: a gateway then can only lead the node along signed changes of it.
   */
  approversFile?: string | undefined;
  /** The deployment's release keys and threshold (`{ pins, threshold }`) to pin now, for self-updates. */
  releasePinsFile?: string | undefined;
  labels?: Record<string, string>;
  progress: (line: string) => void;
  /** Stop waiting after this long (default: wait until approved or rejected). */
  timeoutMs?: number | undefined;
  /** Send the join request and return without waiting for its decision (`--no-wait`). */
  noWait?: boolean | undefined;
  readStdin?: () => string;
  /** CA certificates to trust for a TLS gateway until the node's own certificate brings them. */
  caFile?: string | undefined;
  /** Gateway replicas besides `url` (more --url flags): asked for the certificate, kept for bcd run. */
  gatewayUrls?: string[] | undefined;
}

/** An --approvers file: one approver set, checked as the daemon checks a pinned one. */
function readApproversFile(file: string): ApproverSet {
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(file, 'utf8'));
  } catch (error) {
    throw new ApiError(
      'INVALID_ARGUMENT',
      `--approvers ${safe(file).slice(0, 200)} is not a JSON file: ${safe((error as Error).message).slice(0, 200)}`,
    );
  }
  try {
    return readApproverSet(parsed, `--approvers ${safe(file).slice(0, 200)}`);
  } catch (error) {
    throw new ApiError('INVALID_ARGUMENT', safe((error as Error).message));
  }
}

/** A --ca-file: PEM certificates, checked to be that before they are kept. */
export function readCaFile(file: string): string {
  const text = readFileSync(file, 'utf8');
  if (!/-----BEGIN CERTIFICATE-----/.test(text))
    throw new Error(`${file.slice(0, 200)} holds no PEM certificate`);
  return text;
}

/**
 * Asks the gateway at `url` for this node's certificate over a short session. Answers why not
 * when it could not (no gateway there, no PKI, no answer in time).
 */
async function fetchCertificate(state: StateDir, url: string, timeoutMs = 15_000): Promise<string | null> {
  const identity = state.identity();
  if (!identity) return 'the node has not joined';
  const address = sessionUrl(url);
  return new Promise((resolve) => {
    const ws = new WebSocket(address, {
      ...tlsOptionsFor(state, address),
      headers: { authorization: `Bearer ${identity.nodeCredential}` },
      maxPayload: 1 << 20,
      handshakeTimeout: timeoutMs,
    });
    let answer: string | null = 'the gateway closed the session before it answered';
    const timer = setTimeout(() => {
      answer = 'the gateway did not answer in time';
      ws.terminate();
    }, timeoutMs);
    ws.on('error', (error) => (answer = `no session: ${safe(error.message)}`));
    ws.on('message', (data, isBinary) => {
      if (isBinary) return;
      let message: Record<string, unknown>;
      try {
        message = JSON.parse(data.toString()) as Record<string, unknown>;
      } catch {
        return;
      }
      if (message.t === 'ready') ws.send(JSON.stringify(certificateRequest(state, identity.nodeId)));
      else if (message.t === 'certificate') {
        answer = acceptCertificate(state, identity.nodeId, message);
        ws.close(1000);
      } else if (message.t === 'certificate.refused') {
        answer = safe(String(message.message));
        ws.close(1000);
      }
    });
    ws.on('close', () => {
      clearTimeout(timer);
      resolve(answer);
    });
  });
}

function readToken(options: JoinOptions): string {
  const raw =
    options.tokenFile === '-'
      ? (options.readStdin ?? (() => readFileSync(0, 'utf8')))()
      : readFileSync(options.tokenFile, 'utf8');
  const token = raw.trim();
  if (!/^[A-Za-z0-9_.-]{20,300}$/.test(token))
    throw new Error(
      `${options.tokenFile === '-' ? 'standard input' : options.tokenFile} holds no join token`,
    );
  return token;
}

function nodeHostname(given: string | undefined): string {
  const name = (given ?? osHostname()).replace(/[^A-Za-z0-9.-]/g, '-').replace(/^[^A-Za-z0-9]+/, '');
  return name.slice(0, 253) || 'node';
}

/** While a request stays pending, a line says so this often. */
const PENDING_REMINDER_MS = 30_000;

/** Seconds since `since`, as a progress line says them. */
const waited = (since: number) => `${Math.round((Date.now() - since) / 1000)} s`;

interface ClaimAnswer {
  state: 'pending' | 'approved' | 'rejected';
  nodeId: string | null;
  nodeCredential: string | null;
  reason: string | null;
  pollAfterSeconds: number;
}

export async function join(
  options: JoinOptions,
): Promise<{ nodeId: string } | { nodeId: null; joinRequestId: string }> {
  const url = endpointOf(options.url).toString();
  const existing = options.state.identity();
  if (existing)
    throw new Error(
      `this state directory already holds node ${existing.nodeId}; run bcd run, or use another --state-dir`,
    );
  const commandRoot = options.commandRootFile ? readFileSync(options.commandRootFile, 'utf8') : null;
  const approvers = options.approversFile ? readApproversFile(options.approversFile) : null;
  const releasePins = options.releasePinsFile ? readReleasePinsFile(options.releasePinsFile) : null;
  const gatewayCa = options.caFile ? readCaFile(options.caFile) : null;
  options.state.ensure();
  let pending = options.state.pendingJoin();
  // The token's prefix says what this machine becomes (the control plane decides the same from it);
  // a join resumed from its pending request kept the role the token gave it.
  let role = pending?.url === url ? pending.role : undefined;
  let credential: { nodeId: string; nodeCredential: string } | null = null;
  if (!pending?.joinRequestId || pending.url !== url) {
    const { inventory } = readMachineInventory({ gpuInventoryFile: options.gpuInventoryFile });
    const token = readToken(options);
    role = token.startsWith('stok_') ? 'site-agent' : undefined;
    const answer = await callPublic<{
      joinRequestId: string;
      state: 'pending' | 'approved';
      nodeId: string | null;
      nodeCredential: string | null;
      claimSecret: string | null;
    }>(
      url,
      'nodes.join',
      {
        joinToken: token,
        hostname: nodeHostname(options.hostname),
        inventory,
        ...(options.labels && Object.keys(options.labels).length ? { labels: options.labels } : {}),
      },
      gatewayCa,
    );
    if (answer.nodeCredential && answer.nodeId)
      credential = { nodeId: answer.nodeId, nodeCredential: answer.nodeCredential };
    else {
      pending = {
        url,
        joinRequestId: answer.joinRequestId,
        claimSecret: answer.claimSecret!,
        ...(role ? { role } : {}),
      };
      options.state.savePendingJoin(pending);
    }
  }
  const started = Date.now();
  let announced = false;
  let remindedAt = started;
  /** The last answer's state, or `unreachable` while the control plane does not answer. */
  let last: ClaimAnswer['state'] | 'unreachable' | null = null;
  while (!credential) {
    const id = pending!.joinRequestId;
    let claim: ClaimAnswer | null = null;
    try {
      claim = await callPublic<ClaimAnswer>(
        url,
        'nodes.claim',
        { joinRequestId: id, claimSecret: pending!.claimSecret },
        gatewayCa,
      );
    } catch (error) {
      // A control plane restarting while a node waits is waited for; any other answer ends the join.
      if (!(error instanceof ApiError) || error.code !== 'UNAVAILABLE') throw error;
      if (last !== 'unreachable')
        options.progress(
          `join request ${id}: ${(error as Error).message}; trying again (${waited(started)})`,
        );
      last = 'unreachable';
    }
    if (claim?.state === 'rejected') {
      options.state.savePendingJoin(null);
      options.progress(`join request ${id}: rejected after ${waited(started)}`);
      throw new ApiError(
        'RESOURCE_FAILED',
        `join request ${id} was rejected${claim.reason ? `: ${safe(claim.reason)}` : ' (no reason given)'}; ask for a new join token to try again`,
      );
    }
    if (claim?.state === 'approved' && claim.nodeCredential && claim.nodeId) {
      if (announced) options.progress(`join request ${id}: approved after ${waited(started)}`);
      credential = { nodeId: claim.nodeId, nodeCredential: claim.nodeCredential };
      break;
    }
    if (claim?.state === 'pending') {
      if (!announced) {
        options.progress(
          `join request ${id}: pending; waiting for an operator to approve it (better-compute join-requests approve ${id})`,
        );
        announced = true;
        if (options.noWait) return { nodeId: null, joinRequestId: id };
      } else if (last === 'unreachable') {
        options.progress(`join request ${id}: still pending (${waited(started)})`);
        remindedAt = Date.now();
      } else if (Date.now() - remindedAt >= PENDING_REMINDER_MS) {
        options.progress(`join request ${id}: still pending after ${waited(started)}`);
        remindedAt = Date.now();
      }
      last = 'pending';
    }
    if (options.timeoutMs !== undefined && Date.now() - started > options.timeoutMs)
      throw new ApiError(
        'TIMEOUT',
        `join request ${id} is still ${last === 'unreachable' ? 'unanswered' : 'pending'} after ${waited(started)} (--timeout); run bcd join again to keep waiting on it`,
      );
    await new Promise((resolve) =>
      setTimeout(resolve, Math.min(5, Math.max(1, claim?.pollAfterSeconds ?? 2)) * 1000),
    );
  }
  options.state.saveIdentity({
    url,
    nodeId: credential.nodeId,
    nodeCredential: credential.nodeCredential,
    commandRoot,
    gatewayCa,
    ...(role ? { role } : {}),
  });
  options.state.savePendingJoin(null);
  if (approvers) {
    options.state.savePinnedApprovers({ set: approvers, pinnedAt: new Date().toISOString() });
    options.progress(
      `pinned the approver set of epoch ${approvers.epoch} (${approvers.threshold} of ${approvers.approvers.length}) from --approvers`,
    );
  }
  if (releasePins) {
    options.state.saveReleasePins({ ...releasePins, pinnedAt: new Date().toISOString(), source: 'join' });
    options.progress(
      `pinned ${releasePins.pins.length} release key(s), ${releasePins.threshold} needed, from --release-pins`,
    );
  }
  options.progress(
    `joined as node ${credential.nodeId}${role ? ', the agent of its pool’s site (it runs the site’s BMC commands and takes no work)' : ''}`,
  );
  // The key pair now, the certificate for it from the gateway when it answers here.
  ensureNodeKey(options.state);
  const others = (options.gatewayUrls ?? []).map((other) => endpointOf(other).toString());
  if (others.length) options.state.saveGateways(others);
  let why: string | null = 'no gateway to ask';
  for (const gateway of [url, ...others]) {
    why = await fetchCertificate(options.state, gateway);
    if (!why) break;
  }
  options.progress(
    why
      ? `no node certificate yet (${why}); bcd run asks again`
      : `node certificate issued, valid until ${options.state.certificate()!.notAfter}`,
  );
  return { nodeId: credential.nodeId };
}
