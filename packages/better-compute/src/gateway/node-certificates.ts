/**
 * Node certificates over the session: a daemon sends a new P-256 public key with its signature
 * over its node id (proof it holds the key), and the gateway answers a certificate for that node
 * from the PKI bundle's machine CA, with the CAs to trust. The session already proved the node's
 * identity (its certificate or its credential), so the certificate can only name that node.
 */
import { createPublicKey, verify } from 'node:crypto';
import type { PkiBundle } from '../pki/bundle.js';
import { issueNodeCertificate } from '../pki/issue.js';

/** Node certificates live 30 days; the daemon renews one after two thirds of its life. */
const NODE_CERTIFICATE_DAYS = 30;

export interface GatewayPki {
  bundle: PkiBundle;
  /** The deployment secret that opens the machine CA's private key. */
  secret: string | undefined;
  nodeCertificateDays?: number;
}

/** The text a daemon signs to prove it holds the key it asks a certificate for. */
const proofText = (nodeId: string) => `better-compute node certificate request for ${nodeId}`;

export async function answerCertificateRequest(
  pki: GatewayPki,
  nodeId: string,
  request: { publicKey: string; proof: string },
  now: Date,
): Promise<Record<string, unknown>> {
  let key;
  try {
    key = createPublicKey(request.publicKey);
  } catch {
    return { t: 'certificate.refused', message: 'the public key is not a PEM public key' };
  }
  if (key.asymmetricKeyType !== 'ec' || key.asymmetricKeyDetails?.namedCurve !== 'prime256v1')
    return { t: 'certificate.refused', message: 'node keys are ECDSA P-256' };
  const proven = verify('sha256', Buffer.from(proofText(nodeId)), key, Buffer.from(request.proof, 'base64'));
  if (!proven) return { t: 'certificate.refused', message: 'the proof does not verify with the public key' };
  const issued = await issueNodeCertificate(pki.bundle, pki.secret, {
    nodeId,
    publicKey: key,
    days: pki.nodeCertificateDays ?? NODE_CERTIFICATE_DAYS,
    now,
  });
  return {
    t: 'certificate',
    certificatePem: issued.certificatePem,
    notBefore: issued.notBefore,
    notAfter: issued.notAfter,
    caCertificates: pki.bundle.trustedMachineCas(now).map((ca) => ca.certificatePem),
  };
}
