import { spawn } from 'node:child_process';
import { createHash, createPrivateKey, X509Certificate } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createNode, signUp, startHiveWorld, type HiveOwner, type HiveWorld } from './support/hive-world.js';

/**
 * `npm run hive -- <command>` run as a person or an agent runs it: a child process against a hive
 * started here, with the server in HIVE_URL and its credentials in a temporary HIVE_CONFIG_DIR.
 * Outputs are checked in both forms (human and --json), and the store behind them.
 */
const ROOT = path.resolve(import.meta.dirname, '..');
const scratch = mkdtempSync(path.join(os.tmpdir(), 'hive-client-test-'));
let dirs = 0;
const newConfigDir = () => path.join(scratch, `config-${++dirs}`);

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
  /** stdout's JSON lines, parsed. */
  lines: any[];
  /** stderr's JSON error line, with --json. */
  error: any;
}

interface Running {
  /** Resolves with the first stdout line that matches. */
  line(pattern: RegExp): Promise<string>;
  done: Promise<Run>;
}

function startHive(args: string[], env: Record<string, string | undefined>): Running {
  const child = spawn(process.execPath, ['--import', 'tsx', 'scripts/hive/main.ts', ...args], {
    cwd: ROOT,
    env: { ...process.env, HIVE_TOKEN: undefined, HIVE_PASSWORD: undefined, ...env },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  child.stdin.end();
  let stdout = '';
  let stderr = '';
  const waiters: { pattern: RegExp; resolve: (line: string) => void }[] = [];
  const settle = () => {
    for (const waiter of [...waiters]) {
      const found = stdout.split('\n').find((line) => waiter.pattern.test(line));
      if (found !== undefined) {
        waiters.splice(waiters.indexOf(waiter), 1);
        waiter.resolve(found);
      }
    }
  };
  child.stdout.on('data', (chunk) => {
    stdout += chunk;
    settle();
  });
  child.stderr.on('data', (chunk) => (stderr += chunk));
  const done = new Promise<Run>((resolve) => {
    child.on('close', (code) => {
      const json = (text: string) => text.split('\n').filter((line) => line.startsWith('{')).map((line) => JSON.parse(line));
      resolve({ code, stdout, stderr, lines: json(stdout), error: json(stderr)[0] ?? null });
    });
  });
  return {
    done,
    line: (pattern) =>
      new Promise((resolve, reject) => {
        waiters.push({ pattern, resolve });
        // The line may have come before anyone asked for it.
        settle();
        void done.then((run) => reject(new Error(`the client ended (${run.code}) without printing ${pattern}:\n${run.stdout}\n${run.stderr}`)));
      }),
  };
}

let world: HiveWorld;
let owner: HiveOwner;
let member: { configDir: string; email: string };
/** The client as the member admitted by the device flow (their saved credential). */
const hive = (...args: string[]) => startHive(args, { HIVE_URL: world.baseUrl, HIVE_CONFIG_DIR: member.configDir }).done;
const sha256 = (text: string) => createHash('sha256').update(text).digest();

beforeAll(async () => {
  world = await startHiveWorld();
  owner = await signUp(world, 'clientco');
  await createNode(world, owner.token, 'clientco', 'app');
});
afterAll(async () => {
  await world?.close();
  rmSync(scratch, { recursive: true, force: true });
});

describe('npm run hive -- login (device flow)', () => {
  it('shows a code, waits for an admin to approve it, and saves the token in a 0600 file, in both forms', async () => {
    member = { configDir: newConfigDir(), email: 'dev@clientco.test' };
    const readerDir = newConfigDir();
    const agent = startHive(['login', '--json'], { HIVE_URL: world.baseUrl, HIVE_CONFIG_DIR: member.configDir });
    const person = startHive(['login', '--server', world.baseUrl], { HIVE_CONFIG_DIR: readerDir });

    const pending = JSON.parse(await agent.line(/"status":"pending"/));
    expect(pending).toEqual({ status: 'pending', user_code: expect.stringMatching(/^[A-Z]{4}-[A-Z]{4}$/), verification_uri: expect.stringMatching(/\/v1\/device$/), expires_in: 900 });
    const shown = (await person.line(/enter the code/)).match(/enter the code ([A-Z]{4}-[A-Z]{4})/)![1]!;

    // The admin approves each code through the API, as the device page does.
    const approved = await world.post('/v1/device/approve', owner.token, { code: pending.user_code, email: member.email, node: 'clientco/app', role: 'member' });
    expect(approved.status).toBe(200);
    expect((await world.post('/v1/device/approve', owner.token, { code: shown.toLowerCase(), email: 'reader@clientco.test', node: 'clientco', role: 'reader' })).status).toBe(200);

    const agentRun = await agent.done;
    expect(agentRun.code).toBe(0);
    expect(agentRun.lines).toHaveLength(2);
    expect(agentRun.lines[1]).toMatchObject({
      status: 'approved',
      server: world.baseUrl,
      token_id: expect.stringMatching(/^tok_/),
      person: { email: member.email },
      organisation: { name: 'clientco' },
      grants: [{ node: { path: 'clientco/app' }, role: 'member' }],
      credentials_file: path.join(member.configDir, 'credentials.json'),
    });
    expect(agentRun.stdout).not.toMatch(/hvt_/);

    const personRun = await person.done;
    expect(personRun.code).toBe(0);
    expect(personRun.stdout).toContain(`Signed in to ${world.baseUrl} as reader@clientco.test (clientco); reader on clientco.`);
    expect(personRun.stderr).toContain('Waiting for approval');

    const file = path.join(member.configDir, 'credentials.json');
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(statSync(member.configDir).mode & 0o777).toBe(0o700);
    const saved = JSON.parse(readFileSync(file, 'utf8'));
    expect(saved).toMatchObject({ server: world.baseUrl, token: expect.stringMatching(/^hvt_/), token_id: agentRun.lines[1].token_id, via: 'login', person: { email: member.email }, machine: null });

    // The store: a live device token of the member, and the code gone after its one poll.
    const { rows } = await world.hive.db.query(
      `SELECT t.id, t.name, t.revoked_at, p.email FROM hive.tokens t JOIN hive.people p ON p.id = t.person_id WHERE t.token_hash = $1`,
      [sha256(saved.token)],
    );
    expect(rows).toEqual([{ id: saved.token_id, name: 'device', revoked_at: null, email: member.email }]);
    const { rows: codes } = await world.hive.db.query(`SELECT count(*)::int AS n FROM hive.device_codes`);
    expect(codes[0].n).toBe(0);
  }, 60_000);
});

describe('npm run hive -- with the saved credential', () => {
  let fridays: string;
  let pinned: string;

  it('whoami: the organisation, person and grants', async () => {
    const human = await hive('whoami');
    expect(human.code).toBe(0);
    expect(human.stdout).toContain(`Server:        ${world.baseUrl}`);
    expect(human.stdout).toMatch(/Organisation:  clientco \(org_\w+\)/);
    expect(human.stdout).toMatch(/Person:        dev@clientco\.test \(per_\w+\)\n/);
    expect(human.stdout).toContain('Grants:        member on clientco/app');

    const json = await hive('whoami', '--json');
    expect(json.lines[0]).toMatchObject({ organisation: { name: 'clientco' }, token: { kind: 'person' }, person: { email: member.email }, grants: [{ role: 'member', node: { path: 'clientco/app' } }], client: { server: world.baseUrl, machine: null } });
  });

  it('remember: creates, refines, and is refused by a guard, in both forms', async () => {
    const human = await hive('remember', '--node', 'clientco/app', '--scope', 'release', '--title', 'Never deploy on Fridays', '--body', 'Releases wait for Monday.', '--kind', 'decision', '--source', 'session s1');
    expect(human.code).toBe(0);
    const [, id] = human.stdout.match(/^Remembered "Never deploy on Fridays" \(decision, v1\) (mem_\w{24})\n {2}in clientco\/app, scope release\n$/)!;
    fridays = id!;

    const bodyFile = path.join(scratch, 'body.md');
    writeFileSync(bodyFile, 'Wrap every error with its context.\nNever swallow one.');
    const created = await hive('remember', '--json', '--node', 'clientco/app', '--title', 'Error handling', '--body-file', bodyFile, '--pin', '--kind', 'preference');
    expect(created.code).toBe(0);
    expect(created.lines[0]).toMatchObject({ result: 'created', memory: { title: 'Error handling', body: 'Wrap every error with its context.\nNever swallow one.', pinned: true, kind: 'preference', scope: 'general', version: 1 } });
    pinned = created.lines[0].memory.id;

    // Refining a pinned memory is refused (409) until forced.
    const refused = await hive('remember', '--json', '--node', 'clientco/app', '--title', 'error handling.', '--body', 'Errors may be swallowed.', '--kind', 'preference');
    expect(refused.code).toBe(1);
    expect(refused.stdout).toBe('');
    expect(refused.error).toEqual({ error: expect.stringMatching(/is pinned/), status: 409 });
    const refusedHuman = await hive('remember', '--node', 'clientco/app', '--title', 'error handling.', '--body', 'Errors may be swallowed.', '--kind', 'preference');
    expect(refusedHuman.code).toBe(1);
    expect(refusedHuman.stderr).toMatch(/^hive: "Error handling" is pinned .* \(HTTP 409\)\n$/);

    const refined = await hive('remember', '--node', 'clientco/app', '--title', 'error handling.', '--body', 'Wrap every error with its context; log it once.', '--kind', 'preference', '--force');
    expect(refined.stdout).toMatch(new RegExp(`^Refined "error handling." \\(preference, pinned, v2\\) ${pinned}`));

    const saved = JSON.parse(readFileSync(path.join(member.configDir, 'credentials.json'), 'utf8'));
    const { rows } = await world.hive.db.query(
      `SELECT m.id, m.title, m.body, m.kind, m.scope, m.version, m.created_token, m.created_source, p.email
         FROM hive.memories m JOIN hive.people p ON p.id = m.created_by ORDER BY m.created_at`,
    );
    expect(rows).toEqual([
      { id: fridays, title: 'Never deploy on Fridays', body: 'Releases wait for Monday.', kind: 'decision', scope: 'release', version: 1, created_token: saved.token_id, created_source: 'session s1', email: member.email },
      { id: pinned, title: 'error handling.', body: 'Wrap every error with its context; log it once.', kind: 'preference', scope: 'general', version: 2, created_token: saved.token_id, created_source: null, email: member.email },
    ]);
  }, 60_000);

  it('recall: ranked matches, in both forms', async () => {
    const human = await hive('recall', 'deploy', 'on', 'fridays');
    expect(human.code).toBe(0);
    expect(human.stdout).toContain(`1. Never deploy on Fridays  [decision]  ${fridays}\n   clientco/app · release · score `);
    expect(human.stdout).toContain('   Releases wait for Monday.');
    expect(human.stdout).not.toContain('Error handling');

    const json = await hive('recall', '--json', 'error', 'context', '--limit', '5', '--node', 'clientco/app');
    expect(json.code).toBe(0);
    expect(json.lines[0]).toMatchObject({ object: 'list', query: 'error context', data: [{ memory: { id: pinned, pinned: true }, matched: { text: true } }] });

    const nothing = await hive('recall', 'kubernetes');
    expect(nothing.stdout).toContain('Nothing recalled for "kubernetes".');
  });

  it('brief: the pinned preference, and a session only when asked', async () => {
    const human = await hive('brief', '--node', 'clientco/app');
    expect(human.code).toBe(0);
    expect(human.stdout).toMatch(/^Brief for clientco\/app \(\d+ of 2000 tokens\)\n/);
    expect(human.stdout).toContain(`## preferences\n- [preference] error handling.`);
    const session = human.stdout.match(/Session (ses_\w{24}) opened/)![1];

    const json = await hive('brief', '--json', '--node', 'clientco/app', '--budget', '100', '--no-session');
    expect(json.lines[0]).toMatchObject({ object: 'brief', budget_tokens: 100, session: null, sections: { preferences: [{ id: pinned }] } });

    const { rows } = await world.hive.db.query(`SELECT id FROM hive.sessions`);
    expect(rows).toEqual([{ id: session }]);
  });

  it('task: add, due, done and list, in both forms', async () => {
    const due = new Date(Date.now() + 3_600_000).toISOString();
    const added = await hive('task', 'add', '--node', 'clientco/app', '--title', 'Write the release notes', '--due', due, '--assignee', 'me');
    expect(added.code).toBe(0);
    const [, id] = added.stdout.match(/^Added (tsk_\w{24}) {2}\[open\] Write the release notes {2}\(clientco\/app · due .* · for dev@clientco\.test\)\n$/)!;

    const notYet = await hive('task', 'due', '--json');
    expect(notYet.lines[0].data).toEqual([]);
    const within = await hive('task', 'due', '--json', '--within-hours', '2');
    expect(within.lines[0].data).toEqual([expect.objectContaining({ id, due_at: due, assignee: { id: expect.any(String), email: member.email } })]);

    const done = await hive('task', 'done', id!, '--note', 'Published on the wiki.', '--json');
    expect(done.lines[0]).toMatchObject({ id, status: 'done', closed: { note: 'Published on the wiki.' } });
    const again = await hive('task', 'done', id!);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain('(HTTP 409)');

    const listed = await hive('task', 'list', '--status', 'done');
    expect(listed.stdout).toBe(`${id}  [done] Write the release notes  (clientco/app · due ${due.slice(0, 16).replace('T', ' ')} UTC · for dev@clientco.test)\n`);
    const { rows } = await world.hive.db.query(`SELECT status, close_note FROM hive.tasks WHERE id = $1`, [id]);
    expect(rows).toEqual([{ status: 'done', close_note: 'Published on the wiki.' }]);
  }, 60_000);

  it('forget: leaves a tombstone; a pinned memory needs --force', async () => {
    const human = await hive('forget', fridays);
    expect(human.code).toBe(0);
    expect(human.stdout).toBe(`Forgot "Never deploy on Fridays" ${fridays} (clientco/app, scope release); a tombstone remains.\n`);

    const refused = await hive('forget', '--json', pinned);
    expect(refused.code).toBe(1);
    expect(refused.error).toEqual({ error: expect.stringMatching(/pinned/), status: 409 });
    const forced = await hive('forget', '--json', pinned, '--force');
    expect(forced.lines[0]).toMatchObject({ id: pinned, status: 'forgotten', body: null });

    const { rows } = await world.hive.db.query(`SELECT id, body, forgotten_at IS NOT NULL AS gone FROM hive.memories ORDER BY created_at`);
    expect(rows).toEqual([{ id: fridays, body: '', gone: true }, { id: pinned, body: '', gone: true }]);
    expect((await hive('recall', '--json', 'deploy fridays')).lines[0].data).toEqual([]);
  });

  it('export: JSON lines to stdout, or a file with a summary', async () => {
    await hive('remember', '--node', 'clientco/app', '--title', 'Logging library', '--body', 'We use pino.');
    const streamed = await hive('export', '--node', 'clientco/app');
    expect(streamed.code).toBe(0);
    const records = streamed.lines;
    expect(records[0]).toMatchObject({ type: 'export', node: { path: 'clientco/app' } });
    const end = records.at(-1);
    expect(end.type).toBe('end');
    const memories = records.filter((record) => record.type === 'memory');
    expect(memories.map((record) => record.title).sort()).toEqual(['Logging library', 'Never deploy on Fridays', 'error handling.']);
    expect(end.counts.memory).toBe(3);
    const { rows } = await world.hive.db.query(`SELECT count(*)::int AS n FROM hive.memories m JOIN hive.nodes n ON n.id = m.node_id WHERE n.name_path = 'clientco/app'`);
    expect(rows[0].n).toBe(3);

    const out = path.join(scratch, 'app.jsonl');
    const human = await hive('export', '--node', 'clientco/app', '--out', out);
    expect(human.stdout).toMatch(new RegExp(`^Exported clientco/app to ${out.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: .*memory 3[,.]`));
    const json = await hive('export', '--json', '--node', 'clientco/app', '--out', out);
    expect(json.lines).toEqual([{ node: 'clientco/app', file: out, counts: end.counts }]);
    const written = readFileSync(out, 'utf8').trim().split('\n').map((line) => JSON.parse(line));
    expect(written.filter((record) => record.type === 'memory')).toHaveLength(3);
    expect(statSync(out).mode & 0o777).toBe(0o600);

    const refused = await hive('export', '--node', 'clientco');
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('(HTTP 403)');
  });
});

describe('npm run hive -- enrol and machines', () => {
  it('enrols this machine by password: a key made here, its certificate checked and stored with it in the 0600 file', async () => {
    const configDir = newConfigDir();
    const wrong = await startHive(['enrol', '--email', owner.email, '--password', 'not the right password', '--name', 'laptop-1'], { HIVE_URL: world.baseUrl, HIVE_CONFIG_DIR: configDir }).done;
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toContain('(HTTP 401)');
    expect(() => statSync(path.join(configDir, 'credentials.json'))).toThrow(/ENOENT/);

    // The password from HIVE_PASSWORD, so that it is not on the command line.
    const enrolled = await startHive(['enrol', '--json', '--email', owner.email, '--name', 'laptop-1'], { HIVE_URL: world.baseUrl, HIVE_CONFIG_DIR: configDir, HIVE_PASSWORD: 'correct horse battery staple' }).done;
    expect(enrolled.code).toBe(0);
    const answer = enrolled.lines[0];
    expect(answer).toMatchObject({
      machine: { id: expect.stringMatching(/^mch_/), name: 'laptop-1', kind: 'temporary', expires_at: expect.any(String) },
      relay: expect.stringMatching(/^https:\/\//),
      certificate: { fingerprint256: expect.stringMatching(/^([0-9A-F]{2}:){31}[0-9A-F]{2}$/) },
      credentials_file: path.join(configDir, 'credentials.json'),
    });
    expect(enrolled.stdout).not.toMatch(/PRIVATE KEY|hvt_/);

    const file = path.join(configDir, 'credentials.json');
    expect(statSync(file).mode & 0o777).toBe(0o600);
    const saved = JSON.parse(readFileSync(file, 'utf8'));
    expect(saved).toMatchObject({ server: world.baseUrl, via: 'enrol', person: { email: owner.email }, machine: { id: answer.machine.id, name: 'laptop-1', kind: 'temporary', relay: answer.relay } });
    const certificate = new X509Certificate(saved.machine.certificate);
    expect(certificate.checkPrivateKey(createPrivateKey(saved.machine.private_key))).toBe(true);
    expect(certificate.verify(new X509Certificate(saved.machine.ca_certificate).publicKey)).toBe(true);
    expect(certificate.subject).toContain(`CN=${answer.machine.id}`);
    expect(certificate.fingerprint256).toBe(answer.certificate.fingerprint256);

    // The store: the machine, with the token the file holds.
    const { rows } = await world.hive.db.query(
      `SELECT m.name, m.kind, m.token_id, t.token_hash FROM hive.machines m JOIN hive.tokens t ON t.id = m.token_id WHERE m.id = $1`,
      [answer.machine.id],
    );
    expect(rows).toEqual([{ name: 'laptop-1', kind: 'temporary', token_id: saved.token_id, token_hash: sha256(saved.token) }]);

    const asMachine = (...args: string[]) => startHive(args, { HIVE_URL: world.baseUrl, HIVE_CONFIG_DIR: configDir }).done;
    const who = await asMachine('whoami');
    expect(who.stdout).toContain(`Machine:       laptop-1 (${answer.machine.id}, temporary, expires ${answer.machine.expires_at.slice(0, 10)})`);
    expect(who.stdout).toContain(`Person:        ${owner.email}`);

    const listed = await asMachine('machines');
    expect(listed.code).toBe(0);
    expect(listed.stdout).toContain(`${answer.machine.id}  laptop-1  temporary  active  expires ${answer.machine.expires_at.slice(0, 10)}  (enrolled `);
    const json = await asMachine('machines', '--json');
    expect(json.lines[0].machines).toEqual([expect.objectContaining({ id: answer.machine.id, name: 'laptop-1', kind: 'temporary', status: 'active' })]);

    // The member admitted by the device flow has none of their own.
    expect((await hive('machines')).stdout).toBe('No machines enrolled.\n');
  }, 60_000);
});

describe('npm run hive -- dashboard', () => {
  it('prints a one-time link that signs the browser in as the person once, and only once', async () => {
    const human = await hive('dashboard');
    expect(human.code).toBe(0);
    const link = /^  (http\S+)$/m.exec(human.stdout)?.[1];
    expect(link).toMatch(new RegExp(`^${world.baseUrl}/dashboard/open\\?code=`));

    const json = await hive('dashboard', '--json');
    expect(json.lines[0]).toMatchObject({ url: expect.stringContaining('/dashboard/open?code='), code: expect.any(String), expires_at: expect.any(String) });

    const opened = await fetch(link!, { redirect: 'manual' });
    expect(opened.status).toBe(303);
    expect(opened.headers.get('location')).toBe('/dashboard');
    expect(opened.headers.get('set-cookie')).toMatch(/HttpOnly/i);
    const again = await fetch(link!, { redirect: 'manual' });
    expect(again.status).toBe(401);
  });
});

describe('npm run hive -- where the credential comes from', () => {
  it('refuses without one, never sends a saved token to another server, and takes HIVE_TOKEN', async () => {
    const none = await startHive(['whoami', '--json'], { HIVE_URL: world.baseUrl, HIVE_CONFIG_DIR: newConfigDir() }).done;
    expect(none.code).toBe(1);
    expect(none.error.error).toMatch(/^Not logged in/);

    const elsewhere = await startHive(['whoami', '--server', 'http://127.0.0.1:9'], { HIVE_URL: undefined, HIVE_CONFIG_DIR: member.configDir }).done;
    expect(elsewhere.code).toBe(1);
    expect(elsewhere.stderr).toBe(`hive: The saved credential is for ${world.baseUrl}, not http://127.0.0.1:9; log in to http://127.0.0.1:9 (with another HIVE_CONFIG_DIR to keep both).\n`);

    const grant = await world.post('/v1/token/create', owner.token, { node: 'clientco/app', role: 'reader', name: 'ci' });
    const asGrant = await startHive(['whoami', '--json'], { HIVE_URL: world.baseUrl, HIVE_CONFIG_DIR: newConfigDir(), HIVE_TOKEN: grant.body.token }).done;
    expect(asGrant.lines[0]).toMatchObject({ token: { id: grant.body.id, kind: 'grant' }, person: null, grants: [{ role: 'reader', node: { path: 'clientco/app' } }] });

    const usage = await hive('remember', '--node', 'clientco/app');
    expect(usage.code).toBe(2);
    expect(usage.stderr).toBe('hive: --title is required.\n');
    const unknown = await hive('remember', '--node', 'clientco/app', '--colour', 'blue');
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/Unknown option '--colour'/);
  });
});
