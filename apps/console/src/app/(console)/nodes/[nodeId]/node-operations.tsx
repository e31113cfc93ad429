'use client';
/**
 * The node page's Workflows and Commands sections (console-kit's createNodeOperationsView): the
 * node's workflows, newest first, with their steps, and the commands the control plane sent its
 * daemon, oldest first as the API pages them, with exit code and output; both filtered by state and
 * kept live by the event stream. Pause, Resume, Retry and Abort on a workflow and Cancel on a command
 * each ask first, naming what happens; a button shows where the item's state allows the action and
 * is enabled only when Better IAM says the person may. The API still decides the call, and its
 * refusal (or "awaiting approval" for a held call) is shown in place.
 */
import { useEffect, useMemo, useState } from 'react';
import {
  COMMAND_FILTERS,
  commandQuestion,
  commandText,
  createNodeOperationsView,
  isCommandCancellable,
  isCommandFilter,
  isWorkflowActionAllowed,
  isWorkflowFilter,
  WORKFLOW_ACTIONS,
  WORKFLOW_FILTERS,
  workflowProgress,
  workflowQuestion,
  type CommandFilter,
  type NodeCommand,
  type NodeOperationsView,
  type NodeWorkflow,
  type WorkflowAction,
  type WorkflowFilter,
} from '@better-compute/console-kit';
import { useAction, useList, usePermission, useStore } from '@better-compute/console-kit/react';
import { safeCell, safeText } from '@better-compute/core';
import { useConsole } from '@/components/console-context';
import {
  ConfirmButton,
  disabledReason,
  ErrorNote,
  IdRef,
  PagedTable,
  StateFilter,
  when,
} from '@/components/ui';

const WORKFLOW_FILTER_LABELS: Record<WorkflowFilter, string> = {
  all: 'All',
  running: 'Running',
  paused: 'Paused',
  failed: 'Failed',
  succeeded: 'Succeeded',
  aborted: 'Aborted',
};
const COMMAND_FILTER_LABELS: Record<CommandFilter, string> = {
  all: 'All',
  queued: 'Queued',
  sent: 'Sent',
  running: 'Running',
  succeeded: 'Succeeded',
  failed: 'Failed',
  cancelled: 'Cancelled',
};
const WORKFLOW_ACTION_WORDS: Record<WorkflowAction, { label: string; confirm: string; done: string }> = {
  pause: { label: 'Pause', confirm: 'Pause workflow', done: 'Paused' },
  resume: { label: 'Resume', confirm: 'Resume workflow', done: 'Resumed' },
  retry: { label: 'Retry', confirm: 'Retry workflow', done: 'Retried' },
  abort: { label: 'Abort', confirm: 'Abort workflow', done: 'Aborted' },
};

export function NodeOperations({ nodeId }: { nodeId: string }) {
  const { client, live, session } = useConsole();
  const [view] = useState(() => createNodeOperationsView(client, { tenantId: session.tenantId, nodeId }));
  const [done, setDone] = useState<string | null>(null);
  useEffect(() => (live ? view.connect(live) : undefined), [live, view]);
  return (
    <>
      {done ? <p role="status">{done}</p> : null}
      <Workflows view={view} onDone={setDone} />
      <Commands view={view} onDone={setDone} />
    </>
  );
}

function Workflows({ view, onDone }: { view: NodeOperationsView; onDone: (text: string) => void }) {
  const filter = useStore(view.workflowFilter);
  const state = useList(view.workflows);
  return (
    <section aria-labelledby="node-workflows">
      <h2 id="node-workflows">Workflows</h2>
      <p className="note">
        Multi-step operations on this node (maintenance, instance and sandbox changes, updates), newest first.
      </p>
      <StateFilter
        label="Filter workflows"
        value={filter}
        filters={WORKFLOW_FILTERS}
        labels={WORKFLOW_FILTER_LABELS}
        isFilter={isWorkflowFilter}
        onChange={(next) => void view.setWorkflowFilter(next)}
      />
      <PagedTable
        state={state}
        caption="Workflows of this node"
        columns={['Workflow', 'State', 'Progress', 'Started', 'Actions']}
        empty={filter === 'all' ? 'No workflows on this node.' : `No ${filter} workflows on this node.`}
        onMore={() => void view.workflows.loadMore()}
        row={(workflow) => <WorkflowRow key={workflow.id} view={view} workflow={workflow} onDone={onDone} />}
      />
    </section>
  );
}

function WorkflowRow({
  view,
  workflow,
  onDone,
}: {
  view: NodeOperationsView;
  workflow: NodeWorkflow;
  onDone: (text: string) => void;
}) {
  return (
    <tr data-workflow={workflow.id}>
      <td>
        <strong>{workflow.kind}</strong>
        {workflow.reason ? <span className="note"> {safeCell(workflow.reason)}</span> : null}
        <br />
        <IdRef id={workflow.id} />
        {workflow.instanceId ? (
          <span className="note">
            {' '}
            for <IdRef id={workflow.instanceId} />
          </span>
        ) : null}
      </td>
      <td data-state={workflow.state}>{workflow.state}</td>
      <td>
        {workflowProgress(workflow)}
        <details>
          <summary>Steps</summary>
          <ol>
            {workflow.steps.map((step) => (
              <li key={step.name} data-step={step.name}>
                {safeCell(step.name)}: {step.state}
                {step.attempt > 1 ? `, attempt ${step.attempt}` : ''}
                {step.commandId ? (
                  <>
                    {' '}
                    (command <IdRef id={step.commandId} />)
                  </>
                ) : null}
                {step.error ? <span className="note"> {safeCell(step.error)}</span> : null}
              </li>
            ))}
          </ol>
        </details>
      </td>
      <td>
        {when(workflow.createdAt)}
        {workflow.finishedAt ? <span className="note">, finished {when(workflow.finishedAt)}</span> : null}
      </td>
      <td>
        <WorkflowSteering view={view} workflow={workflow} onDone={onDone} />
      </td>
    </tr>
  );
}

/** The actions the workflow's state allows, each enabled only once Better IAM says the person may. */
function WorkflowSteering({
  view,
  workflow,
  onDone,
}: {
  view: NodeOperationsView;
  workflow: NodeWorkflow;
  onDone: (text: string) => void;
}) {
  const { permissions } = useConsole();
  const allowed = WORKFLOW_ACTIONS.filter((action) => isWorkflowActionAllowed(workflow, action));
  const ask = (action: WorkflowAction) =>
    allowed.includes(action) ? view.workflowActionOf(workflow.id, action) : null;
  const may: Record<WorkflowAction, boolean | undefined> = {
    pause: usePermission(permissions, ask('pause')),
    resume: usePermission(permissions, ask('resume')),
    retry: usePermission(permissions, ask('retry')),
    abort: usePermission(permissions, ask('abort')),
  };
  const steer = useAction(async (action: WorkflowAction) => {
    const answer = await view.steerWorkflow(workflow.id, action);
    onDone(`${WORKFLOW_ACTION_WORDS[action].done} ${answer.id}: it is ${answer.state}.`);
    return answer;
  });
  // The error stays after the answer re-read the row: a refusal often means its state moved on.
  return (
    <>
      {allowed.length === 0 ? <span className="note">—</span> : null}
      <div className="row">
        {allowed.map((action) => (
          <ConfirmButton
            key={action}
            label={WORKFLOW_ACTION_WORDS[action].label}
            title={`${WORKFLOW_ACTION_WORDS[action].label} ${workflow.id}`}
            disabled={steer.pending || may[action] !== true}
            reason={disabledReason(true, '', may[action])}
            question={workflowQuestion(workflow, action)}
            confirmLabel={WORKFLOW_ACTION_WORDS[action].confirm}
            onConfirm={() => steer.run(action)}
          />
        ))}
      </div>
      <ErrorNote error={steer.error} />
    </>
  );
}

function Commands({ view, onDone }: { view: NodeOperationsView; onDone: (text: string) => void }) {
  const filter = useStore(view.commandFilter);
  const state = useList(view.commands);
  // A command's workflow is named by its kind where the Workflows list holds it.
  const workflows = useStore(view.workflows);
  const workflowKinds = useMemo(
    () => new Map(workflows.items.map((workflow) => [workflow.id, workflow.kind])),
    [workflows.items],
  );
  return (
    <section aria-labelledby="node-commands">
      <h2 id="node-commands">Commands</h2>
      <p className="note">
        What the control plane asked this node&apos;s daemon to do, oldest first; each runs at most once.
      </p>
      <StateFilter
        label="Filter commands"
        value={filter}
        filters={COMMAND_FILTERS}
        labels={COMMAND_FILTER_LABELS}
        isFilter={isCommandFilter}
        onChange={(next) => void view.setCommandFilter(next)}
      />
      <PagedTable
        state={state}
        caption="Commands of this node"
        columns={['Command', 'State', 'Result', 'Created', 'Actions']}
        empty={filter === 'all' ? 'No commands on this node.' : `No ${filter} commands on this node.`}
        onMore={() => void view.commands.loadMore()}
        row={(command) => (
          <CommandRow
            key={command.id}
            view={view}
            command={command}
            workflowKind={command.workflowId ? workflowKinds.get(command.workflowId) : undefined}
            onDone={onDone}
          />
        )}
      />
    </section>
  );
}

function CommandRow({
  view,
  command,
  workflowKind,
  onDone,
}: {
  view: NodeOperationsView;
  command: NodeCommand;
  workflowKind: string | undefined;
  onDone: (text: string) => void;
}) {
  const { permissions } = useConsole();
  const cancellable = isCommandCancellable(command);
  const may = usePermission(permissions, cancellable ? view.cancelActionOf(command.id) : null);
  const cancel = useAction(async () => {
    const answer = await view.cancelCommand(command.id);
    onDone(
      answer.state === 'cancelled'
        ? `Cancelled ${answer.id}.`
        : `Asked ${answer.id} to stop: the daemon reports when it has.`,
    );
    return answer;
  });
  const output = command.stdout || command.stderr;
  return (
    <tr data-command={command.id}>
      <td>
        <strong>{commandText(command)}</strong>
        <br />
        <IdRef id={command.id} />
        {command.workflowId ? (
          <span className="note">
            {' '}
            in <IdRef id={command.workflowId} name={workflowKind} />
          </span>
        ) : null}
      </td>
      <td data-state={command.state}>
        {command.state}
        {command.cancelRequested && command.state !== 'cancelled' ? (
          <span className="note">, asked to stop</span>
        ) : null}
      </td>
      <td>
        {command.exitCode !== null ? `exit ${command.exitCode}` : ''}
        {command.error ? <span className="note"> {safeCell(command.error)}</span> : null}
        {output ? (
          <details>
            <summary>Output</summary>
            {command.stdout ? (
              <>
                <span className="note">stdout</span>
                <pre>{safeText(command.stdout)}</pre>
              </>
            ) : null}
            {command.stderr ? (
              <>
                <span className="note">stderr</span>
                <pre>{safeText(command.stderr)}</pre>
              </>
            ) : null}
          </details>
        ) : null}
      </td>
      <td>{when(command.createdAt)}</td>
      <td>
        {cancellable ? (
          <ConfirmButton
            label="Cancel"
            title={`Cancel ${command.id}`}
            disabled={cancel.pending || may !== true}
            reason={disabledReason(true, '', may)}
            question={commandQuestion(command)}
            confirmLabel="Cancel command"
            onConfirm={() => cancel.run(undefined)}
          />
        ) : (
          <span className="note">—</span>
        )}
        <ErrorNote error={cancel.error} />
      </td>
    </tr>
  );
}
