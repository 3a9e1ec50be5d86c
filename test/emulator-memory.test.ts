import type http from 'node:http';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listen, serverUrl } from '../shared/platform/http-server.js';
import { createEmulatorCredentials } from '../shared/emulator/core.js';
import {
  answerMemoryLearning,
  consolidateMemories,
  contentWords,
  extractEntities,
  extractMemories,
  judgeMemories,
  parseStatement,
  splitSentences,
  thirdPersonBody,
} from '../shared/emulator/memory-learning.js';
import { createEmulatorApp } from '../shared/emulator/server.js';
import { openAiCompatibleStyle } from '../shared/emulator/styles/openai-compatible.js';

const SPEC_TRANSCRIPT = [
  'user: I prefer tabs over spaces.',
  'assistant: Noted.',
  'user: Alice uses PostgreSQL (also called Postgres) for billing. The deploy target is Kubernetes.',
].join('\n');
const SPEC_RECALLED = '[ent_abc] The deploy target is Kubernetes.\n[ent_def] The user prefers dark mode.';

const extractionPrompt = (transcript: string, recalled?: string) =>
  `<transcript>\n${transcript}\n</transcript>${recalled === undefined ? '' : `\n<recalled>\n${recalled}\n</recalled>`}`;
const judgementPrompt = (stored: string, incoming: string) => `<stored>${stored}</stored>\n<incoming>${incoming}</incoming>`;
const consolidationPrompt = (lines: string[]) => `<memories>\n${lines.join('\n')}\n</memories>`;

const SPEC_MEMORIES = [
  { type: 'preference', tier: 'B', title: 'user prefers', body: 'The user prefers tabs over spaces.', negated: false, entities: [], relations: [] },
  {
    type: 'fact',
    tier: 'B',
    title: 'alice uses',
    body: 'Alice uses PostgreSQL (also called Postgres) for billing.',
    negated: false,
    entities: [
      { name: 'Alice', aliases: [] },
      { name: 'PostgreSQL', aliases: ['Postgres'] },
    ],
    relations: [{ from: 'Alice', relation: 'uses', to: 'PostgreSQL' }],
  },
  { type: 'fact', tier: 'B', title: 'deploy target is', body: 'The deploy target is Kubernetes.', negated: false, entities: [{ name: 'Kubernetes', aliases: [] }], relations: [] },
];

describe('memory extraction', () => {
  it('extracts the memories of the user lines of a transcript', () => {
    expect(extractMemories(`Extract.\n${extractionPrompt(SPEC_TRANSCRIPT, SPEC_RECALLED)}`)).toEqual({ ignored: false, memories: SPEC_MEMORIES, used_entry_ids: [] });
  });

  it('lists the recalled entries that share two content words with what the assistant said, in recalled order', () => {
    const transcript = 'user: Where do we deploy?\nassistant: The deploy target stays Kubernetes, and dark mode is on.';
    const recalled = `${SPEC_RECALLED}\n[ent_ghi] Kubernetes is great.\nnot an entry line`;
    expect(extractMemories(extractionPrompt(transcript, recalled))).toEqual({ ignored: true, memories: [], used_entry_ids: ['ent_abc', 'ent_def'] });
  });

  it('ignores small talk, questions and what the assistant says', () => {
    const transcript = 'user: hi\nassistant: Hello! I prefer Vim.\nuser: thanks\nuser: How are you?\nuser: ok';
    expect(extractMemories(extractionPrompt(transcript, ''))).toEqual({ ignored: true, memories: [], used_entry_ids: [] });
  });

  it('reads a line without a prefix as the continuation of the line before, and a line break as a sentence end', () => {
    const transcript = 'stray line before any turn\r\nuser: We use GitHub\r\nAlice works at Acme Corp\r\nassistant: Good.';
    const { memories } = extractMemories(extractionPrompt(transcript));
    expect(memories.map(({ title, body, relations }) => ({ title, body, relations }))).toEqual([
      { title: 'team uses', body: 'The team uses GitHub.', relations: [] },
      { title: 'alice works at', body: 'Alice works at Acme Corp.', relations: [{ from: 'Alice', relation: 'works at', to: 'Acme Corp' }] },
    ]);
  });

  it('gives one memory per sentence, negated when it denies, relating nothing then', () => {
    const { memories } = extractMemories(extractionPrompt('user: Alice doesn\'t use MySQL! Bob prefers Vim over Emacs.'));
    expect(memories).toEqual([
      {
        type: 'fact',
        tier: 'B',
        title: 'alice uses',
        body: "Alice doesn't use MySQL.",
        negated: true,
        entities: [
          { name: 'Alice', aliases: [] },
          { name: 'MySQL', aliases: [] },
        ],
        relations: [],
      },
      {
        type: 'preference',
        tier: 'B',
        title: 'bob prefers',
        body: 'Bob prefers Vim over Emacs.',
        negated: false,
        entities: [
          { name: 'Bob', aliases: [] },
          { name: 'Vim', aliases: [] },
          { name: 'Emacs', aliases: [] },
        ],
        relations: [{ from: 'Bob', relation: 'prefers', to: 'Vim' }],
      },
    ]);
  });

  it('gives each type its tier', () => {
    const transcript = [
      'user: We decided to migrate billing to AWS. Never deploy on Fridays. I love Rust.',
      'user: The billing migration is currently blocked. To deploy, run make deploy. Kubernetes runs on AWS. Bob joined Acme Corp last week.',
    ].join('\n');
    const { memories } = extractMemories(extractionPrompt(transcript));
    expect(memories.map(({ type, tier, title }) => [type, tier, title])).toEqual([
      ['decision', 'A', 'decision migrate billing aws'],
      ['constraint', 'A', 'constraint deploy fridays'],
      ['preference', 'B', 'user prefers'],
      ['status', 'D', 'status billing migration'],
      ['procedure', 'B', 'procedure deploy'],
      ['fact', 'B', 'kubernetes runs on'],
      ['observation', 'C', 'observation bob'],
    ]);
  });

  it('answers the empty extraction without a transcript', () => {
    expect(extractMemories('<recalled>[ent_abc] x</recalled>')).toEqual({ ignored: true, memories: [], used_entry_ids: [] });
  });
});

describe('reading sentences into statements', () => {
  it('splits sentences at . ! ? followed by a space or the end, and at line breaks', () => {
    expect(splitSentences('Alice uses Node.js. Really!  Why?\nNo period here\n\n')).toEqual(['Alice uses Node.js.', 'Really!', 'Why?', 'No period here']);
  });

  it('reads a sentence without its leading discourse marker, as a person correcting themselves says it', () => {
    expect(splitSentences('Actually, the staging cluster is Atlas. By the way I prefer tabs. So.')).toEqual(['The staging cluster is Atlas.', 'I prefer tabs.', 'So.']);
    const [memory] = extractMemories(extractionPrompt('user: Actually I do not prefer deployments on Tuesdays.')).memories;
    expect(memory).toMatchObject({ type: 'preference', negated: true, body: 'The user does not prefer deployments on Tuesdays.' });
  });

  it('reads decisions: we is the team, I is the user, "decided not to" is negated', () => {
    expect(parseStatement('We decided to migrate billing to AWS.')).toEqual({ type: 'decision', subject: 'team', verb: 'decided', object: 'migrate billing to AWS', negated: false, title: 'decision migrate billing aws' });
    expect(parseStatement('I chose Go')).toMatchObject({ type: 'decision', subject: 'user', object: 'Go', title: 'decision' });
    expect(parseStatement('We decided not to use Redis.')).toEqual({ type: 'decision', subject: 'team', verb: 'decided', object: 'use Redis', negated: true, title: 'decision redis' });
  });

  it('reads constraints as rules, never negated: prohibitions forbid, the rest requires', () => {
    expect(parseStatement('Never deploy on Fridays.')).toEqual({ type: 'constraint', subject: 'rule', verb: 'forbids', object: 'deploy on fridays', negated: false, title: 'constraint deploy fridays' });
    expect(parseStatement("Don't commit secrets.")).toMatchObject({ verb: 'forbids', object: 'commit secrets', negated: false, title: 'constraint commit secrets' });
    expect(parseStatement('Always run the tests before merging.')).toMatchObject({ verb: 'requires', object: 'run the tests before merging', title: 'constraint run tests before' });
    expect(parseStatement('Deploys must go through CI.')).toMatchObject({ verb: 'requires', object: 'deploys must go through ci', title: 'constraint deploys through' });
    expect(parseStatement('Releases must not skip review.')).toMatchObject({ type: 'constraint', verb: 'forbids' });
  });

  it('reads preferences of I / we (the user) and of a name, hate and dislike as negated', () => {
    expect(parseStatement('I prefer tabs over spaces.')).toEqual({ type: 'preference', subject: 'user', verb: 'prefers', object: 'tabs over spaces', negated: false, title: 'user prefers' });
    expect(parseStatement('We really like Go.')).toMatchObject({ subject: 'user', object: 'Go', negated: false });
    expect(parseStatement('Bob prefers Vim over Emacs.')).toMatchObject({ subject: 'bob', title: 'bob prefers' });
    expect(parseStatement('I hate meetings.')).toMatchObject({ type: 'preference', object: 'meetings', negated: true });
    expect(parseStatement('Alice dislikes Java')).toMatchObject({ subject: 'alice', negated: true });
    expect(parseStatement("I don't like Java.")).toMatchObject({ type: 'preference', object: 'Java', negated: true });
    expect(parseStatement("I don't hate Java.")).toMatchObject({ type: 'preference', negated: false });
    expect(parseStatement('The user prefers dark mode.')).toMatchObject({ type: 'preference', subject: 'user' });
  });

  it('reads status: the subject is the words before the verb', () => {
    expect(parseStatement('The billing migration is currently blocked.')).toEqual({ type: 'status', subject: 'billing migration', verb: 'is', object: 'blocked', negated: false, title: 'status billing migration' });
    expect(parseStatement("I'm currently debugging the parser.")).toMatchObject({ type: 'status', subject: 'user', title: 'status user' });
    expect(parseStatement('Right now, Alice is on call.')).toMatchObject({ type: 'status', subject: 'alice', object: 'on call' });
    expect(parseStatement('Billing migration in progress.')).toMatchObject({ type: 'status', subject: 'billing migration', object: 'in progress' });
    expect(parseStatement('The deploy is not blocked.')).toMatchObject({ type: 'status', subject: 'deploy', negated: true });
  });

  it('reads procedures: to <goal>, <steps>', () => {
    expect(parseStatement('To deploy, run make deploy.')).toEqual({ type: 'procedure', subject: 'deploy', verb: 'is done by', object: 'run make deploy', negated: false, title: 'procedure deploy' });
    expect(parseStatement('To rotate the API keys, open the admin console.')).toMatchObject({ title: 'procedure rotate api keys' });
  });

  it('reads facts with canonical verbs, without a leading article or possessive', () => {
    expect(parseStatement('The deploy target is Kubernetes.')).toEqual({ type: 'fact', subject: 'deploy target', verb: 'is', object: 'Kubernetes', negated: false, title: 'deploy target is' });
    expect(parseStatement('Our servers are in Europe.')).toMatchObject({ subject: 'servers', verb: 'is', title: 'servers is' });
    expect(parseStatement('We have two clusters.')).toMatchObject({ subject: 'team', verb: 'has', object: 'two clusters' });
    expect(parseStatement('I use Neovim.')).toMatchObject({ subject: 'user', verb: 'uses', title: 'user uses' });
    expect(parseStatement('Kubernetes (also called K8s) runs on AWS.')).toMatchObject({ subject: 'kubernetes', verb: 'runs on', object: 'AWS' });
    expect(parseStatement('Alice still lives in New York.')).toMatchObject({ subject: 'alice', verb: 'lives in', title: 'alice lives in' });
    expect(parseStatement('Billing depends on Stripe.')).toMatchObject({ verb: 'depends on', title: 'billing depends on' });
  });

  it('removes negation words and keeps the verb', () => {
    for (const sentence of ['Alice does not use MySQL.', "Alice doesn't use MySQL.", 'Alice no longer uses MySQL.', 'Alice never uses MySQL.']) {
      expect(parseStatement(sentence)).toEqual({ type: 'fact', subject: 'alice', verb: 'uses', object: 'MySQL', negated: true, title: 'alice uses' });
    }
    expect(parseStatement("The deploy target isn't Heroku.")).toMatchObject({ verb: 'is', object: 'Heroku', negated: true });
    expect(parseStatement('The deploy target is not Heroku.')).toMatchObject({ verb: 'is', object: 'Heroku', negated: true });
    // A "not" after no auxiliary does not deny the statement.
    expect(parseStatement('I prefer tabs, not spaces.')).toMatchObject({ type: 'preference', negated: false });
  });

  it('notes any other sentence that names an entity as an observation of it', () => {
    expect(parseStatement('Bob joined Acme Corp last week.')).toEqual({ type: 'observation', subject: 'bob', verb: 'noted', object: 'bob joined acme corp last week', negated: false, title: 'observation bob' });
  });

  it('reads nothing from small talk and questions', () => {
    for (const sentence of ['hi', 'Thanks!', 'How are you?', 'Do you use Postgres?', 'ok', 'sounds good']) expect(parseStatement(sentence)).toBeUndefined();
  });
});

describe('entities', () => {
  it('finds runs of capitalised words and words with inner capitals, each once, skipping sentence starters', () => {
    expect(extractEntities('The team moved Alice to New York with iOS apps and AWS, and Alice stayed.')).toEqual([
      { name: 'Alice', aliases: [] },
      { name: 'New York', aliases: [] },
      { name: 'iOS', aliases: [] },
      { name: 'AWS', aliases: [] },
    ]);
    expect(extractEntities("Thanks, I think Bob's team uses GitHub.")).toEqual([
      { name: 'Bob', aliases: [] },
      { name: 'GitHub', aliases: [] },
    ]);
    expect(extractEntities('Acme Corp hired us.')).toEqual([{ name: 'Acme Corp', aliases: [] }]);
  });

  it('joins aliases to their entity', () => {
    expect(extractEntities('Alice uses PostgreSQL (also called Postgres) for billing.')).toEqual([
      { name: 'Alice', aliases: [] },
      { name: 'PostgreSQL', aliases: ['Postgres'] },
    ]);
    expect(extractEntities('Amazon Web Services (AWS) hosts PostgreSQL (aka PG).')).toEqual([
      { name: 'Amazon Web Services', aliases: ['AWS'] },
      { name: 'PostgreSQL', aliases: ['PG'] },
    ]);
    expect(extractEntities('Kubernetes, also known as K8s, runs on AWS.')).toEqual([
      { name: 'Kubernetes', aliases: ['K8s'] },
      { name: 'AWS', aliases: [] },
    ]);
    // "(the database)" is not entity-shaped, so it is no alias.
    expect(extractEntities('Postgres (the database) is fast.')).toEqual([{ name: 'Postgres', aliases: [] }]);
  });
});

describe('bodies and words', () => {
  it('rewrites a sentence to the third person, ending with a period', () => {
    expect(thirdPersonBody('I prefer tabs over spaces')).toBe('The user prefers tabs over spaces.');
    expect(thirdPersonBody("I'm on call this week!")).toBe('The user is on call this week.');
    expect(thirdPersonBody("I don't like Java.")).toBe("The user doesn't like Java.");
    expect(thirdPersonBody('I never push to main.')).toBe('The user never pushes to main.');
    expect(thirdPersonBody('I decided to use Go.')).toBe('The user decided to use Go.');
    expect(thirdPersonBody('We have two clusters.')).toBe('The team has two clusters.');
    expect(thirdPersonBody('My editor is Vim and I love my keyboard.')).toBe("The user's editor is Vim and I love the user's keyboard.");
    expect(thirdPersonBody('alice uses Go')).toBe('Alice uses Go.');
  });

  it('counts words of three characters or more that are not stopwords', () => {
    expect(contentWords("The deploy target doesn't use Kubernetes, and it's on AWS!")).toEqual(['deploy', 'target', 'kubernetes', 'aws']);
  });
});

describe('memory judgement', () => {
  const judgement = (stored: string, incoming: string) => judgeMemories(judgementPrompt(stored, incoming));

  it('answers contradicts, same, refines or unrelated', () => {
    expect(judgement('Alice uses PostgreSQL.', 'Alice no longer uses PostgreSQL.')).toEqual({ relation: 'contradicts', reason: 'one states and the other denies that alice uses postgresql' });
    expect(judgement('The user prefers tabs over spaces.', "The user doesn't prefer tabs over spaces.")).toMatchObject({ relation: 'contradicts' });
    expect(judgement('Alice uses PostgreSQL.', 'Alice uses PostgreSQL')).toEqual({ relation: 'same', reason: 'both state that alice uses postgresql' });
    expect(judgement('The deploy target is Kubernetes.', 'Deploy target is the Kubernetes!')).toMatchObject({ relation: 'same' });
    expect(judgement('Alice uses PostgreSQL.', 'Alice uses MySQL.')).toEqual({ relation: 'refines', reason: 'both state what alice uses, with a different object' });
    expect(judgement('Alice uses PostgreSQL.', 'Bob uses PostgreSQL.')).toEqual({ relation: 'unrelated', reason: 'they are about different subjects or relations' });
    expect(judgement('Alice uses PostgreSQL.', 'Alice works at Acme Corp.')).toMatchObject({ relation: 'unrelated' });
    expect(judgement('Alice uses PostgreSQL.', 'Alice does not use MySQL.')).toEqual({ relation: 'unrelated', reason: 'one denies something the other does not state' });
  });

  it('compares nothing without both tags or a statement in each', () => {
    const nothing = { relation: 'unrelated', reason: 'nothing to compare' };
    expect(judgeMemories('<stored>Alice uses PostgreSQL.</stored>')).toEqual(nothing);
    expect(judgement('Alice uses PostgreSQL.', 'hi')).toEqual(nothing);
  });
});

describe('memory consolidation', () => {
  it('merges every memory into one that replaces them all', () => {
    const prompt = consolidationPrompt([
      '[ent_1] (fact) alice uses: Alice uses PostgreSQL (also called Postgres).',
      '[ent_2] (fact) alice works at: Alice works at Acme Corp.',
      '[ent_3] (preference) bob prefers: Bob prefers Postgres.',
      '[ent_4] (fact) alice uses: Alice uses PostgreSQL (also called Postgres).',
    ]);
    expect(consolidateMemories(prompt)).toEqual({
      memories: [
        {
          type: 'fact',
          tier: 'B',
          title: 'alice summary',
          body: 'Alice uses PostgreSQL (also called Postgres). Alice works at Acme Corp. Bob prefers Postgres.',
          entities: [
            { name: 'Alice', aliases: [] },
            { name: 'PostgreSQL', aliases: ['Postgres'] },
            { name: 'Acme Corp', aliases: [] },
            { name: 'Bob', aliases: [] },
          ],
          relations: [
            { from: 'Alice', relation: 'uses', to: 'PostgreSQL' },
            { from: 'Alice', relation: 'works at', to: 'Acme Corp' },
            { from: 'Bob', relation: 'prefers', to: 'PostgreSQL' },
          ],
          replaces: ['ent_1', 'ent_2', 'ent_3', 'ent_4'],
        },
      ],
    });
  });

  it('takes the first of equally frequent types, its tier, and the first title when no body names an entity', () => {
    const prompt = consolidationPrompt(['[ent_1] (status) status deploy: The deploy is blocked.', '[ent_2] (constraint) constraint deploy fridays: Never deploy on fridays.']);
    expect(consolidateMemories(prompt).memories[0]).toMatchObject({ type: 'status', tier: 'D', title: 'status deploy', entities: [], relations: [], replaces: ['ent_1', 'ent_2'] });
    const custom = consolidationPrompt(['[a] (memory) : The deploy is blocked.', '[b] (memory) : The build is red.']);
    expect(consolidateMemories(custom).memories[0]).toMatchObject({ type: 'memory', tier: 'C', title: 'memory summary' });
  });

  it('merges nothing with fewer than two memories or without the tag', () => {
    expect(consolidateMemories(consolidationPrompt(['[ent_1] (fact) alice uses: Alice uses PostgreSQL.', 'not a memory line']))).toEqual({ memories: [] });
    expect(consolidateMemories('no tags at all')).toEqual({ memories: [] });
  });
});

describe('choosing the answer by schema name', () => {
  it('answers only the three memory-learning names', () => {
    expect(answerMemoryLearning('brain_memory_judgement', judgementPrompt('Alice uses Go.', 'Alice uses Go.'))).toMatchObject({ relation: 'same' });
    expect(answerMemoryLearning('brain_memory_consolidation', '')).toEqual({ memories: [] });
    expect(answerMemoryLearning('person', SPEC_TRANSCRIPT)).toBeUndefined();
    expect(answerMemoryLearning('constructor', SPEC_TRANSCRIPT)).toBeUndefined();
    expect(answerMemoryLearning(undefined, SPEC_TRANSCRIPT)).toBeUndefined();
  });
});

describe('through the chat completions endpoint', () => {
  let server: http.Server;
  let openai: OpenAI;

  beforeAll(async () => {
    const credentials = createEmulatorCredentials(['openai']);
    const { app } = createEmulatorApp({ credentials, latencyMs: 0, chunkIntervalMs: 0 }, [openAiCompatibleStyle]);
    server = await listen(app, 0, '127.0.0.1');
    openai = new OpenAI({ apiKey: credentials.apiKeys.openai, baseURL: `${serverUrl(server)}/openai/v1`, maxRetries: 0 });
  });

  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  const responseFormat = (name: string) => ({ type: 'json_schema' as const, json_schema: { name, schema: { type: 'object', properties: { memories: { type: 'array' } } } } });

  it('answers an extraction from the last user message, with usage counted as for any JSON answer', async () => {
    const completion = await openai.chat.completions.create({
      model: 'gpt-4o-mini',
      response_format: responseFormat('brain_memory_extraction'),
      messages: [
        { role: 'system', content: 'You extract durable memories.' },
        { role: 'user', content: extractionPrompt('user: I hate meetings.') },
        { role: 'assistant', content: 'ok' },
        { role: 'user', content: extractionPrompt(SPEC_TRANSCRIPT, SPEC_RECALLED) },
      ],
    });
    const content = completion.choices[0]!.message.content!;
    expect(JSON.parse(content)).toEqual({ ignored: false, memories: SPEC_MEMORIES, used_entry_ids: [] });
    expect(completion.choices[0]!.finish_reason).toBe('stop');
    expect(completion.usage!.completion_tokens).toBe(Math.ceil(content.length / 4));

    const other = await openai.chat.completions.create({ model: 'gpt-4o-mini', response_format: responseFormat('memories'), messages: [{ role: 'user', content: extractionPrompt(SPEC_TRANSCRIPT) }] });
    expect(Object.keys(JSON.parse(other.choices[0]!.message.content!))).toEqual(['memories']);
  });

  it('streams a judgement whose pieces join into the same JSON', async () => {
    const stream = await openai.chat.completions.create({
      model: 'gpt-4o-mini',
      stream: true,
      response_format: responseFormat('brain_memory_judgement'),
      messages: [{ role: 'user', content: judgementPrompt('Alice uses PostgreSQL.', 'Alice does not use PostgreSQL.') }],
    });
    let text = '';
    for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? '';
    expect(JSON.parse(text)).toEqual({ relation: 'contradicts', reason: 'one states and the other denies that alice uses postgresql' });
  });
});
