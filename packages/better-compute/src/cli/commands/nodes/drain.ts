/** `nodes drain NODE [--reason] [--if-version N]`: nodes.drain. */
import { nodeStateCommand } from './state-command.js';

export default nodeStateCommand(
  'drain',
  'Drain a node: no new work; it becomes drained when its last reservation ends',
);
