/**
 * A real deployment for console-kit's tests: better-compute with the embedded Better IAM on a fresh
 * PostgreSQL database, served over HTTP on a loopback port, and the root administrator's session.
 */
import { createComputeClient, type ComputeClient } from '@better-compute/client';
import { createTestDatabase, type TestDatabase } from '@better-compute/db/testing';
import { betterCompute, serve, type ComputeInstance } from 'better-compute';

export interface KitServer {
  url: string;
  token: string;
  compute: ComputeInstance;
  client: ComputeClient;
  stop(): Promise<void>;
}

/** The deployment's secret (what a PKI bundle for it is sealed with). */
export const KIT_SECRET = 'console-kit-test-secret-0123456789abcdef';

/**
 * `config` adds to the deployment's configuration (the rollouts view passes `release` pins);
 * `roles` are the replica's (the controllers run jobs, such as a simulated machine's sandboxes).
 */
export async function startKitServer(
  config: Record<string, unknown> = {},
  roles: Array<'api' | 'controllers'> = ['api'],
): Promise<KitServer> {
  const database: TestDatabase = await createTestDatabase('postgres');
  const compute = await betterCompute(
    {
      database,
      secret: KIT_SECRET,
      live: { retryMs: 300, heartbeatMs: 1000 },
      ...config,
    },
    { log: () => {} },
  );
  await compute.migrate();
  const stopper = new AbortController();
  let announce!: (url: string) => void;
  const listening = new Promise<string>((resolve) => (announce = resolve));
  const email = 'root@kit.test';
  const password = 'kit-password-123456';
  const running = serve({
    compute,
    port: 0,
    roles,
    signal: stopper.signal,
    log: () => {},
    env: { BETTER_COMPUTE_ADMIN_EMAIL: email, BETTER_COMPUTE_ADMIN_PASSWORD: password },
    onListening: announce,
  });
  const url = await Promise.race([listening, running.then(() => Promise.reject(new Error('serve stopped')))]);
  const signIn = await fetch(`${url}/api/iam/sessions/signIn`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ tenantId: 'root', email, password }),
  });
  const { data } = (await signIn.json()) as { data: { token: string } };
  return {
    url,
    token: data.token,
    compute,
    client: createComputeClient({ baseURL: url, token: data.token }),
    async stop() {
      stopper.abort();
      await running;
      await database.close();
    },
  };
}
