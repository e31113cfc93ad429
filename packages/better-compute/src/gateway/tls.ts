/**
 * Mutual TLS for the gateway: the server options (its certificate from `pki issue-gateway`, the
 * machine CAs as the only roots for client certificates, which are asked for but checked per
 * route), and what a peer's certificate says. A node certificate names its node id in the common
 * name and allows client use only; a gateway certificate allows server use as well.
 */
import { createPrivateKey, createPublicKey, X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { IncomingMessage } from 'node:http';
import type { TLSSocket } from 'node:tls';
import { ComputeError } from '@better-compute/core';
import type { PkiBundle } from '../pki/bundle.js';

const SERVER_AUTH = '1.3.6.1.5.5.7.3.1';
const CLIENT_AUTH = '1.3.6.1.5.5.7.3.2';

export interface GatewayTls {
  certificatePem: string;
  privateKeyPem: string;
  /** PEMs of the machine CAs trusted now. */
  caPems: string[];
}

function gatewayTlsFrom(bundle: PkiBundle, certificatePem: string, privateKeyPem: string): GatewayTls {
  return { certificatePem, privateKeyPem, caPems: bundle.trustedMachineCas().map((ca) => ca.certificatePem) };
}

/**
 * A gateway's TLS from the files `pki issue-gateway` wrote (serve's --tls-cert and --tls-key, the
 * console's CONSOLE_GATEWAY_CERT and CONSOLE_GATEWAY_KEY), checked before anything listens: both
 * readable, the key the certificate's own, and the certificate signed by a machine CA the bundle
 * trusts. Otherwise every link would fail later at its handshake, far from the cause.
 */
export function gatewayTlsFromFiles(
  bundle: PkiBundle,
  files: { certFile: string; keyFile: string },
): GatewayTls {
  const certificatePem = readPem(files.certFile, 'certificate');
  const privateKeyPem = readPem(files.keyFile, 'private key');
  const refuse = (message: string, field: string) =>
    new ComputeError('INVALID_ARGUMENT', message, {
      hint: 'Pass the files better-compute pki issue-gateway wrote (--out-cert, --out-key) from this bundle.',
      details: { field },
    });
  let certificate: X509Certificate;
  try {
    certificate = new X509Certificate(certificatePem);
  } catch {
    throw refuse(`${files.certFile} is not a PEM certificate`, 'tls-cert');
  }
  let matches = false;
  try {
    const publicOf = createPublicKey(createPrivateKey(privateKeyPem));
    matches = publicOf.equals(certificate.publicKey);
  } catch {
    throw refuse(`${files.keyFile} is not a PEM private key`, 'tls-key');
  }
  if (!matches) throw refuse(`${files.keyFile} is not the key of ${files.certFile}`, 'tls-key');
  const tls = gatewayTlsFrom(bundle, certificatePem, privateKeyPem);
  if (!tls.caPems.some((ca) => certificate.verify(new X509Certificate(ca).publicKey)))
    throw refuse(`${files.certFile} was not signed by a machine CA of the PKI bundle`, 'tls-cert');
  return tls;
}

function readPem(file: string, what: 'certificate' | 'private key'): string {
  try {
    return readFileSync(file, 'utf8');
  } catch (error) {
    throw new ComputeError('INVALID_ARGUMENT', `the ${what} ${file} cannot be read`, {
      hint: 'Pass the files better-compute pki issue-gateway wrote (--out-cert, --out-key).',
      details: { field: what === 'certificate' ? 'tls-cert' : 'tls-key' },
      cause: error,
    });
  }
}

export function tlsServerOptions(tls: GatewayTls) {
  return {
    cert: tls.certificatePem,
    key: tls.privateKeyPem,
    ca: tls.caPems,
    requestCert: true,
    // Checked per route: a daemon without a certificate may still use its node credential.
    rejectUnauthorized: false,
    minVersion: 'TLSv1.2' as const,
  };
}

export type PeerIdentity =
  | { kind: 'none' }
  | { kind: 'refused'; reason: string }
  | { kind: 'node'; nodeId: string }
  | { kind: 'gateway'; name: string };

/** What the connection's client certificate proves, if the connection is TLS and sent one. */
export function peerIdentity(request: IncomingMessage): PeerIdentity {
  const socket = request.socket as Partial<TLSSocket>;
  if (typeof socket.getPeerCertificate !== 'function') return { kind: 'none' };
  const peer = socket.getPeerCertificate();
  if (!peer || Object.keys(peer).length === 0) return { kind: 'none' };
  if (!socket.authorized)
    return {
      kind: 'refused',
      reason: `the client certificate is not valid here (${String(socket.authorizationError ?? 'unverified')})`,
    };
  const commonName = typeof peer.subject?.CN === 'string' ? peer.subject.CN : '';
  const usages = peer.ext_key_usage ?? [];
  if (/^node_[A-Za-z0-9]{1,64}$/.test(commonName)) {
    if (!usages.includes(CLIENT_AUTH))
      return { kind: 'refused', reason: 'the node certificate is not for clients' };
    return { kind: 'node', nodeId: commonName };
  }
  if (usages.includes(SERVER_AUTH) && usages.includes(CLIENT_AUTH) && commonName)
    return { kind: 'gateway', name: commonName };
  return { kind: 'refused', reason: 'the client certificate is neither a node nor a gateway certificate' };
}
