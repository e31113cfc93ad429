/** `nodes cordon NODE [--reason] [--if-version N]`: nodes.cordon. */
import { nodeStateCommand } from './state-command.js';

export default nodeStateCommand('cordon', 'Cordon a node: it keeps its reservations and takes no new ones');
