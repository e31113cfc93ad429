/**
 * The web console under `dev`: apps/console's pages on dev's own origin, in dev's process, over
 * dev's database and embedded Better IAM, so they show dev's fleet and dev's accounts sign in
 * (docs/console.md). The console mounts itself (apps/console/lib/mount.mjs, which its own server.mjs
 * uses too); this file only finds it. It is loaded by dev alone, with a dynamic import, so `serve`
 * and the rest of the CLI never load Next.js, and a checkout without the console package or its
 * build still runs dev, saying so in one line.
 */
import type { IncomingMessage, RequestListener } from 'node:http';
import type { Duplex } from 'node:stream';
import type { ComputeInstance } from '../types.js';
import type { PageRoutes } from './node-adapter.js';

/** Where the console's mount lives: the workspace package `@better-compute/console-app`. */
const MOUNT_MODULE = '@better-compute/console-app/lib/mount.mjs';

/** What apps/console/lib/mount.mjs exports (it is plain JavaScript, so its shape is said here). */
interface MountModule {
  consoleProblem(options: { dev: boolean }): string | null;
  mountConsole(options: {
    compute: ComputeInstance;
    iam: ComputeInstance['embeddedIam'];
    origin: string;
    dev: boolean;
    log: (line: string) => void;
  }): MountedConsole;
}

interface MountedConsole {
  ready: Promise<void>;
  route(pathname: string): RequestListener | null;
  upgrade(request: IncomingMessage, socket: Duplex, head: Buffer): boolean;
  setOrigin(origin: string): void;
  close(): Promise<void>;
}

export interface DevConsoleOptions {
  compute: ComputeInstance;
  /** Where dev will listen; the console learns the real origin from `listening`. */
  origin: string;
  /** Next.js's development mode (pages compiled on demand, hot reload) instead of the build. */
  hotReload: boolean;
  log: (line: string) => void;
}

export interface DevConsole {
  /** What serve answers beside the API: every path outside it. */
  pages: PageRoutes;
  /**
   * Once dev listens: the line that tells where to sign in. Next.js may still be starting then; a
   * page asked for meanwhile waits for it, and a failure is logged when it happens.
   */
  listening(url: string): string;
  close(): Promise<void>;
}

function isMissingModule(error: unknown): boolean {
  const code = (error as { code?: string } | null)?.code;
  return code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND';
}

/** The console mounted for dev, or null (said in one line) when it cannot be. */
export async function startDevConsole(options: DevConsoleOptions): Promise<DevConsole | null> {
  const { compute, log } = options;
  // Before Next.js can load, whatever loads it: it reports usage to Vercel unless told not to.
  process.env.NEXT_TELEMETRY_DISABLED = '1';
  let mount: MountModule;
  try {
    // A variable, so neither TypeScript nor the bundler reach into the console package.
    const specifier: string = MOUNT_MODULE;
    mount = (await import(specifier)) as MountModule;
  } catch (error) {
    log(
      isMissingModule(error)
        ? 'console: not served: the @better-compute/console-app package is not installed beside better-compute (the API works without it)'
        : `console: not served: ${error instanceof Error ? error.message : String(error)}`,
    );
    return null;
  }
  const problem = mount.consoleProblem({ dev: options.hotReload });
  if (problem) {
    log(`console: not served: ${problem}`);
    return null;
  }
  let mounted: MountedConsole;
  try {
    mounted = mount.mountConsole({
      compute,
      iam: compute.embeddedIam,
      origin: options.origin,
      dev: options.hotReload,
      log,
    });
  } catch (error) {
    log(`console: not served: ${error instanceof Error ? error.message : String(error)}`);
    return null;
  }
  let closed: Promise<void> | undefined;
  return {
    pages: {
      route: (pathname) => mounted.route(pathname),
      upgrade: (request, socket, head) => mounted.upgrade(request, socket, head),
    },
    listening(url) {
      mounted.setOrigin(url);
      const mode = options.hotReload ? "Next.js's development mode, hot reload" : 'production build';
      return `console: ${url}/login (${mode}); acme's accounts sign in at ${url}/login?org=acme`;
    },
    close: () => (closed ??= mounted.close()),
  };
}
