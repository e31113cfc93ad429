/**
 * The node page's commands and workflows (the console guide's "a node's commands and workflows"):
 * what the control plane asked the node's daemon to do (`commands.*`, oldest first, as the API pages
 * them) and the node's workflows (`workflows.*`, newest first), each filtered by state; Cancel on an
 * unfinished command, and Pause, Resume, Retry and Abort on a workflow, each allowed by the item's
 * state here and by Better IAM (advisory) before the API decides the call.
 *
 * What keeps it live: every change of a command or a workflow has its event (`command.*`,
 * `workflow.*`), whose data names the node. An item in the list is read again; an item the list
 * does not hold joins it only when its event names this node, so other nodes' traffic costs nothing.
 * An aborted workflow cancels its command without an event of the command, so a workflow's event
 * also re-reads the unfinished commands of that workflow the list holds.
 *
 * Every string from the server a person reads passes through `safeCell`.
 */
import type { CallInput, CallOutput, ComputeClient } from '@better-compute/client';
import { safeCell } from '@better-compute/core';
import { commandState, workflowState } from '@better-compute/core/methods';
import { describeAction, type ActionDescription } from './actions.js';
import type { ComputeEvent, LiveConsole, TrackedStore } from './live.js';
import { isGone, ListStore, type Page } from './stores.js';
import { ValueStore } from './subscribable.js';

export type NodeCommand = CallOutput<'commands.get'>;
export type NodeCommandState = NodeCommand['state'];
export type NodeWorkflow = CallOutput<'workflows.get'>;
export type NodeWorkflowState = NodeWorkflow['state'];
/** What a person may do to a workflow. */
export type WorkflowAction = 'pause' | 'resume' | 'retry' | 'abort';
export type CommandFilter = NodeCommandState | 'all';
export type WorkflowFilter = NodeWorkflowState | 'all';

export const COMMAND_FILTERS: readonly CommandFilter[] = ['all', ...commandState.options];
export const WORKFLOW_FILTERS: readonly WorkflowFilter[] = ['all', ...workflowState.options];
export const WORKFLOW_ACTIONS: readonly WorkflowAction[] = ['pause', 'resume', 'retry', 'abort'];

/** The states each workflow action is allowed from (the server's rule in the workflows service). */
const WORKFLOW_ALLOWED: Record<WorkflowAction, readonly NodeWorkflowState[]> = {
  pause: ['running'],
  resume: ['paused'],
  retry: ['failed'],
  abort: ['running', 'paused', 'failed'],
};
/** A command the daemon may still run: cancelling it changes something. */
const UNFINISHED: readonly NodeCommandState[] = ['queued', 'sent', 'running'];
const FINISHED: readonly NodeCommandState[] = ['succeeded', 'failed', 'cancelled'];

export const isCommandFilter = (value: unknown): value is CommandFilter =>
  typeof value === 'string' && (COMMAND_FILTERS as readonly string[]).includes(value);
export const isWorkflowFilter = (value: unknown): value is WorkflowFilter =>
  typeof value === 'string' && (WORKFLOW_FILTERS as readonly string[]).includes(value);

/** Whether the workflow's state allows the action; the API still decides. */
export const isWorkflowActionAllowed = (
  workflow: Pick<NodeWorkflow, 'state'>,
  action: WorkflowAction,
): boolean => WORKFLOW_ALLOWED[action].includes(workflow.state);

/** Whether Cancel changes anything: the command is unfinished and nobody asked it to stop yet. */
export const isCommandCancellable = (command: Pick<NodeCommand, 'state' | 'cancelRequested'>): boolean =>
  UNFINISHED.includes(command.state) && !command.cancelRequested;

/** What a command does, in words: `exec.script disk-check`, `inventory.refresh`. */
export function commandText(command: Pick<NodeCommand, 'kind' | 'payload'>): string {
  const script = command.payload.script;
  return safeCell(typeof script === 'string' ? `${command.kind} ${script}` : command.kind);
}

/** Where a workflow is: `step 2 of 4: node.wait-drained`, or its step count once finished. */
export function workflowProgress(workflow: Pick<NodeWorkflow, 'state' | 'steps' | 'currentStep'>): string {
  const total = workflow.steps.length;
  if (workflow.state === 'succeeded' || workflow.state === 'aborted') return `${total} step(s)`;
  const step = workflow.steps[workflow.currentStep];
  return `step ${Math.min(workflow.currentStep + 1, total)} of ${total}${step ? `: ${safeCell(step.name)}` : ''}`;
}

/** The confirmation question of Cancel, naming what happens. */
export function commandQuestion(command: NodeCommand): string {
  const what = commandText(command);
  return command.state === 'queued'
    ? `Cancel the command ${command.id} (${what})? It has not been delivered: it never runs.`
    : `Cancel the command ${command.id} (${what})? The node's daemon is told to stop it; what it already did stays done.`;
}

/** The confirmation question of a workflow action, naming what happens. */
export function workflowQuestion(workflow: NodeWorkflow, action: WorkflowAction): string {
  const name = `the ${safeCell(workflow.kind)} workflow ${workflow.id}`;
  const step = workflow.steps[workflow.currentStep];
  const stepName = step ? safeCell(step.name) : 'its current step';
  if (action === 'pause') return `Pause ${name}? It stops after ${stepName}, until someone resumes it.`;
  if (action === 'resume') return `Resume ${name}? It goes on from ${stepName}.`;
  if (action === 'retry') return `Retry ${name}? ${stepName} runs again, as a new attempt.`;
  return `Abort ${name}? No further step runs and a running command is cancelled. This cannot be undone.`;
}

export interface NodeOperationsViewOptions {
  tenantId: string;
  nodeId: string;
  /** Items per list page; default 25. */
  pageSize?: number | undefined;
}

export interface NodeOperationsView {
  readonly tenantId: string;
  readonly nodeId: string;
  /** The node's commands of the command filter, oldest first (the API's order). */
  readonly commands: ListStore<NodeCommand>;
  readonly commandFilter: ValueStore<CommandFilter>;
  /** The node's workflows of the workflow filter, newest first. */
  readonly workflows: ListStore<NodeWorkflow>;
  readonly workflowFilter: ValueStore<WorkflowFilter>;
  /** Registers both lists with a live console (`command` and `workflow` subjects); returns the undo. */
  connect(live: Pick<LiveConsole, 'track'>): () => void;
  setCommandFilter(filter: CommandFilter): Promise<void>;
  setWorkflowFilter(filter: WorkflowFilter): Promise<void>;
  /** Cancels a command; the answer replaces its row. */
  cancelCommand(commandId: string): Promise<NodeCommand>;
  /** Pauses, resumes, retries or aborts a workflow; the answer replaces its row. */
  steerWorkflow(workflowId: string, action: WorkflowAction): Promise<NodeWorkflow>;
  /** What Cancel is decided as (compute:commands:cancel on the command). */
  cancelActionOf(commandId: string): ActionDescription;
  /** What a workflow action is decided as (compute:workflows:ACTION on the workflow). */
  workflowActionOf(workflowId: string, action: WorkflowAction): ActionDescription;
}

interface NodeItem {
  id: string;
  nodeId: string;
  state: string;
}

/**
 * One of the node's lists, filtered by state, and what keeps it live: an item is placed while it
 * is the node's and matches the filter, and leaves the list once it does not.
 */
function nodeList<T extends NodeItem, F extends string>(options: {
  nodeId: string;
  filter: F;
  insertAt: 'start' | 'end';
  load: (state: Exclude<F, 'all'> | undefined, cursor: string | undefined) => Promise<Page<T>>;
  readOne: (id: string) => Promise<T>;
}) {
  const filter = new ValueStore<F>(options.filter);
  const list = new ListStore<T>({
    load: (cursor) => {
      const state = filter.get();
      return options.load(state === 'all' ? undefined : (state as Exclude<F, 'all'>), cursor);
    },
    insertAt: options.insertAt,
  });
  const holds = (id: string) => list.get().items.some((item) => item.id === id);
  const place = (item: T): T => {
    const matches = filter.get() === 'all' || filter.get() === item.state;
    if (item.nodeId !== options.nodeId || !matches) {
      list.remove(item.id);
      return item;
    }
    // Oldest first: a new item belongs after the pages not read yet, so it joins only the last page.
    if (!holds(item.id) && options.insertAt === 'end' && list.get().nextCursor) return item;
    list.upsert(item);
    return item;
  };
  const tracked: TrackedStore = {
    get loaded() {
      return list.loaded;
    },
    refresh: () => list.refresh(),
    async refreshItem(id: string, event?: ComputeEvent) {
      if (!list.loaded) return;
      const eventNode = (event?.data as { nodeId?: unknown } | undefined)?.nodeId;
      if (!holds(id) && eventNode !== options.nodeId) return;
      try {
        place(await options.readOne(id));
      } catch (error) {
        if (isGone(error)) list.remove(id);
      }
    },
  };
  const setFilter = (next: F) => {
    filter.set(next);
    return list.refresh();
  };
  return { list, filter, tracked, place, setFilter };
}

/**
 * The node page's commands and workflows over a client.
 *
 * @example
 * const operations = createNodeOperationsView(client, { tenantId, nodeId: 'node_…' });
 * const undo = operations.connect(live);
 * operations.workflows.subscribe(() => render(operations.workflows.get()));
 * await operations.workflows.refresh();
 * await operations.steerWorkflow(workflowId, 'pause');
 */
export function createNodeOperationsView(
  client: ComputeClient,
  options: NodeOperationsViewOptions,
): NodeOperationsView {
  const { tenantId, nodeId } = options;
  const limit = options.pageSize ?? 25;
  const page = (state: string | undefined, cursor: string | undefined) => ({
    tenantId,
    nodeId,
    limit,
    ...(state ? { state } : {}),
    ...(cursor ? { cursor } : {}),
  });
  const commands = nodeList<NodeCommand, CommandFilter>({
    nodeId,
    filter: 'all',
    insertAt: 'end',
    load: (state, cursor) => client.call('commands.list', page(state, cursor) as CallInput<'commands.list'>),
    readOne: (commandId) => client.call('commands.get', { tenantId, commandId }),
  });
  const workflows = nodeList<NodeWorkflow, WorkflowFilter>({
    nodeId,
    filter: 'all',
    insertAt: 'start',
    load: (state, cursor) =>
      client.call('workflows.list', page(state, cursor) as CallInput<'workflows.list'>),
    readOne: (workflowId) => client.call('workflows.get', { tenantId, workflowId }),
  });

  /** After a refusal (changed meanwhile, or gone), show what the item is now. */
  function afterRefusal(
    list: { list: { remove(id: string): void }; tracked: TrackedStore },
    id: string,
    error: unknown,
  ): never {
    if (isGone(error)) list.list.remove(id);
    else void list.tracked.refreshItem!(id).catch(() => {});
    throw error;
  }

  /**
   * A workflow that ends (aborted) cancels the command it waits for without an event of the command,
   * so the workflow's event also re-reads its unfinished commands this list holds.
   */
  const rereadCommandsOf = async (workflowId: string) => {
    const held = commands.list
      .get()
      .items.filter((command) => command.workflowId === workflowId && !FINISHED.includes(command.state));
    await Promise.all(held.map((command) => commands.tracked.refreshItem!(command.id)));
  };
  const workflowsTracked: TrackedStore = {
    get loaded() {
      return workflows.tracked.loaded;
    },
    refresh: () => workflows.tracked.refresh(),
    async refreshItem(id, event) {
      await Promise.all([workflows.tracked.refreshItem!(id, event), rereadCommandsOf(id)]);
    },
  };

  return {
    tenantId,
    nodeId,
    commands: commands.list,
    commandFilter: commands.filter,
    workflows: workflows.list,
    workflowFilter: workflows.filter,
    connect(live) {
      const undoCommands = live.track('command', commands.tracked);
      const undoWorkflows = live.track('workflow', workflowsTracked);
      return () => {
        undoCommands();
        undoWorkflows();
      };
    },
    setCommandFilter: commands.setFilter,
    setWorkflowFilter: workflows.setFilter,
    async cancelCommand(commandId) {
      try {
        return commands.place(await client.call('commands.cancel', { tenantId, commandId }));
      } catch (error) {
        return afterRefusal(commands, commandId, error);
      }
    },
    async steerWorkflow(workflowId, action) {
      try {
        const input = { tenantId, workflowId };
        const answer =
          action === 'pause'
            ? await client.call('workflows.pause', input)
            : action === 'resume'
              ? await client.call('workflows.resume', input)
              : action === 'retry'
                ? await client.call('workflows.retry', input)
                : await client.call('workflows.abort', input);
        void rereadCommandsOf(workflowId).catch(() => {});
        return workflows.place(answer);
      } catch (error) {
        return afterRefusal(workflows, workflowId, error);
      }
    },
    cancelActionOf: (commandId) => describeAction('commands', 'cancel', commandId),
    workflowActionOf: (workflowId, action) => describeAction('workflows', action, workflowId),
  };
}
