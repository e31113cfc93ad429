/** `nodes uncordon NODE [--reason] [--if-version N]`: nodes.uncordon. */
import { nodeStateCommand } from './state-command.js';

export default nodeStateCommand(
  'uncordon',
  'Uncordon a cordoned, draining or drained node: it takes new reservations again',
);
