/**
 * The node's key pair and certificate. The key pair (ECDSA P-256) is made once, at join, and kept
 * in the state directory; the certificate for it comes from the gateway over the session (the
 * machine CA signs it for this node id) and is renewed once two thirds of its life have passed.
 * With it, the daemon presents the certificate on TLS sessions and trusts the CAs it came with.
 */
import { createPrivateKey, generateKeyPairSync, sign, X509Certificate } from 'node:crypto';
import type { NodeCertificate, NodeKey, StateDir } from './state.js';

export function ensureNodeKey(state: StateDir): NodeKey {
  const existing = state.nodeKey();
  if (existing) return existing;
  const pair = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const key = {
    privateKeyPem: pair.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
    publicKeyPem: pair.publicKey.export({ type: 'spki', format: 'pem' }).toString(),
  };
  state.saveNodeKey(key);
  return key;
}

/** The session message asking for a certificate, with the proof that this node holds the key. */
export function certificateRequest(state: StateDir, nodeId: string): Record<string, unknown> {
  const key = ensureNodeKey(state);
  const proof = sign(
    'sha256',
    Buffer.from(`better-compute node certificate request for ${nodeId}`),
    key.privateKeyPem,
  );
  return { t: 'certificate.request', publicKey: key.publicKeyPem, proof: proof.toString('base64') };
}

/**
 * Checks and keeps a certificate the gateway sent: it must be for this node and for this key.
 * Returns the reason it was not kept, or null.
 */
export function acceptCertificate(
  state: StateDir,
  nodeId: string,
  message: Record<string, unknown>,
): string | null {
  const key = state.nodeKey();
  if (!key) return 'this node has no key pair';
  if (typeof message.certificatePem !== 'string') return 'the answer holds no certificate';
  let certificate: X509Certificate;
  try {
    certificate = new X509Certificate(message.certificatePem);
  } catch {
    return 'the certificate does not parse';
  }
  if (!certificate.subject.split('\n').includes(`CN=${nodeId}`)) return 'the certificate names another node';
  if (!certificate.checkPrivateKey(createPrivateKey(key.privateKeyPem)))
    return 'the certificate is not for this node key';
  const cas = Array.isArray(message.caCertificates)
    ? message.caCertificates.filter((pem): pem is string => typeof pem === 'string').slice(0, 8)
    : [];
  if (!cas.some((pem) => isIssuer(pem, certificate))) return 'no CA sent with it signed the certificate';
  const saved: NodeCertificate = {
    certificatePem: message.certificatePem,
    notBefore: new Date(certificate.validFrom).toISOString(),
    notAfter: new Date(certificate.validTo).toISOString(),
    caCertificates: cas,
  };
  state.saveCertificate(saved);
  return null;
}

function isIssuer(caPem: string, certificate: X509Certificate): boolean {
  try {
    return certificate.verify(new X509Certificate(caPem).publicKey);
  } catch {
    return false;
  }
}

/** Whether to ask for a (new) certificate: none yet, expired, or two thirds of its life gone. */
export function certificateDue(state: StateDir, now = new Date()): boolean {
  const held = state.certificate();
  if (!held) return true;
  const from = Date.parse(held.notBefore);
  const to = Date.parse(held.notAfter);
  return !(to > now.getTime()) || now.getTime() > from + ((to - from) * 2) / 3;
}

/** What a WebSocket to `url` presents and trusts: the node certificate while valid, the CAs known. */
export function tlsOptionsFor(
  state: StateDir,
  url: string,
  now = new Date(),
): { cert?: string; key?: string; ca?: string[] } {
  if (!url.startsWith('wss:')) return {};
  const held = state.certificate();
  const identity = state.identity();
  const ca = [...(held?.caCertificates ?? []), ...(identity?.gatewayCa ? [identity.gatewayCa] : [])];
  const valid =
    held && Date.parse(held.notAfter) > now.getTime() && Date.parse(held.notBefore) <= now.getTime();
  const key = state.nodeKey();
  return {
    ...(ca.length ? { ca } : {}),
    ...(valid && key ? { cert: held.certificatePem, key: key.privateKeyPem } : {}),
  };
}
