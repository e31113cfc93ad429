/**
 * The node installer `daemon install-script` prints: one POSIX shell script that carries the bcd
 * bundle and its maintenance scripts (base64), installs them under a prefix, writes a systemd
 * unit, and joins with a token read from a file or standard input (never argv). It needs Node.js
 * 20 or later on the machine and nothing else: no npm, no build.
 */
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

export interface InstallerOptions {
  /** The daemon package's directory (with dist/bcd.cjs and scripts/). */
  daemonDir: string;
  /** The server URL baked in as the default for --url. */
  url?: string | undefined;
  /** Prepare /etc/bcd/plugins.d, the drop-in directory for driver plugins. */
  plugins: boolean;
}

const quote = (value: string) => `'${value.replaceAll("'", "'\\''")}'`;

function payload(path: string, file: string): string {
  // Lines of 76 characters: a heredoc of one 200 KB line is legal, but editors and diffs choke on it.
  const encoded = readFileSync(file).toString('base64').replace(/.{76}/g, '$&\n');
  return `base64 -d > "${path}" <<'BCD_PAYLOAD'\n${encoded}\nBCD_PAYLOAD\n`;
}

/**
 * node-pty and its prebuilt binary for this platform, as a gzip'd tar of their package directories:
 * the node console's pty comes from them (the bundle loads them from `$prefix/node_modules`). Null
 * where they are not installed beside the daemon; a node of another platform then reports no `pty`.
 */
function ptyPackages(daemonDir: string): Buffer | null {
  try {
    const fromDaemon = createRequire(join(daemonDir, 'package.json'));
    const pty = dirname(fromDaemon.resolve('@lydell/node-pty/package.json'));
    const binary = dirname(
      createRequire(join(pty, 'package.json')).resolve(
        `@lydell/node-pty-${process.platform}-${process.arch}/package.json`,
      ),
    );
    const parent = dirname(pty);
    return execFileSync('tar', [
      '-czf',
      '-',
      '-C',
      parent,
      '--owner=0',
      '--group=0',
      'node-pty',
      // The binary's package sits beside node-pty in every npm layout this repository produces.
      ...(dirname(binary) === parent ? [binary.slice(parent.length + 1)] : []),
    ]);
  } catch {
    return null;
  }
}

export function buildInstaller(options: InstallerOptions): string {
  const scripts = readdirSync(join(options.daemonDir, 'scripts'))
    .filter((name) => /^[a-z][a-z0-9-]*\.sh$/.test(name))
    .sort();
  const url = options.url ?? '';
  const pty = ptyPackages(options.daemonDir);
  const ptyPayload = pty
    ? `mkdir -p "$prefix/node_modules/@lydell"\nbase64 -d <<'BCD_PAYLOAD' | tar -xzf - -C "$prefix/node_modules/@lydell"\n${pty.toString('base64').replace(/.{76}/g, '$&\n')}\nBCD_PAYLOAD\n`
    : '';
  return `#!/bin/sh
# better-compute node installer: installs bcd, writes its systemd unit and joins a pool.
#   sh install.sh --token-file FILE   (or --token-file - to read the join token from standard input)
# Options: --url URL, --prefix DIR (/opt/bcd), --state-dir DIR (/var/lib/bcd), --gpu-inventory FILE,
#          --no-start (write the unit but do not start it).
set -eu

url=${quote(url)}
token_file=''
prefix=/opt/bcd
state_dir=/var/lib/bcd
gpu_inventory=''
start=1
plugins=${options.plugins ? 1 : 0}

die() {
  printf 'install: %s\\n' "$1" >&2
  exit "\${2:-1}"
}

while [ "$#" -gt 0 ]; do
  case "$1" in
    --url) [ "$#" -ge 2 ] || die '--url needs a value' 2; url=$2; shift 2 ;;
    --token-file) [ "$#" -ge 2 ] || die '--token-file needs a value' 2; token_file=$2; shift 2 ;;
    --prefix) [ "$#" -ge 2 ] || die '--prefix needs a value' 2; prefix=$2; shift 2 ;;
    --state-dir) [ "$#" -ge 2 ] || die '--state-dir needs a value' 2; state_dir=$2; shift 2 ;;
    --gpu-inventory) [ "$#" -ge 2 ] || die '--gpu-inventory needs a value' 2; gpu_inventory=$2; shift 2 ;;
    --no-start) start=0; shift ;;
    *) die "unknown option $1 (the join token is never an argument: use --token-file FILE or -)" 2 ;;
  esac
done

[ -n "$url" ] || die 'no server URL: pass --url https://compute.example.com' 2
[ -n "$token_file" ] || die 'no join token: pass --token-file FILE, or --token-file - and the token on standard input' 2
[ "$(id -u)" -eq 0 ] || die 'run the installer as root'
command -v node >/dev/null 2>&1 || die 'Node.js 20 or later is needed (apt-get install nodejs, or nodejs.org)'
node_major=$(node -p 'process.versions.node.split(".")[0]')
[ "$node_major" -ge 20 ] || die "Node.js 20 or later is needed; this machine has $(node --version)"
command -v base64 >/dev/null 2>&1 || die 'base64 (coreutils) is needed'
command -v tar >/dev/null 2>&1 || die 'tar is needed'

umask 022
mkdir -p "$prefix/bin" "$prefix/dist" "$prefix/scripts"
${payload('$prefix/dist/bcd.cjs', join(options.daemonDir, 'dist', 'bcd.cjs'))}
${payload('$prefix/dist/supervisor.cjs', join(options.daemonDir, 'dist', 'supervisor.cjs'))}
${scripts.map((name) => payload(`$prefix/scripts/${name}`, join(options.daemonDir, 'scripts', name))).join('')}${ptyPayload}cat > "$prefix/bin/bcd.cjs" <<'BCD_BIN'
${readFileSync(join(options.daemonDir, 'bin', 'bcd.cjs'), 'utf8').trimEnd()}
BCD_BIN
chmod 0755 "$prefix/bin/bcd.cjs" "$prefix"/scripts/*.sh
mkdir -p /usr/local/bin
ln -sf "$prefix/bin/bcd.cjs" /usr/local/bin/bcd

if [ "$plugins" -eq 1 ]; then
  # Driver plugins (bcx) are dropped here by the operator; bcd reads the directory at start.
  mkdir -p /etc/bcd/plugins.d
  chmod 0755 /etc/bcd /etc/bcd/plugins.d
fi

inventory_flag=''
[ -z "$gpu_inventory" ] || inventory_flag="--gpu-inventory $gpu_inventory"

mkdir -p /etc/systemd/system
cat > /etc/systemd/system/bcd.service <<BCD_UNIT
[Unit]
Description=better-compute node daemon (bcd)
After=network-online.target
Wants=network-online.target

[Service]
ExecStart=$(command -v node) $prefix/bin/bcd.cjs run --state-dir $state_dir $inventory_flag --supervise
Environment=BCD_PLUGINS_DIR=/etc/bcd/plugins.d
Restart=always
RestartSec=2
KillSignal=SIGTERM
TimeoutStopSec=45

[Install]
WantedBy=multi-user.target
BCD_UNIT
chmod 0644 /etc/systemd/system/bcd.service

mkdir -p "$state_dir"
chmod 0700 "$state_dir"
if [ -f "$state_dir/node.json" ]; then
  echo "install: $state_dir already holds a node; not joining again" >&2
elif [ "$token_file" = - ]; then
  # shellcheck disable=SC2086
  node "$prefix/bin/bcd.cjs" join --url "$url" --token-file - --state-dir "$state_dir" $inventory_flag
else
  # shellcheck disable=SC2086
  node "$prefix/bin/bcd.cjs" join --url "$url" --token-file "$token_file" --state-dir "$state_dir" $inventory_flag
fi

if [ "$start" -eq 1 ] && [ -d /run/systemd/system ]; then
  systemctl daemon-reload
  systemctl enable --now bcd.service
  echo 'install: bcd is running (systemctl status bcd)'
else
  echo 'install: the unit is written; start it with: systemctl enable --now bcd.service'
fi
`;
}
