/**
 * How a deploy ramdisk's report reaches the site agent: the provisioning network's busybox httpd
 * runs a CGI for `POST /cgi-bin/report` as its unprivileged user, which lands the body, whole and
 * within REPORT_LIMIT, in a spool only that user and root can open (`<dir>/reports`, 0700); this
 * process takes each file from there every SPOOL_POLL_MS, removes it, and hands the body over
 * unchecked (site-provisioning.ts checks the token). No listener of the agent's own is opened on
 * the provisioning network, and nothing of the request but the body's bytes is kept.
 */
import { mkdir, readdir, readFile, stat, unlink, chown } from 'node:fs/promises';
import { join } from 'node:path';

/** The largest report taken, and how many may wait in the spool (more are answered 503). */
const REPORT_LIMIT = 65_536;
const SPOOL_LIMIT = 64;
const SPOOL_POLL_MS = 300;

export interface ReportSpool {
  stop(): void;
}

/** The CGI: the body into the spool under a name of its own (written beside, then renamed). */
function reportCgi(spool: string): string {
  const answer = (status: string, text: string) =>
    `printf 'HTTP/1.0 ${status}\\r\\nContent-Type: text/plain\\r\\n\\r\\n${text}\\n'`;
  return [
    '#!/bin/sh',
    '# Written by better-compute: a deploy ramdisk’s report, into the site agent’s spool.',
    'PATH=/usr/sbin:/usr/bin:/sbin:/bin',
    `spool='${spool}'`,
    `[ "$REQUEST_METHOD" = POST ] || { ${answer('405 Method Not Allowed', 'POST a report')}; exit 0; }`,
    `case "$CONTENT_LENGTH" in '' | *[!0-9]*) ${answer('411 Length Required', 'a length is needed')}; exit 0 ;; esac`,
    `[ "$CONTENT_LENGTH" -le ${REPORT_LIMIT} ] || { ${answer('413 Payload Too Large', 'the report is too large')}; exit 0; }`,
    `[ "$(ls "$spool" | wc -l)" -lt ${SPOOL_LIMIT} ] || { ${answer('503 Service Unavailable', 'busy, try again')}; exit 0; }`,
    'name="$spool/.in-$$"',
    'head -c "$CONTENT_LENGTH" >"$name" && mv "$name" "$spool/$$-$(date +%s).json" || {',
    `  rm -f "$name"; ${answer('500 Internal Server Error', 'not stored')}; exit 0; }`,
    `${answer('200 OK', 'received')}`,
    '',
  ].join('\n');
}

/** The numeric user and group ids of `user:group` (the web server's), from this machine's files. */
async function idsOf(owner: string): Promise<{ uid: number; gid: number }> {
  const [user, group] = owner.split(':') as [string, string];
  const fields = async (file: string, name: string) =>
    (await readFile(file, 'utf8'))
      .split('\n')
      .find((line) => line.startsWith(`${name}:`))
      ?.split(':') ?? [];
  const passwd = await fields('/etc/passwd', user);
  const groupId = (await fields('/etc/group', group))[2] ?? passwd[3];
  return { uid: Number(passwd[2]), gid: Number(groupId) };
}

/**
 * Makes the spool (owned by `owner`, the web server's user) and writes the CGI through `publish`
 * (a path under the served directory, executable), then polls the spool until stopped.
 */
export async function openReportSpool(
  dir: string,
  onReport: (body: string) => void,
  io: {
    owner: string;
    publish: (relative: string, content: string) => Promise<void>;
    log: (line: string) => void;
  },
): Promise<ReportSpool> {
  const spool = join(dir, 'reports');
  await mkdir(spool, { mode: 0o700 });
  const { uid, gid } = await idsOf(io.owner);
  await chown(spool, uid, gid);
  await mkdir(join(dir, 'http', 'cgi-bin'), { mode: 0o755 });
  await io.publish('http/cgi-bin/report', reportCgi(spool));
  let stopped = false;
  let taking = false;
  const take = async () => {
    for (const name of await readdir(spool).catch(() => [] as string[])) {
      if (stopped) return;
      if (!/^\d+-\d+\.json$/.test(name)) continue;
      const path = join(spool, name);
      const info = await stat(path).catch(() => null);
      const body = info && info.size <= REPORT_LIMIT ? await readFile(path, 'utf8').catch(() => null) : null;
      await unlink(path).catch(() => undefined);
      if (body === null) continue;
      try {
        onReport(body);
      } catch (error) {
        io.log(`the report callback failed: ${(error as Error).message}`);
      }
    }
  };
  const timer = setInterval(() => {
    if (taking || stopped) return;
    taking = true;
    void take().finally(() => (taking = false));
  }, SPOOL_POLL_MS);
  timer.unref();
  return {
    stop() {
      stopped = true;
      clearInterval(timer);
    },
  };
}
