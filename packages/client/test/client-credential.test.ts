/** The token and headers the client sends: checked before any request, and never quoted in an error. */
import { describe, expect, it } from 'vitest';
import { ComputeClientError, createComputeClient } from '../src/index.js';

const base = 'http://127.0.0.1:9';

function catchSync(fn: () => unknown): unknown {
  try {
    fn();
  } catch (error) {
    return error;
  }
  throw new Error('expected a throw');
}

describe('the token', () => {
  it('with a line break or a space is INVALID_ARGUMENT before any request, and is never quoted', () => {
    for (const token of ['abc\r\nX-Evil: 1', 'biam key', 'tab\there', 'nul\u0000x', 'é-not-ascii']) {
      let fetched = false;
      const error = catchSync(() =>
        createComputeClient({
          baseURL: base,
          token,
          fetch: async () => {
            fetched = true;
            return new Response('{}');
          },
        }),
      );
      expect(error).toBeInstanceOf(ComputeClientError);
      expect(error).toMatchObject({
        code: 'INVALID_ARGUMENT',
        message: 'the token must be one line of printable characters without spaces',
        hint: 'Pass the token alone: no quotes, spaces or line breaks inside it.',
      });
      expect(JSON.stringify({ ...(error as object), message: (error as Error).message })).not.toContain(
        token,
      );
      expect(fetched).toBe(false);
    }
  });

  it('with only surrounding whitespace is trimmed and sent', async () => {
    const seen: (string | null)[] = [];
    const client = createComputeClient({
      baseURL: base,
      token: '  biam_good\r\n',
      fetch: async (request) => {
        seen.push(request.headers.get('authorization'));
        return new Response(JSON.stringify({ data: { ok: true } }));
      },
    });
    expect(await client.request('system.version', {})).toEqual({ ok: true });
    expect(seen).toEqual(['Bearer biam_good']);
  });
});

describe('headers', () => {
  it('an extra header with a line break is refused without quoting its value', async () => {
    const error = catchSync(() =>
      createComputeClient({ baseURL: base, headers: { 'x-secret': 'sec\nret-value' } }),
    ) as ComputeClientError;
    expect(error.code).toBe('INVALID_ARGUMENT');
    expect(error.message).toBe(
      'headers: a header name must be a token and its value one line of printable characters',
    );
    const client = createComputeClient({ baseURL: base, fetch: async () => new Response('{}') });
    await expect(
      client.request('system.version', {}, { headers: { 'x-secret': 'sec\r\nret-value' } }),
    ).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: 'call headers: a header name must be a token and its value one line of printable characters',
    });
  });

  it('an unreachable server is UNAVAILABLE, and no header value appears in the message', async () => {
    const client = createComputeClient({
      baseURL: base,
      token: 'biam_key_SECRETSECRET',
      headers: { 'x-extra': 'extra-secret-value' },
      fetch: async (request) => {
        throw new TypeError(
          `fetch failed for ${request.headers.get('authorization')} ${request.headers.get('x-extra')}`,
        );
      },
    });
    const error = (await client.request('system.version', {}).catch((e: unknown) => e)) as ComputeClientError;
    expect(error.code).toBe('UNAVAILABLE');
    expect(error.message).toBe(
      'system.version: could not reach http://127.0.0.1:9: fetch failed for Bearer … …',
    );
  });
});
