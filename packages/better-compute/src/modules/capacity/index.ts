/** What the CLI and the simulator import from the capacity module. */
export {
  parseSelector,
  requestTerms,
  matchesSelector,
  type SelectorTerm,
  type SelectorOperator,
} from './selector.js';
export { place, earliestFit, type FreeGroup, type Allocation } from './placement.js';
export { runFleetController, CONTROLLER_JOB, type ControllerReport } from './controller.js';
