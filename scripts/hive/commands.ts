import { createWriteStream } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { once } from 'node:events';
import { createPrivateKey, X509Certificate } from 'node:crypto';
import os from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import type { ParseArgsConfig } from 'node:util';
import { saveCredentials, type SavedCredentials } from './config.js';
import { ClientError } from './errors.js';
import * as format from './format.js';
import type { HiveHttp } from './http.js';
import { makeMachineKey } from './machine-key.js';

/**
 * The client's commands. Each names its options (node:util parseArgs), its usage line, and a run
 * that makes the calls and prints the answer: as the server sent it with `--json`, for a person
 * otherwise.
 */
type Options = NonNullable<ParseArgsConfig['options']>;
type Values = Record<string, string | boolean | (string | boolean)[] | undefined>;

export interface CommandContext {
  values: Values;
  /** Positionals after the command's name. */
  args: string[];
  json: boolean;
  env: NodeJS.ProcessEnv;
  saved: SavedCredentials | null;
  /** The server this call goes to (--server, HIVE_URL, the saved one). */
  server(): string;
  /** The server with the credential (HIVE_TOKEN or the saved token). */
  api(): HiveHttp;
  /** The server without a credential (the device flow, enrolment). */
  anonymous(): HiveHttp;
  /** The server with a token just obtained (login, enrol). */
  withToken(token: string): HiveHttp;
  /** One answer: `json` with --json, `human` otherwise. */
  print(json: unknown, human: string): void;
  /** A line for the person while a command waits (stderr), never mixed into --json output. */
  note(line: string): void;
  stdout: NodeJS.WritableStream;
}

export interface Command {
  usage: string;
  options: Options;
  run(context: CommandContext): Promise<void>;
}

const text = (value: unknown): string | undefined => (typeof value === 'string' ? value : undefined);
const list = (value: unknown): string[] | undefined => (Array.isArray(value) && value.length > 0 ? value.flatMap((item) => String(item).split(',')).map((item) => item.trim()).filter(Boolean) : undefined);

function required(values: Values, name: string): string {
  const value = text(values[name]);
  if (!value) throw new ClientError(`--${name} is required.`, { usage: true });
  return value;
}

function number(values: Values, name: string): number | undefined {
  const value = text(values[name]);
  if (value === undefined) return undefined;
  const parsed = Number(value);
  if (value.trim() === '' || !Number.isFinite(parsed)) throw new ClientError(`--${name} must be a number, not "${value}".`, { usage: true });
  return parsed;
}

function positional(context: CommandContext, index: number, what: string): string {
  const value = context.args[index];
  if (!value) throw new ClientError(`Give the ${what}.`, { usage: true });
  return value;
}

/** Drops the fields left undefined, so the body holds only what was asked. */
const defined = (body: Record<string, unknown>): Record<string, unknown> => Object.fromEntries(Object.entries(body).filter(([, value]) => value !== undefined));

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

const login: Command = {
  usage: 'login                      sign in with the device flow: an admin approves the code shown',
  options: {},
  async run(context) {
    const server = context.server();
    const hive = context.anonymous();
    const started = await hive.post('/v1/device/start');
    const pending = { status: 'pending', user_code: started.user_code, verification_uri: started.verification_uri, expires_in: started.expires_in };
    // The code is needed before the command ends: a JSON line for an agent to relay, or the instructions.
    if (context.json) context.stdout.write(`${JSON.stringify(pending)}\n`);
    else {
      context.stdout.write(`To sign in, open ${started.verification_uri} and enter the code ${started.user_code},\nor ask an admin of your organisation to approve it (it expires in ${Math.round(started.expires_in / 60)} minutes).\n`);
      context.note('Waiting for approval…');
    }
    const deadline = Date.now() + started.expires_in * 1000;
    const interval = Math.max(1, Number(started.interval) || 5) * 1000;
    for (;;) {
      if (Date.now() > deadline) throw new ClientError(`The code ${started.user_code} expired before it was approved; run login again.`);
      await sleep(interval);
      const polled = await hive.post('/v1/device/poll', { device_code: started.device_code });
      if (polled.status === 'pending') continue;
      if (polled.status !== 'approved') throw new ClientError(`The code ${started.user_code} expired before it was approved; run login again.`);
      const who = await context.withToken(polled.token).post('/v1/whoami');
      const file = await saveCredentials(
        {
          server,
          token: polled.token,
          token_id: polled.id,
          via: 'login',
          person: who.person ? { id: who.person.id, email: who.person.email } : null,
          organisation: who.organisation,
          saved_at: new Date().toISOString(),
          // A login keeps the machine enrolled on this server, if any.
          machine: context.saved && context.saved.server === server ? context.saved.machine : null,
        },
        context.env,
      );
      context.print(
        { status: 'approved', server, token_id: polled.id, person: who.person, organisation: who.organisation, grants: who.grants, credentials_file: file },
        `Signed in to ${server} as ${who.person?.email} (${who.organisation.name}); ${who.grants.map((grant: any) => `${grant.role} on ${grant.node.path}`).join(', ') || 'no grants yet'}.\nCredential saved in ${file}.`,
      );
      return;
    }
  },
};

const enrol: Command = {
  usage: 'enrol --email E [--password P] [--name N]   enrol this machine (temporary, 30 days): key pair, certificate request, certificate stored; the password may come from HIVE_PASSWORD',
  options: { email: { type: 'string' }, password: { type: 'string' }, name: { type: 'string' } },
  async run(context) {
    const server = context.server();
    const email = required(context.values, 'email');
    const password = text(context.values.password) ?? context.env.HIVE_PASSWORD;
    if (!password) throw new ClientError('Give the password with --password or HIVE_PASSWORD (set it first with POST /v1/password).', { usage: true });
    const name = text(context.values.name);
    const key = await makeMachineKey(name ?? os.hostname());
    const answer = await context.anonymous().post('/v1/enrol', defined({ email, password, csr: key.csr, name }));
    const certificate = new X509Certificate(answer.certificate);
    // The hive signs the key the request carried; a certificate for any other key is useless here.
    if (!certificate.checkPrivateKey(createPrivateKey(key.privateKey))) throw new ClientError('The certificate the hive answered is not for the key this machine made; nothing was saved.');
    const token: string = typeof answer.token === 'string' ? answer.token : answer.token?.token;
    const who = await context.withToken(token).post('/v1/whoami');
    const machine = { id: answer.machine.id, name: answer.machine.name, kind: answer.machine.kind, expires_at: answer.machine.expires_at ?? null };
    const file = await saveCredentials(
      {
        server,
        token,
        token_id: who.token?.id ?? null,
        via: 'enrol',
        person: who.person ? { id: who.person.id, email: who.person.email } : null,
        organisation: who.organisation,
        saved_at: new Date().toISOString(),
        machine: { ...machine, private_key: key.privateKey, certificate: answer.certificate, ca_certificate: answer.ca_certificate, relay: answer.relay },
      },
      context.env,
    );
    context.print(
      { machine, relay: answer.relay, certificate: { fingerprint256: certificate.fingerprint256, valid_to: new Date(certificate.validTo).toISOString() }, credentials_file: file },
      `Enrolled this machine as ${machine.name} (${machine.id}, ${machine.kind}${machine.expires_at ? `, expires ${machine.expires_at.slice(0, 10)}` : ''}).\nRelay: ${answer.relay}\nKey, certificate and token saved in ${file}.`,
    );
  },
};

const remember: Command = {
  usage: 'remember --node N --title T [--body B | --body-file F|-] [--scope S] [--kind K] [--pin] [--source S] [--supersedes ID,…] [--force]',
  options: {
    node: { type: 'string' }, title: { type: 'string' }, body: { type: 'string' }, 'body-file': { type: 'string' }, scope: { type: 'string' },
    kind: { type: 'string', multiple: true }, pin: { type: 'boolean' }, source: { type: 'string' }, supersedes: { type: 'string', multiple: true }, force: { type: 'boolean' },
  },
  async run(context) {
    const { values } = context;
    const bodyFile = text(values['body-file']);
    let body = text(values.body);
    if (bodyFile !== undefined) {
      if (body !== undefined) throw new ClientError('Give --body or --body-file, not both.', { usage: true });
      body = bodyFile === '-' ? await readStdin() : await readFile(bodyFile, 'utf8');
    }
    const answer = await context.api().post('/v1/remember', defined({
      node: required(values, 'node'),
      title: required(values, 'title'),
      body,
      scope: text(values.scope),
      kind: list(values.kind)?.[0],
      pinned: values.pin ? true : undefined,
      source: text(values.source),
      supersedes: list(values.supersedes),
      force: values.force ? true : undefined,
    }));
    context.print(answer, format.memoryWritten(answer));
  },
};

const recall: Command = {
  usage: 'recall <query…> [--node N]… [--scope S] [--kind K]… [--limit N]',
  options: { node: { type: 'string', multiple: true }, scope: { type: 'string' }, kind: { type: 'string', multiple: true }, limit: { type: 'string' } },
  async run(context) {
    const query = context.args.join(' ').trim();
    if (!query) throw new ClientError('Give the query, e.g. `recall how do we deploy`.', { usage: true });
    const answer = await context.api().post('/v1/recall', defined({
      query,
      nodes: list(context.values.node),
      scope: text(context.values.scope),
      kinds: list(context.values.kind),
      limit: number(context.values, 'limit'),
    }));
    context.print(answer, format.recallResults(answer));
  },
};

const forget: Command = {
  usage: 'forget <memory id> [--force]   (force: a pinned memory, or one that supersedes others)',
  options: { force: { type: 'boolean' } },
  async run(context) {
    const answer = await context.api().post('/v1/memory/forget', defined({ id: positional(context, 0, 'memory id (mem_…)'), force: context.values.force ? true : undefined }));
    context.print(answer, format.forgotten(answer));
  },
};

const brief: Command = {
  usage: 'brief --node N [--budget TOKENS] [--no-session]',
  options: { node: { type: 'string' }, budget: { type: 'string' }, 'no-session': { type: 'boolean' } },
  async run(context) {
    const answer = await context.api().post('/v1/brief', defined({
      node: required(context.values, 'node'),
      budget_tokens: number(context.values, 'budget'),
      session: context.values['no-session'] ? false : undefined,
    }));
    context.print(answer, format.brief(answer));
  },
};

const TASK_ACTIONS = ['add', 'list', 'due', 'done', 'drop', 'snooze'] as const;

const task: Command = {
  usage: `task add --node N --title T [--body B] [--due ISO] [--assignee me|EMAIL] [--memory ID]
  task list [--node N] [--status open|done|dropped|all] [--assignee A] [--limit N]
  task due [--node N] [--within-hours H] [--assignee A] [--limit N]
  task done|drop <task id> [--note TEXT]
  task snooze <task id> (--until ISO | --hours H)`,
  options: {
    node: { type: 'string' }, title: { type: 'string' }, body: { type: 'string' }, due: { type: 'string' }, assignee: { type: 'string' }, memory: { type: 'string' },
    status: { type: 'string' }, limit: { type: 'string' }, 'within-hours': { type: 'string' }, note: { type: 'string' }, until: { type: 'string' }, hours: { type: 'string' },
  },
  async run(context) {
    const action = context.args[0] as (typeof TASK_ACTIONS)[number] | undefined;
    if (!action || !TASK_ACTIONS.includes(action)) throw new ClientError(`Give the task action: ${TASK_ACTIONS.join(', ')}.`, { usage: true });
    const { values } = context;
    const body = (() => {
      switch (action) {
        case 'add':
          return { node: required(values, 'node'), title: required(values, 'title'), body: text(values.body), due: text(values.due), assignee: text(values.assignee), memory: text(values.memory) };
        case 'list':
          return { node: text(values.node), status: text(values.status), assignee: text(values.assignee), limit: number(values, 'limit') };
        case 'due':
          return { node: text(values.node), within_hours: number(values, 'within-hours'), assignee: text(values.assignee), limit: number(values, 'limit') };
        case 'done':
        case 'drop':
          return { id: positional(context, 1, 'task id (tsk_…)'), note: text(values.note) };
        case 'snooze':
          return { id: positional(context, 1, 'task id (tsk_…)'), until: text(values.until), hours: number(values, 'hours') };
      }
    })();
    const answer = await context.api().post('/v1/task', defined({ action, ...body }));
    context.print(answer, format.task(answer, action));
  },
};

const exportCommand: Command = {
  usage: 'export --node N [--out FILE]   every memory, version, link, event and task as JSON lines (to stdout without --out)',
  options: { node: { type: 'string' }, out: { type: 'string' } },
  async run(context) {
    const node = required(context.values, 'node');
    const out = text(context.values.out);
    const response = await context.api().stream('/v1/export', { node });
    const sink = out ? createWriteStream(out, { mode: 0o600 }) : context.stdout;
    // The stream is passed on as it comes; only its last line is kept, to check the trailer.
    let tail = '';
    const decoder = new TextDecoder();
    for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
      tail = (tail + decoder.decode(chunk, { stream: true })).slice(-65_536);
      const lastBreak = tail.lastIndexOf('\n', tail.length - 2);
      if (lastBreak >= 0) tail = tail.slice(lastBreak + 1);
      if (!sink.write(chunk)) await once(sink, 'drain');
    }
    if (out) {
      (sink as ReturnType<typeof createWriteStream>).end();
      await once(sink, 'close');
    }
    let trailer: { type?: string; counts?: Record<string, number> } = {};
    try {
      trailer = JSON.parse(tail);
    } catch {
      // Not a whole line: the stream was cut.
    }
    if (trailer.type !== 'end') throw new ClientError(`The export of ${node} was cut short (no end line)${out ? `; ${out} is incomplete` : ''}.`);
    if (out) context.print({ node, file: out, counts: trailer.counts }, format.exportDone({ node, file: out, counts: trailer.counts ?? {} }));
  },
};

const whoami: Command = {
  usage: 'whoami                     the credential: organisation, person, grants, traits, this machine',
  options: {},
  async run(context) {
    const server = context.server();
    const answer = await context.api().post('/v1/whoami');
    const saved = context.saved && context.saved.server === server ? context.saved.machine : null;
    const machine = saved ? { id: saved.id, name: saved.name, kind: saved.kind, expires_at: saved.expires_at } : null;
    context.print({ ...answer, client: { server, machine } }, format.whoami(answer, { server, machine }));
  },
};

const machines: Command = {
  usage: 'machines                   the machines enrolled in your organisation',
  options: {},
  async run(context) {
    const answer = await context.api().post('/v1/machines');
    context.print(answer, format.machines(answer));
  },
};

const dashboard: Command = {
  usage: 'dashboard                  a one-time link (2 minutes, used once) that opens the dashboard signed in as you',
  options: {},
  async run(context) {
    const answer = await context.api().post('/v1/dashboard/session');
    context.print(answer, `Open within two minutes (it works once):\n  ${String(answer.url)}`);
  },
};

export const COMMANDS: Record<string, Command> = { login, enrol, remember, recall, forget, brief, task, export: exportCommand, whoami, machines, dashboard };
