/**
 * The human-readable forms of the hive's answers (`--json` prints the answers themselves). Each
 * takes the answer as the server sent it and returns the lines to print.
 */
type Json = any;

const firstLine = (text: string | null | undefined, max = 160): string => {
  const line = (text ?? '').split('\n').find((candidate) => candidate.trim() !== '')?.trim() ?? '';
  return line.length > max ? `${line.slice(0, max - 1)}…` : line;
};
const day = (iso: string | null | undefined): string => (iso ? iso.slice(0, 10) : '');
const minute = (iso: string | null | undefined): string => (iso ? `${iso.slice(0, 16).replace('T', ' ')} UTC` : '');

export function memoryWritten(answer: Json): string {
  const memory = answer.memory;
  const verb = answer.result === 'created' ? 'Remembered' : answer.result === 'refined' ? 'Refined' : 'Unchanged:';
  const flags = [memory.kind, memory.pinned ? 'pinned' : null, `v${memory.version}`].filter(Boolean).join(', ');
  const lines = [`${verb} "${memory.title}" (${flags}) ${memory.id}`, `  in ${memory.node.path}, scope ${memory.scope}`];
  if (memory.supersedes?.length) lines.push(`  supersedes ${memory.supersedes.join(', ')}`);
  return lines.join('\n');
}

export function recallResults(answer: Json): string {
  const lines: string[] = [];
  if (answer.ranking && !answer.ranking.meaning) lines.push('(ranked by text alone: the query could not be embedded)');
  if (answer.data.length === 0) lines.push(`Nothing recalled for "${answer.query}".`);
  answer.data.forEach((hit: Json, index: number) => {
    const memory = hit.memory;
    const matched = [hit.matched.text ? 'text' : null, hit.matched.meaning ? 'meaning' : null].filter(Boolean).join('+');
    const flags = [memory.kind, memory.pinned ? 'pinned' : null].filter(Boolean).join(', ');
    lines.push(`${index + 1}. ${memory.title}  [${flags}]  ${memory.id}`);
    lines.push(`   ${memory.node.path} · ${memory.scope} · score ${hit.score} · matched ${matched}${hit.resolved_from.length ? ` · replaces ${hit.resolved_from.join(', ')}` : ''}`);
    const body = firstLine(memory.body);
    if (body) lines.push(`   ${body}`);
  });
  return lines.join('\n');
}

export function forgotten(memory: Json): string {
  return `Forgot "${memory.title}" ${memory.id} (${memory.node.path}, scope ${memory.scope}); a tombstone remains.`;
}

export function brief(answer: Json): string {
  const lines = [`Brief for ${answer.node.path} (${answer.used_tokens} of ${answer.budget_tokens} tokens)`, ''];
  lines.push(answer.text.trim() ? answer.text : '(nothing to brief)');
  if (answer.cut.length > 0) {
    lines.push('', 'Left out for the budget:');
    for (const cut of answer.cut) lines.push(`  ${cut.section}: ${cut.count} (${cut.ids.join(', ')})`);
  }
  if (answer.session) lines.push('', `Session ${answer.session.id} opened ${minute(answer.session.started_at)}.`);
  return lines.join('\n');
}

function taskLine(task: Json): string {
  const state = task.status === 'open' ? (task.due ? 'due' : 'open') : task.status;
  const due = task.due_at ? ` · due ${minute(task.due_at)}` : '';
  const assignee = task.assignee ? ` · for ${task.assignee.email}` : '';
  return `${task.id}  [${state}] ${task.title}  (${task.node.path}${due}${assignee})`;
}

export function task(answer: Json, action: string): string {
  if (answer.object === 'list') return answer.data.length === 0 ? (action === 'due' ? 'Nothing due.' : 'No tasks.') : answer.data.map(taskLine).join('\n');
  const verb = { add: 'Added', done: 'Done:', drop: 'Dropped', snooze: 'Snoozed' }[action] ?? '';
  return `${verb} ${taskLine(answer)}${answer.closed?.note ? `\n  note: ${answer.closed.note}` : ''}`;
}

export function whoami(answer: Json, client: { server: string; machine: Json | null }): string {
  const lines = [`Server:        ${client.server}`, `Organisation:  ${answer.organisation.name} (${answer.organisation.id})`];
  if (answer.person) {
    const authority = [answer.person.guardrail_authority ? 'guardrail authority' : null, answer.person.axiom_authority ? 'axiom authority' : null].filter(Boolean);
    lines.push(`Person:        ${answer.person.email} (${answer.person.id})${authority.length ? `, ${authority.join(', ')}` : ''}`);
  }
  lines.push(`Token:         ${answer.token.id} (${answer.token.kind === 'person' ? "a person's token" : 'a grant token'})`);
  lines.push(`Grants:        ${answer.grants.map((grant: Json) => `${grant.role} on ${grant.node.path}`).join('; ') || 'none'}`);
  if (client.machine) lines.push(`Machine:       ${client.machine.name} (${client.machine.id}, ${client.machine.kind}${client.machine.expires_at ? `, expires ${day(client.machine.expires_at)}` : ''})`);
  if (answer.traits?.length) {
    lines.push('Traits:');
    for (const trait of answer.traits) lines.push(`  - ${trait.trait} (${trait.evidence?.length ?? 0} evidence)`);
  }
  return lines.join('\n');
}

export function machines(answer: Json): string {
  if (answer.machines.length === 0) return 'No machines enrolled.';
  return answer.machines
    .map((machine: Json) => `${machine.id}  ${machine.name}  ${machine.kind}  ${machine.status}${machine.expires_at ? `  expires ${day(machine.expires_at)}` : ''}  (enrolled ${day(machine.created_at)})`)
    .join('\n');
}

export function exportDone(summary: { node: string; file: string; counts: Record<string, number> }): string {
  const counts = Object.entries(summary.counts).map(([type, count]) => `${type} ${count}`).join(', ');
  return `Exported ${summary.node} to ${summary.file}: ${counts || 'nothing'}.`;
}
