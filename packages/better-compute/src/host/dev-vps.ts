/**
 * `dev --node`'s VPS pool: the real node's pool `this-machine` is a VPS pool offered to acme, with a
 * flavor `small`, and the project's guest image (scripts/build-guest-image.sh, cached outside the
 * repository) registered as a platform image once it is there. A missing image is built in the
 * background, so dev is up at once and the image follows in a minute or two: dev says plainly that
 * it is building (with the log to follow), gives one line per step of the build, and one when the
 * image is registered. Everything here is done once and found again on the next start.
 */
import { spawn, spawnSync } from 'node:child_process';
import { createWriteStream, existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

const DEV_GUEST_IMAGE = 'debian-12-guest';
const DEV_FLAVOR = 'small';
const DEV_SANDBOX_TEMPLATE = 'shell';

type Api = <T = any>(method: string, body: Record<string, unknown>) => Promise<T>;

interface GuestManifest {
  kernelCmdline: string;
  files: Record<string, { size: number; sha256: string }>;
}

/**
 * The build script of the checkout dev runs from, found upwards from this module (the CLI's bundle)
 * or the working directory (code run from source); absent when better-compute came from a registry.
 */
function buildScript(): string | null {
  const starts = [typeof __dirname === 'string' ? __dirname : null, process.cwd()];
  for (const start of starts) {
    for (let dir = start; dir && dir !== dirname(dir); dir = dirname(dir)) {
      const script = join(dir, 'scripts', 'build-guest-image.sh');
      if (existsSync(script) && existsSync(join(dir, 'packages', 'better-compute'))) return script;
    }
  }
  return null;
}

export async function prepareDevVps(options: {
  api: Api;
  poolId: string;
  signal: AbortSignal;
  log: (line: string) => void;
  /** Whether to build a missing image (`BETTER_COMPUTE_DEV_GUEST_IMAGE=off` says no). */
  build: boolean;
  /** Where the build's log goes (dev's state directory). */
  logDir: string;
}): Promise<{ stopped: Promise<void> }> {
  const { api, poolId, log } = options;
  const idle = { stopped: Promise.resolve() };
  const flavors = await api<{ items: { name: string }[] }>('flavors.list', { poolId, limit: 500 });
  if (!flavors.items.some((flavor) => flavor.name === DEV_FLAVOR))
    await api('flavors.create', { poolId, name: DEV_FLAVOR, vcpus: 1, memoryMiB: 512, diskGiB: 2 });
  const images = await api<{ items: { id: string; name: string }[] }>('images.list', { limit: 500 });
  const registered = images.items.find((image) => image.name === DEV_GUEST_IMAGE);
  if (registered) {
    log(
      `this machine: image ${registered.id} (${DEV_GUEST_IMAGE}) and flavor ${DEV_FLAVOR} in pool ${poolId}`,
    );
    void ensureSandboxTemplate(api, poolId, registered.id, log);
    return idle;
  }
  if (!options.build) {
    log(`this machine: no guest image registered, and BETTER_COMPUTE_DEV_GUEST_IMAGE=off builds none`);
    return idle;
  }
  const script = buildScript();
  if (!script) {
    log(`this machine: no guest image (scripts/build-guest-image.sh is not beside this install)`);
    return idle;
  }
  // Built before (by dev, the guest suites or by hand): registered now, with no build to wait for.
  const cached = spawnSync(script, ['--print-dir'], { encoding: 'utf8' }).stdout?.trim();
  if (cached && existsSync(join(cached, 'manifest.json'))) {
    await registerGuestImage(api, cached).then(
      async (id) => {
        log(
          `this machine: image ${id} (${DEV_GUEST_IMAGE}) registered from ${cached}; flavor ${DEV_FLAVOR} in pool ${poolId}`,
        );
        void ensureSandboxTemplate(api, poolId, id, log);
      },
      (error: Error) => log(`this machine: registering the guest image failed: ${error.message}`),
    );
    return idle;
  }
  if (process.getuid?.() !== 0) {
    log(`this machine: no guest image; building it needs root: sudo ${script}, then restart dev`);
    return idle;
  }
  const logFile = join(options.logDir, 'guest-image-build.log');
  log(
    `this machine: the guest image is still building (a minute or two the first time); instances and sandboxes on this machine wait for it. Follow it: tail -f ${logFile}`,
  );
  const started = Date.now();
  const logStream = createWriteStream(logFile, { mode: 0o600 });
  logStream.on('error', () => {});
  const child = spawn(script, [], { stdio: ['ignore', 'pipe', 'pipe'], signal: options.signal });
  let stdout = '';
  let stderr = '';
  let partial = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
    logStream.write(chunk);
    stderr = (stderr + chunk).slice(-4000);
    // One progress line per step of the build: the script's own `build-guest-image: …` lines.
    const lines = (partial + chunk).split('\n');
    partial = lines.pop() ?? '';
    for (const line of lines) {
      const step = /^build-guest-image: (?!error|hint)(.+)$/.exec(line)?.[1];
      if (step) log(`this machine: guest image: ${step}`);
    }
  });
  child.on('error', () => {});
  const stopped = new Promise<void>((resolve) => {
    child.on('close', (code) => {
      logStream.end();
      if (options.signal.aborted) {
        if (code !== 0)
          log('this machine: the guest image build was stopped; the next dev start builds it again');
        return resolve();
      }
      if (code !== 0) {
        const said = stderr.trim().split('\n');
        const why = said.find((line) => line.startsWith('build-guest-image: error:')) ?? said.at(-1);
        const hint = said.find((line) => line.startsWith('build-guest-image: hint:'));
        log(
          `this machine: building the guest image failed: ${why ?? `exit ${code}`}${hint ? ` (${hint.replace('build-guest-image: ', '')})` : ''}; the whole log is ${logFile}; restart dev once it is fixed`,
        );
        return resolve();
      }
      // The build is over (all dev waits for when it stops); registering it is calls to dev itself.
      resolve();
      const dir = stdout.trim().split('\n').at(-1)!;
      registerGuestImage(api, dir)
        .then(async (id) => {
          log(
            `this machine: image ${id} (${DEV_GUEST_IMAGE}) registered after ${Math.round((Date.now() - started) / 1000)} s; flavor ${DEV_FLAVOR} in pool ${poolId}: instances can be created now`,
          );
          await ensureSandboxTemplate(api, poolId, id, log);
        })
        .catch((error: Error) => log(`this machine: registering the guest image failed: ${error.message}`));
    });
  });
  return { stopped };
}

/** Registers the built image from its manifest's sizes and digests, which the node verifies again. */
async function registerGuestImage(api: Api, dir: string): Promise<string> {
  const manifest = JSON.parse(readFileSync(join(dir, 'manifest.json'), 'utf8')) as GuestManifest;
  const file = (name: string) => {
    const entry = manifest.files[name];
    if (!entry) throw new Error(`the image's manifest names no ${name}`);
    return { source: join(dir, name), sha256: entry.sha256, sizeBytes: entry.size };
  };
  const disk = file('rootfs.qcow2');
  const image = await api<{ id: string }>('images.register', {
    name: DEV_GUEST_IMAGE,
    source: disk.source,
    diskFormat: 'qcow2',
    sha256: disk.sha256,
    sizeBytes: disk.sizeBytes,
    os: 'debian',
    channel: 'stable',
    boot: { kernel: file('vmlinux'), initrd: file('initrd.img'), cmdline: manifest.kernelCmdline },
    idempotencyKey: `dev-guest-image-${disk.sha256.slice(0, 32)}`,
  });
  return image.id;
}

/**
 * acme's sandbox template `shell` on this machine: bubblewrap sandboxes of the guest image's root,
 * one kept warm, an hour by default and four at most. Made once, as the platform acting in acme.
 */
async function ensureSandboxTemplate(api: Api, poolId: string, imageId: string, log: (line: string) => void) {
  // The node says it runs bwrap in its session's hello, which may come a moment after the image.
  for (let attempt = 0; ; attempt += 1) {
    try {
      const templates = await api<{ items: { id: string; name: string }[] }>('sandboxTemplates.list', {
        tenantId: 'acme',
        poolId,
        limit: 500,
      });
      let template = templates.items.find((t) => t.name === DEV_SANDBOX_TEMPLATE);
      if (!template) {
        const flavors = await api<{ items: { id: string; name: string }[] }>('flavors.list', {
          poolId,
          limit: 500,
        });
        const flavorId = flavors.items.find((flavor) => flavor.name === DEV_FLAVOR)?.id;
        template = await api('sandboxTemplates.create', {
          tenantId: 'acme',
          name: DEV_SANDBOX_TEMPLATE,
          poolId,
          flavorId,
          imageId,
          runtime: 'bwrap',
          warmMin: 1,
          defaultTtlSeconds: 3600,
          maxTtlSeconds: 4 * 3600,
          network: 'none',
          idempotencyKey: `dev-sandbox-template-${poolId}`,
        });
      }
      log(
        `this machine: acme's sandbox template ${template!.id} (${DEV_SANDBOX_TEMPLATE}, bwrap, one kept warm)`,
      );
      return;
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      if (attempt < 60 && message.includes('can run the bwrap runtime')) {
        await new Promise((resolve) => setTimeout(resolve, 1_000));
        continue;
      }
      log(`this machine: no sandbox template: ${message}`);
      return;
    }
  }
}
