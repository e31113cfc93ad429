/** The pki commands: the deployment's machine PKI bundle. */
import type { AnyCommand } from '../../define.js';
import pkiInit from './init.js';
import pkiShow from './show.js';
import pkiIssueGateway from './issue-gateway.js';
import pkiRenewCa from './renew-ca.js';
import pkiRotateCommandRoot from './rotate-command-root.js';
import pkiAddSandboxCa from './add-sandbox-ca.js';
import pkiReseal from './reseal.js';
import pkiApprovers from './approvers.js';

export const pkiCommands: readonly AnyCommand[] = [
  pkiInit,
  pkiShow,
  pkiIssueGateway,
  pkiRenewCa,
  pkiRotateCommandRoot,
  pkiAddSandboxCa,
  pkiReseal,
  pkiApprovers,
] as readonly AnyCommand[];
