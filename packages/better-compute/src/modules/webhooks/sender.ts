/**
 * One delivery attempt over node:http(s), to the address already resolved and checked (the
 * request's `lookup` answers only it, so the connection goes where the check looked). Bounded: the
 * whole attempt, connection to last byte, within the timeout; at most 64 KiB of the answer read;
 * no redirect followed (a 3xx is a failure). 2xx is success.
 */
import { safeText } from '@better-compute/core';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { LookupFunction } from 'node:net';
import type { ResolvedAddress } from '../../config/define-config.js';

/** How much of an answer is read at most. */
const RESPONSE_READ_LIMIT = 64 * 1024;
/** How much of it an attempt's record keeps. */
const RESPONSE_EXCERPT_LIMIT = 1024;

export interface AttemptOutcome {
  statusCode: number | null;
  durationMs: number;
  success: boolean;
  error: string | null;
  responseExcerpt: string | null;
}

export interface AttemptRequest {
  url: URL;
  address: ResolvedAddress;
  headers: Record<string, string>;
  body: string;
  timeoutMs: number;
}

/** The first bytes of an answer, as an attempt's record keeps them: terminal-safe text. */
function responseExcerpt(bytes: Buffer): string | null {
  if (bytes.length === 0) return null;
  return safeText(bytes.subarray(0, RESPONSE_EXCERPT_LIMIT).toString('utf8'));
}

export function sendAttempt(attempt: AttemptRequest): Promise<AttemptOutcome> {
  const started = performance.now();
  const elapsed = () => Math.round(performance.now() - started);
  const { url, address } = attempt;
  const lookup: LookupFunction = (_hostname, options, callback) => {
    if (options.all)
      (callback as (e: null, a: { address: string; family: number }[]) => void)(null, [address]);
    else callback(null, address.address, address.family);
  };
  const body = Buffer.from(attempt.body, 'utf8');
  const send = url.protocol === 'https:' ? httpsRequest : httpRequest;
  return new Promise((resolve) => {
    let settled = false;
    const finish = (outcome: Omit<AttemptOutcome, 'durationMs'>) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve({ ...outcome, durationMs: elapsed() });
    };
    const request = send({
      protocol: url.protocol,
      hostname: url.hostname.replace(/^\[|\]$/g, ''),
      port: url.port || (url.protocol === 'https:' ? 443 : 80),
      path: `${url.pathname}${url.search}`,
      method: 'POST',
      // A fresh connection per attempt: a pooled one might lead to an address checked for another.
      agent: false,
      lookup,
      headers: {
        ...attempt.headers,
        'content-type': 'application/json',
        'content-length': String(body.length),
        'user-agent': 'better-compute-webhooks',
      },
    });
    const timer = setTimeout(() => {
      request.destroy();
      finish({
        statusCode: null,
        success: false,
        error: `timed out after ${attempt.timeoutMs} ms`,
        responseExcerpt: null,
      });
    }, attempt.timeoutMs);
    request.on('error', (error: NodeJS.ErrnoException) =>
      finish({
        statusCode: null,
        success: false,
        error: `${error.code ? `${error.code}: ` : ''}${error.message}`.slice(0, 500),
        responseExcerpt: null,
      }),
    );
    request.on('response', (response: IncomingMessage) => {
      const status = response.statusCode ?? 0;
      const chunks: Buffer[] = [];
      let read = 0;
      const done = () => {
        const excerpt = responseExcerpt(Buffer.concat(chunks));
        const success = status >= 200 && status < 300;
        finish({
          statusCode: status,
          success,
          error: success
            ? null
            : status >= 300 && status < 400
              ? `answered ${status}, a redirect, which is not followed`
              : `answered ${status}`,
          responseExcerpt: excerpt,
        });
        request.destroy();
      };
      response.on('data', (chunk: Buffer) => {
        if (read >= RESPONSE_READ_LIMIT) return;
        chunks.push(chunk.subarray(0, RESPONSE_READ_LIMIT - read));
        read += chunk.length;
        if (read >= RESPONSE_READ_LIMIT) done();
      });
      response.on('end', done);
      response.on('error', done);
    });
    request.end(body);
  });
}
