/** The sandbox commands, in the order help lists them. */
import type { AnyCommand } from '../../define.js';
import sandboxTemplates from './templates.js';
import sandboxCreate from './create.js';
import sandboxList from './list.js';
import sandboxGet from './get.js';
import sandboxExtend from './extend.js';
import sandboxSnapshot from './snapshot.js';
import sandboxDelete from './delete.js';
import sandboxExec from './exec.js';
import { sandboxTemplateCommands } from '../sandbox-template/index.js';
import { sandboxSnapshotCommands } from '../sandbox-snapshot/index.js';
import { sandboxVolumeCommands } from '../sandbox-volume/index.js';

export const sandboxCommands: readonly AnyCommand[] = [
  sandboxTemplates,
  sandboxCreate,
  sandboxList,
  sandboxGet,
  sandboxExtend,
  sandboxSnapshot,
  sandboxExec,
  sandboxDelete,
  ...sandboxTemplateCommands,
  ...sandboxSnapshotCommands,
  ...sandboxVolumeCommands,
] as readonly AnyCommand[];
