/**
 * The daemon's check of a command against the gateway's signing: a command the command root
 * signed for this node passes; a forged signature, another root, another node, an expired
 * command, a tampered payload and an unknown kind are refused.
 */
import { describe, expect, it } from 'vitest';
import {
  envelopeBytes as serverBytes,
  generatedCommandSigner,
} from '../../better-compute/src/gateway/signer.js';
import { envelopeBytes, refusal } from '../src/commands.js';

const root = generatedCommandSigner();
const other = generatedCommandSigner();
const now = new Date('2026-01-01T00:00:00Z');
const envelope = {
  id: 'cmd_01abc',
  nodeId: 'node_01me',
  kind: 'exec.script',
  payload: { script: 'health-check' },
  issuedAt: '2025-12-31T23:59:00.000Z',
  expiresAt: '2026-01-01T00:10:00.000Z',
};
const signed = (command: typeof envelope, signer = root) => ({
  command,
  signature: Buffer.from(signer.sign(serverBytes(command))).toString('base64'),
});
const expect_ = { nodeId: 'node_01me', commandRoot: root.publicKeyPem, now };

describe('a command’s signature, node and expiry', () => {
  it('the daemon encodes a command exactly as the gateway signs it', () => {
    expect(Buffer.from(envelopeBytes(envelope)).equals(Buffer.from(serverBytes(envelope)))).toBe(true);
  });
  it('accepts a command the pinned root signed for this node', () => {
    expect(refusal(signed(envelope), expect_)).toBeNull();
  });
  it('refuses a forged signature, another root’s, a tampered payload, and none at all', () => {
    expect(
      refusal({ ...signed(envelope), signature: Buffer.alloc(64, 1).toString('base64') }, expect_),
    ).toMatch(/signature/);
    expect(refusal(signed(envelope, other), expect_)).toMatch(/signature/);
    const tampered = { ...signed(envelope), command: { ...envelope, payload: { script: 'drop-caches' } } };
    expect(refusal(tampered, expect_)).toMatch(/signature/);
    expect(refusal({ command: envelope }, expect_)).toMatch(/not signed/);
    expect(refusal(signed(envelope), { ...expect_, commandRoot: null })).toMatch(/no command root/);
  });
  it('refuses another node’s command, an expired one, an unknown kind and a malformed one', () => {
    expect(refusal(signed({ ...envelope, nodeId: 'node_01other' }), expect_)).toMatch(
      /for node node_01other/,
    );
    expect(refusal(signed(envelope), { ...expect_, now: new Date('2026-01-01T00:10:00Z') })).toMatch(
      /expired/,
    );
    expect(refusal(signed({ ...envelope, kind: 'exec.anything' }), expect_)).toMatch(/unknown command kind/);
    expect(refusal({ command: { ...envelope, id: '../x' }, signature: 'x' }, expect_)).toMatch(/malformed/);
    expect(refusal({ command: 'x\u0000', signature: 'x' }, expect_)).toMatch(/malformed/);
  });
});
