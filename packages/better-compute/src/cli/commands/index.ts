/**
 * The built-in commands, one file each under <group>/<verb>.ts, in the order help lists them.
 * Each file holds the definition and a small `run`; anything heavy a run needs (the client, the
 * configuration loader, the server, zod, node:fs) is imported inside it, so `version` and `help`
 * load only these definitions.
 */
import type { AnyCommand } from '../define.js';
import { capacityCommands } from './capacity/index.js';
import { commandsCommands } from './commands/index.js';
import { workflowsCommands } from './workflows/index.js';
import { eventsCommands } from './events/index.js';
import { webhooksCommands } from './webhooks/index.js';
import { secretsCommands } from './secrets/index.js';
import { profilesCommands } from './profiles/index.js';
import { providerAccountsCommands } from './provider-accounts/index.js';
import { metalCommands } from './metal/index.js';
import { fleetCommands } from './fleet/index.js';
import { releaseCommands } from './release/index.js';
import { releasesCommands } from './releases/index.js';
import { rolloutsCommands } from './rollouts/index.js';
import { auditCommands } from './audit/index.js';
import { batchCommands } from './batch/index.js';
import { confirmationsCommands } from './confirmations/index.js';
import { nodesCommands } from './nodes/index.js';
import { instancesCommands } from './instances/index.js';
import { imagesCommands } from './images/index.js';
import { flavorsCommands } from './flavors/index.js';
import { pkiCommands } from './pki/index.js';
import { sandboxCommands } from './sandbox/index.js';
import api from './api/api.js';
import openapi from './api/openapi.js';
import mcp from './mcp/mcp.js';
import sshCert from './ssh-cert/ssh-cert.js';
import consoleCommand from './console/console.js';
import execCommand from './exec/exec.js';
import forward from './forward/forward.js';
import authLogin from './auth/login.js';
import authLogout from './auth/logout.js';
import authStatus from './auth/status.js';
import dev from './operate/dev.js';
import doctor from './operate/doctor.js';
import iamSetup from './iam/setup.js';
import migrate from './operate/migrate.js';
import serve from './operate/serve.js';
import daemonInstallScript from './daemon/install-script.js';
import completion from './start/completion.js';
import help from './start/help.js';
import init from './start/init.js';
import version from './start/version.js';

export const builtinCommands: readonly AnyCommand[] = [
  help,
  version,
  completion,
  init,
  migrate,
  doctor,
  serve,
  dev,
  daemonInstallScript,
  openapi,
  iamSetup,
  ...pkiCommands,
  authLogin,
  authStatus,
  authLogout,
  api,
  mcp,
  ...capacityCommands,
  ...nodesCommands,
  ...instancesCommands,
  ...imagesCommands,
  ...flavorsCommands,
  ...sandboxCommands,
  ...commandsCommands,
  ...workflowsCommands,
  ...eventsCommands,
  ...webhooksCommands,
  ...secretsCommands,
  ...profilesCommands,
  ...metalCommands,
  consoleCommand,
  execCommand,
  forward,
  sshCert,
  ...fleetCommands,
  ...providerAccountsCommands,
  ...releasesCommands,
  ...rolloutsCommands,
  ...releaseCommands,
  ...auditCommands,
  ...batchCommands,
  ...confirmationsCommands,
] as readonly AnyCommand[];
