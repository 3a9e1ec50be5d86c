/**
 * The emulator's answers to the platform's three memory-learning prompts (brain learning: observe
 * a transcript, extract memories, judge a stored memory against an incoming one, consolidate
 * memories). A real model reads these prompts; the emulator instead applies small, fixed rules to
 * the tagged text of the last user message, so that learning is testable offline with exact
 * expected memories. The request's json_schema name picks the prompt:
 *
 * - `brain_memory_extraction`: `<transcript>` (`user:` / `assistant:` lines) and an optional
 *   `<recalled>` (`[id] content` lines) give `{ignored, memories, used_entry_ids}`;
 * - `brain_memory_judgement`: `<stored>` and `<incoming>` memory bodies give `{relation, reason}`;
 * - `brain_memory_consolidation`: `<memories>` (`[id] (type) title: body` lines) give
 *   `{memories: [one merged memory]}`.
 *
 * Missing or unreadable tags give the empty answer of the schema: these functions never throw,
 * as a model always answers something.
 *
 * Each sentence a user says is read into a statement {subject, verb, object, negated} by the
 * first rule that fits: decision, constraint, preference, status, procedure, fact, observation.
 * Questions and small talk fit none and teach nothing.
 */

export type MemoryType = 'decision' | 'constraint' | 'preference' | 'status' | 'procedure' | 'fact' | 'observation';
export type Tier = 'A' | 'B' | 'C' | 'D';

export const TIER_OF_TYPE: Readonly<Record<MemoryType, Tier>> = {
  decision: 'A',
  constraint: 'A',
  fact: 'B',
  preference: 'B',
  procedure: 'B',
  observation: 'C',
  status: 'D',
};

/** What one sentence states; subjects are lowercased, objects are kept as written. */
export interface Statement {
  type: MemoryType;
  subject: string;
  verb: string;
  object: string;
  negated: boolean;
  title: string;
}

export interface Entity {
  name: string;
  aliases: string[];
}

export interface Relation {
  from: string;
  relation: string;
  to: string;
}

export interface ExtractedMemory {
  type: MemoryType;
  tier: Tier;
  title: string;
  body: string;
  negated: boolean;
  entities: Entity[];
  relations: Relation[];
}

export interface MemoryExtraction {
  ignored: boolean;
  memories: ExtractedMemory[];
  used_entry_ids: string[];
}

export interface MemoryJudgement {
  relation: 'contradicts' | 'same' | 'refines' | 'unrelated';
  reason: string;
}

export interface ConsolidatedMemory {
  type: string;
  tier: Tier;
  title: string;
  body: string;
  entities: Entity[];
  relations: Relation[];
  replaces: string[];
}

export interface MemoryConsolidation {
  memories: ConsolidatedMemory[];
}

const ANSWERS = new Map<string, (prompt: string) => unknown>([
  ['brain_memory_extraction', extractMemories],
  ['brain_memory_judgement', judgeMemories],
  ['brain_memory_consolidation', consolidateMemories],
]);

/** The answer to a memory-learning prompt, or undefined when the schema name is not one of them. */
export function answerMemoryLearning(schemaName: string | undefined, prompt: string): unknown {
  return schemaName === undefined ? undefined : ANSWERS.get(schemaName)?.(prompt);
}

// ---------------------------------------------------------------------------------------------
// The three answers

export function extractMemories(prompt: string): MemoryExtraction {
  const transcript = tagContent(prompt, 'transcript');
  if (transcript === undefined) return { ignored: true, memories: [], used_entry_ids: [] };
  const turns = parseTranscript(transcript);
  const textOf = (role: Turn['role']) => turns.filter((turn) => turn.role === role).map((turn) => turn.text);
  const memories = textOf('user')
    .flatMap(splitSentences)
    .flatMap((sentence) => memoryOf(sentence) ?? []);
  const usedEntryIds = usedRecalledIds(tagContent(prompt, 'recalled') ?? '', textOf('assistant').join('\n'));
  return { ignored: memories.length === 0, memories, used_entry_ids: usedEntryIds };
}

const NOTHING_TO_COMPARE: MemoryJudgement = { relation: 'unrelated', reason: 'nothing to compare' };

export function judgeMemories(prompt: string): MemoryJudgement {
  const stored = firstStatement(tagContent(prompt, 'stored') ?? '');
  const incoming = firstStatement(tagContent(prompt, 'incoming') ?? '');
  return stored && incoming ? judge(stored, incoming) : { ...NOTHING_TO_COMPARE };
}

export function consolidateMemories(prompt: string): MemoryConsolidation {
  const lines = (tagContent(prompt, 'memories') ?? '').split(/\r?\n/).flatMap((line) => memoryLineOf(line) ?? []);
  if (lines.length < 2) return { memories: [] };
  const readings = lines.flatMap((line) => splitSentences(line.body)).map(readSentence);
  const entities = mergeEntities(readings.flatMap((reading) => reading.entities));
  const relations = uniqueRelations(readings.flatMap((reading) => reading.relations).map((relation) => inCanonicalNames(relation, entities)));
  const type = mostFrequent(lines.map((line) => line.type));
  const firstEntity = entities[0];
  return {
    memories: [
      {
        type,
        tier: tierOf(type),
        title: firstEntity ? `${firstEntity.name.toLowerCase()} summary` : (lines.find((line) => line.title !== '')?.title ?? 'memory summary'),
        body: [...new Set(lines.map((line) => line.body))].join(' '),
        entities,
        relations,
        replaces: lines.map((line) => line.id),
      },
    ],
  };
}

// ---------------------------------------------------------------------------------------------
// Reading the prompts

/** The text between `<tag>` and `</tag>` (the first such pair), or undefined without one. */
function tagContent(prompt: string, tag: string): string | undefined {
  return new RegExp(`<${tag}>([\\s\\S]*?)</${tag}>`, 'i').exec(prompt)?.[1];
}

interface Turn {
  role: 'user' | 'assistant';
  text: string;
}

/** `user:` / `assistant:` lines; a line without either prefix continues the turn before it. */
function parseTranscript(transcript: string): Turn[] {
  const turns: Turn[] = [];
  for (const line of transcript.split(/\r?\n/)) {
    const turn = /^\s*(user|assistant)\s*:\s*(.*)$/i.exec(line);
    const last = turns.at(-1);
    if (turn) turns.push({ role: turn[1]!.toLowerCase() as Turn['role'], text: turn[2]!.trim() });
    else if (last && line.trim() !== '') last.text += `\n${line.trim()}`;
  }
  return turns;
}

/**
 * Words that open a sentence without adding to what it states ("Actually, I do not prefer X"): a
 * person corrects themselves this way, and the rules below read the sentence without them.
 */
const DISCOURSE_MARKER = /^(?:actually|also|and|but|so|well|oh|ok|okay|anyway|by the way|btw|fyi|for the record|just so you know|(?:please )?note that),?\s+(?=\S)/i;

/**
 * Sentences end at `.`, `!` or `?` followed by a space or the end, and at every line break; a
 * sentence's leading discourse marker is dropped.
 */
export function splitSentences(text: string): string[] {
  return text
    .split(/\r?\n/)
    .flatMap((line) => line.split(/(?<=[.!?])\s+/))
    .map(withoutDiscourseMarker)
    .filter((sentence) => sentence !== '');
}

function withoutDiscourseMarker(sentence: string): string {
  const rest = sentence.trim().replace(DISCOURSE_MARKER, '');
  return rest.charAt(0).toUpperCase() + rest.slice(1);
}

/** The ids of `[id] content` lines whose content shares at least two content words with what the assistant said. */
function usedRecalledIds(recalled: string, assistantText: string): string[] {
  const said = new Set(contentWords(assistantText));
  return recalled.split(/\r?\n/).flatMap((line) => {
    const entry = /^\s*\[([^\]]+)\]\s*(.*)$/.exec(line);
    if (!entry) return [];
    const shared = new Set(contentWords(entry[2]!).filter((word) => said.has(word)));
    return shared.size >= 2 ? [entry[1]!.trim()] : [];
  });
}

interface MemoryLine {
  id: string;
  type: string;
  title: string;
  body: string;
}

/** `[id] (type) title: body`; the title ends at the first colon. */
function memoryLineOf(line: string): MemoryLine | undefined {
  const parts = /^\s*\[([^\]]+)\]\s*\(([^)]+)\)\s*([^:]*):\s*(.*?)\s*$/.exec(line);
  if (!parts || parts[4] === '') return undefined;
  return { id: parts[1]!.trim(), type: parts[2]!.trim(), title: parts[3]!.trim(), body: parts[4]! };
}

// ---------------------------------------------------------------------------------------------
// Memories, judgements, consolidation

interface SentenceReading {
  sentence: string;
  entities: Entity[];
  statement: Statement | undefined;
  relations: Relation[];
}

function readSentence(sentence: string): SentenceReading {
  const entities = extractEntities(sentence);
  const statement = classify(sentence, entities);
  return { sentence, entities, statement, relations: statement ? relationsOf(statement, entities) : [] };
}

function memoryOf(sentence: string): ExtractedMemory | undefined {
  const { statement, entities, relations } = readSentence(sentence);
  if (!statement) return undefined;
  const { type, title, negated } = statement;
  return { type, tier: TIER_OF_TYPE[type], title, body: thirdPersonBody(sentence), negated, entities, relations };
}

/** The statement of a single sentence, or undefined for a question or a sentence no rule fits. */
export function parseStatement(sentence: string): Statement | undefined {
  return readSentence(sentence).statement;
}

function firstStatement(text: string): Statement | undefined {
  for (const sentence of splitSentences(text)) {
    const statement = parseStatement(sentence);
    if (statement) return statement;
  }
  return undefined;
}

function judge(stored: Statement, incoming: Statement): MemoryJudgement {
  if (phrase(stored.subject) !== phrase(incoming.subject) || stored.verb !== incoming.verb) {
    return { relation: 'unrelated', reason: 'they are about different subjects or relations' };
  }
  const claim = `${phrase(incoming.subject)} ${incoming.verb} ${phrase(incoming.object)}`;
  const samePolarity = stored.negated === incoming.negated;
  if (phrase(stored.object) === phrase(incoming.object)) {
    return samePolarity
      ? { relation: 'same', reason: `both state that ${claim}` }
      : { relation: 'contradicts', reason: `one states and the other denies that ${claim}` };
  }
  return samePolarity
    ? { relation: 'refines', reason: `both state what ${phrase(incoming.subject)} ${incoming.verb}, with a different object` }
    : { relation: 'unrelated', reason: 'one denies something the other does not state' };
}

/** A phrase as judgement compares it: lowercased, without punctuation or a leading article. */
function phrase(text: string): string {
  return text
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s]/gu, ' ')
    .replace(/\s+/g, ' ')
    .trim()
    .replace(/^(?:the|a|an) /, '');
}

/** Consolidation's tier; a type the rules do not know ranks as tier C, as recall ranks an unlisted type. */
function tierOf(type: string): Tier {
  return Object.hasOwn(TIER_OF_TYPE, type) ? TIER_OF_TYPE[type as MemoryType] : 'C';
}

/** The most frequent value; among equally frequent ones, the first to appear. */
function mostFrequent(values: string[]): string {
  const counts = new Map<string, number>();
  for (const value of values) counts.set(value, (counts.get(value) ?? 0) + 1);
  let best = values[0] ?? '';
  for (const [value, count] of counts) if (count > (counts.get(best) ?? 0)) best = value;
  return best;
}

// ---------------------------------------------------------------------------------------------
// Classifying a sentence: the first rule that fits wins

function classify(sentence: string, entities: Entity[]): Statement | undefined {
  const text = sentence.trim().replace(/[‘’]/g, "'");
  if (text === '' || text.endsWith('?')) return undefined;
  const plain = withoutAliases(text.replace(/[.!]+$/, '')).trim();
  // Decisions and constraints read the sentence as written: "never" starts a rule, not a negation.
  const rule = decisionOf(plain) ?? constraintOf(plain);
  if (rule) return rule;
  const { text: positive, negated } = withoutNegation(plain);
  const statement = preferenceOf(positive, entities) ?? statusOf(positive) ?? procedureOf(positive) ?? factOf(positive) ?? observationOf(positive, entities);
  // "hate" is a negated preference, so "don't hate" is not negated.
  return statement && { ...statement, negated: statement.negated !== negated };
}

function statement(type: MemoryType, subject: string, verb: string, object: string, negated: boolean, title: string): Statement {
  return { type, subject, verb, object, negated, title: titleOf(title) };
}

const DECISION = /^(we|i|the team|the user)(?:\s+have|'ve)?\s+(?:decided|agreed|chose)(\s+not)?(?:\s+to)?\s+(.+)$/i;

function decisionOf(text: string): Statement | undefined {
  const decision = DECISION.exec(text);
  if (!decision) return undefined;
  const object = decision[3]!;
  return statement('decision', personOf(decision[1]!), 'decided', object, decision[2] !== undefined, `decision ${firstContentWords(object)}`);
}

const LEADING_MODAL = /^(never|always|do not|don't|must not|must)\s+(.+)$/i;
const PROHIBITION = /^(?:never|do not|don't|must not)$/i;

/** A rule: its verb is "forbids" for never / do not / must not, "requires" otherwise; never negated. */
function constraintOf(text: string): Statement | undefined {
  const leading = LEADING_MODAL.exec(text);
  if (!leading && !/\smust\s/i.test(text)) return undefined;
  const object = (leading ? leading[2]! : text).toLowerCase();
  const forbids = leading ? PROHIBITION.test(leading[1]!) : /\smust\s+not\s/i.test(text);
  return statement('constraint', 'rule', forbids ? 'forbids' : 'requires', object, false, `constraint ${firstContentWords(object)}`);
}

const PREFERENCE_CLAUSE = clausePattern(['prefer', 'prefers', 'like', 'likes', 'love', 'loves', 'want', 'wants', 'hate', 'hates', 'dislike', 'dislikes']);

function preferenceOf(text: string, entities: Entity[]): Statement | undefined {
  const clause = PREFERENCE_CLAUSE.exec(text);
  const who = clause && preferrerOf(clause[1]!, entities);
  if (!clause || !who) return undefined;
  return statement('preference', who, 'prefers', clause[3]!, /^(?:hate|dislike)/i.test(clause[2]!), `${who} prefers`);
}

/** "user" for I / we (and "the user" / "the team", as bodies say it), or a name that is an entity of the sentence. */
function preferrerOf(subjectText: string, entities: Entity[]): string | undefined {
  const words = withoutTrailingAdverbs(subjectText);
  if (/^(?:i|we|the user|the team)$/i.test(words)) return 'user';
  return entities.some((entity) => entity.name === words) ? words.toLowerCase() : undefined;
}

const STATUS_MARKER = /\b(?:currently|right now|at the moment)\b|\sin progress\b|\sis blocked\b/i;
const TIME_MARKERS = /,?\s*\b(?:currently|right now|at the moment)\b,?/gi;

/** FACT_VERBS by their forms in a sentence, to their canonical third-person form. */
const FACT_VERBS: Readonly<Record<string, string>> = {
  is: 'is', are: 'is', was: 'is', were: 'is',
  uses: 'uses', use: 'uses',
  'runs on': 'runs on', 'run on': 'runs on', runs: 'runs', run: 'runs',
  has: 'has', have: 'has',
  'lives in': 'lives in', 'live in': 'lives in',
  'works at': 'works at', 'work at': 'works at', 'works on': 'works on', 'work on': 'works on',
  owns: 'owns', own: 'owns',
  'depends on': 'depends on', 'depend on': 'depends on',
};
const STATUS_VERBS: Readonly<Record<string, string>> = { ...FACT_VERBS, am: 'is' };
const FACT_CLAUSE = clausePattern(Object.keys(FACT_VERBS));
const STATUS_CLAUSE = clausePattern(Object.keys(STATUS_VERBS));

function statusOf(text: string): Statement | undefined {
  if (!STATUS_MARKER.test(text)) return undefined;
  const rest = text.replace(TIME_MARKERS, ' ').replace(/\s+/g, ' ').trim();
  const clause = STATUS_CLAUSE.exec(rest);
  // Without a verb ("Billing migration in progress") the subject is what comes before the marker, or the first word.
  const subjectText = clause ? clause[1]! : (/^(.+?)\s+in progress\b/i.exec(rest)?.[1] ?? rest.split(' ')[0] ?? '');
  const verb = clause ? (STATUS_VERBS[clause[2]!.toLowerCase()] ?? 'is') : 'is';
  const object = clause ? clause[3]! : rest.slice(subjectText.length).trim();
  const subject = subjectOf(subjectText);
  return statement('status', subject, verb, object, false, `status ${subject}`);
}

function procedureOf(text: string): Statement | undefined {
  const procedure = /^to\s+(.+?),\s*(.+)$/i.exec(text);
  if (!procedure) return undefined;
  const goal = procedure[1]!;
  return statement('procedure', goal.toLowerCase(), 'is done by', procedure[2]!, false, `procedure ${firstContentWords(goal)}`);
}

function factOf(text: string): Statement | undefined {
  const clause = FACT_CLAUSE.exec(text);
  const subject = clause ? subjectOf(clause[1]!) : '';
  if (!clause || subject === '') return undefined;
  const verb = FACT_VERBS[clause[2]!.toLowerCase().replace(/\s+/g, ' ')] ?? clause[2]!;
  return statement('fact', subject, verb, clause[3]!, false, `${subject} ${verb}`);
}

function observationOf(text: string, entities: Entity[]): Statement | undefined {
  const first = entities[0];
  if (!first) return undefined;
  const subject = first.name.toLowerCase();
  return statement('observation', subject, 'noted', text.toLowerCase(), false, `observation ${subject}`);
}

/** `<subject> <verb> <object>`: the subject is as short as it can be, so the first verb of the list wins. */
function clausePattern(verbs: string[]): RegExp {
  const longestFirst = [...verbs].sort((a, b) => b.length - a.length).map((verb) => verb.replace(/ /g, '\\s+'));
  return new RegExp(`^(.+?)\\s+(${longestFirst.join('|')})\\s+(.+)$`, 'i');
}

const PERSONS = new Map([['i', 'user'], ["i'm", 'user'], ['me', 'user'], ['we', 'team'], ["we're", 'team'], ['us', 'team']]);

function personOf(who: string): string {
  return /^(?:we|the team)$/i.test(who) ? 'team' : 'user';
}

/** A subject lowercased, without a leading determiner ("the", "my", "the user's", ...); I and we are the user and the team. */
function subjectOf(text: string): string {
  const words = withoutTrailingAdverbs(text).toLowerCase();
  return PERSONS.get(words) ?? words.replace(/^(?:the user's|the team's|the|a|an|our|my)\s+/, '').trim();
}

const ADVERBS = new Set(['really', 'also', 'still', 'usually', 'generally', 'mostly', 'always', 'often', 'now', 'just', 'definitely', 'strongly', 'actually', 'currently']);

function withoutTrailingAdverbs(text: string): string {
  const words = text.trim().split(/\s+/);
  while (words.length > 1 && ADVERBS.has(words.at(-1)!.toLowerCase())) words.pop();
  return words.join(' ');
}

// ---------------------------------------------------------------------------------------------
// Negation

/**
 * Negation words go and the verb stays: "does not use" / "doesn't use" -> "use", "is not" /
 * "isn't" -> "is", "no longer uses" / "never uses" -> "uses". A "not" that follows no auxiliary
 * ("tabs, not spaces") is not a negation of the statement.
 */
const NEGATIONS: ReadonlyArray<[RegExp, string]> = [
  [/\b(?:do|does|did)(?:\s+not|n't)\s+/gi, ''],
  [/\bcan(?:not|'t)\b/gi, 'can'],
  [/\bwon't\b/gi, 'will'],
  [/\b(am|is|are|was|were|has|have|had|can|could|will|would|should)(?:\s+not|n't)\b/gi, '$1'],
  [/('(?:m|re|s|ve))\s+not\b/gi, '$1'],
  [/\s+(?:no longer|never)\b/gi, ''],
];

function withoutNegation(text: string): { text: string; negated: boolean } {
  const positive = NEGATIONS.reduce((current, [pattern, replacement]) => current.replace(pattern, replacement), text).replace(/\s+/g, ' ').trim();
  return { text: positive, negated: positive !== text.replace(/\s+/g, ' ').trim() };
}

// ---------------------------------------------------------------------------------------------
// Entities and relations

/** Capitalised words that start sentences without naming anything. */
const SENTENCE_STARTERS = new Set([
  'i', 'we', 'the', 'a', 'an', 'our', 'my', 'please', 'never', 'always', 'to', 'do', "don't", 'must', 'it', 'this', 'that',
  'then', 'first', 'also', 'yes', 'no', 'hi', 'hello', 'thanks', 'ok', 'okay', 'currently', 'right',
]);

const WORD_TOKEN = /[\p{L}\p{N}][\p{L}\p{N}'.+#-]*/gu;

interface Span {
  name: string;
  start: number;
  end: number;
}

/** Maximal runs of entity-shaped words separated by single spaces. */
function entitySpans(text: string): Span[] {
  const spans: Span[] = [];
  let first = true;
  for (const token of text.matchAll(WORD_TOKEN)) {
    const word = token[0].replace(/[.'-]+$/, '').replace(/'s$/i, '');
    const start = token.index;
    const named = isEntityWord(word) && !(first && SENTENCE_STARTERS.has(word.toLowerCase()));
    first = false;
    if (!named) continue;
    const last = spans.at(-1);
    if (last && text.slice(last.end, start) === ' ') {
      last.name += ` ${word}`;
      last.end = start + word.length;
    } else spans.push({ name: word, start, end: start + word.length });
  }
  return spans;
}

/** Capitalised (two letters or more), or with a capital inside ("PostgreSQL", "iOS"); never the pronoun I. */
function isEntityWord(word: string): boolean {
  if (/^I(?:'\w+)?$/.test(word)) return false;
  return (word.length >= 2 && /^\p{Lu}/u.test(word)) || /[\p{Ll}\p{N}]\p{Lu}/u.test(word);
}

function isEntityName(text: string): boolean {
  const spans = entitySpans(text);
  return spans.length === 1 && spans[0]!.name === text;
}

/**
 * The entities a sentence names, each once, in order of appearance. An alias right after an
 * entity, as `X (also called Y)`, `X (aka Y)`, `X (Y)` with Y entity-shaped, or
 * `X, also known as Y`, joins X and is not an entity of its own.
 */
export function extractEntities(sentence: string): Entity[] {
  const text = sentence.replace(/[‘’]/g, "'");
  const entities: Entity[] = [];
  let aliasEnd = -1;
  for (const span of entitySpans(text)) {
    if (span.start < aliasEnd) continue;
    const alias = aliasAfter(text, span.end);
    if (alias) aliasEnd = span.end + alias.length;
    entities.push({ name: span.name, aliases: alias ? [alias.name] : [] });
  }
  return mergeEntities(entities);
}

/** `(also called Y)`, `(aka Y)`, `(also known as Y)`, `, also known as Y,`: Y is group 1 or 2. */
const NAMED_ALIAS = String.raw`\s*\((?:also called|also known as|aka|a\.k\.a\.?)\s+([^)]+)\)|,\s*(?:also known as|also called|aka)\s+([^,.;)]+),?`;
/** `(Y)`, an alias only when Y is entity-shaped. */
const BRACKETED_ALIAS = String.raw`\s*\(([^)]+)\)`;
const NAMED_ALIAS_NEXT = new RegExp(`^(?:${NAMED_ALIAS})`, 'i');
const BRACKETED_ALIAS_NEXT = new RegExp(`^${BRACKETED_ALIAS}`);

function aliasAfter(text: string, end: number): { name: string; length: number } | undefined {
  const rest = text.slice(end);
  const named = NAMED_ALIAS_NEXT.exec(rest);
  const bracketed = named ? undefined : BRACKETED_ALIAS_NEXT.exec(rest);
  const name = named ? (named[1] ?? named[2])?.trim() : bracketed?.[1]?.trim();
  const found = named ?? (name !== undefined && isEntityName(name) ? bracketed : undefined);
  return found && name ? { name, length: found[0].length } : undefined;
}

/** The sentence without its alias phrases, so that "X (also called Y) uses Z" states that X uses Z. */
function withoutAliases(text: string): string {
  return text
    .replace(new RegExp(NAMED_ALIAS, 'gi'), '')
    .replace(new RegExp(BRACKETED_ALIAS, 'g'), (bracket, name: string) => (isEntityName(name.trim()) ? '' : bracket));
}

const isNameOf = (entity: Entity, name: string) => [entity.name, ...entity.aliases].some((known) => known.toLowerCase() === name.toLowerCase());

/** One entity per name: an entity whose name or alias another already has joins it, adding its names as aliases. */
function mergeEntities(entities: Entity[]): Entity[] {
  const merged: Entity[] = [];
  for (const entity of entities) {
    const names = [entity.name, ...entity.aliases];
    let target = merged.find((known) => names.some((name) => isNameOf(known, name)));
    if (!target) {
      target = { name: entity.name, aliases: [] };
      merged.push(target);
    }
    for (const name of names) if (!isNameOf(target, name)) target.aliases.push(name);
  }
  return merged;
}

/**
 * A fact or preference whose subject names an entity and whose object names another relates the
 * two by its verb (the object's first entity). A negated statement relates nothing.
 */
function relationsOf(statement: Statement, entities: Entity[]): Relation[] {
  if (statement.negated || (statement.type !== 'fact' && statement.type !== 'preference')) return [];
  const from = entities.find((entity) => mentionAt(statement.subject, entity) >= 0);
  const mentioned = entities.filter((entity) => entity !== from).map((entity) => ({ entity, at: mentionAt(statement.object, entity) })).filter(({ at }) => at >= 0);
  const to = mentioned.sort((a, b) => a.at - b.at)[0]?.entity;
  return from && to ? [{ from: from.name, relation: statement.verb, to: to.name }] : [];
}

/** Where a text first mentions an entity (its name or an alias, as a whole word, any case), or -1. */
function mentionAt(text: string, entity: Entity): number {
  const positions = [entity.name, ...entity.aliases]
    .map((name) => new RegExp(`(?<![\\p{L}\\p{N}])${escapeRegExp(name)}(?![\\p{L}\\p{N}])`, 'iu').exec(text)?.index ?? -1)
    .filter((at) => at >= 0);
  return positions.length > 0 ? Math.min(...positions) : -1;
}

const escapeRegExp = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

function inCanonicalNames(relation: Relation, entities: Entity[]): Relation {
  const canonical = (name: string) => entities.find((entity) => isNameOf(entity, name))?.name ?? name;
  return { ...relation, from: canonical(relation.from), to: canonical(relation.to) };
}

function uniqueRelations(relations: Relation[]): Relation[] {
  const byKey = new Map(relations.map((relation) => [JSON.stringify([relation.from, relation.relation, relation.to]), relation]));
  return [...byKey.values()];
}

// ---------------------------------------------------------------------------------------------
// Bodies and titles

/**
 * A sentence in the third person, ending with a period: "I prefer" -> "The user prefers", "I'm" ->
 * "The user is", "We use" -> "The team uses", "my" -> "the user's" (a leading "My" -> "The
 * user's"); any other sentence as written, its first letter upper-cased.
 */
export function thirdPersonBody(sentence: string): string {
  const text = sentence.trim().replace(/[.!]+$/, '');
  const rewritten = text
    .replace(/^I['’]m\b/i, 'The user is')
    .replace(/^I['’]ve\b/i, 'The user has')
    .replace(/^We['’]re\b/i, 'The team is')
    .replace(/^We['’]ve\b/i, 'The team has')
    .replace(/^I\s+(.*)$/i, (_, rest: string) => `The user ${inThirdPerson(rest)}`)
    .replace(/^We\s+(.*)$/i, (_, rest: string) => `The team ${inThirdPerson(rest)}`)
    .replace(/^My\s+/, "The user's ")
    .replace(/\smy\s/g, " the user's ");
  return `${rewritten.charAt(0).toUpperCase()}${rewritten.slice(1)}.`;
}

/** Words between the subject and its verb that keep the verb's form ("I never use" -> "never uses"). */
const BEFORE_VERB = new Set([...ADVERBS, 'never', 'no', 'longer', 'not']);
const IRREGULAR_THIRD_PERSON = new Map([
  ['am', 'is'], ['are', 'is'], ['were', 'was'], ['have', 'has'], ['do', 'does'],
  ["don't", "doesn't"], ["aren't", "isn't"], ["weren't", "wasn't"], ["haven't", "hasn't"],
]);
/** Modals and past tenses, which are the same in every person. */
const SAME_IN_EVERY_PERSON =
  /^(?:can|could|will|would|shall|should|may|might|must|did|didn't|was|wasn't|had|hadn't|can't|cannot|won't|wouldn't|couldn't|shouldn't|chose|went|made|took|got|said|knew|thought|found|gave|told|left|began|ran|wrote|saw|came|bought|built|sent|kept|met|lost|won|felt|spent|heard|paid|sold|broke|\w+ed)$/i;

/** The first verb of a first-person predicate in the third person singular. */
function inThirdPerson(predicate: string): string {
  const words = predicate.split(' ');
  const at = words.findIndex((word) => !BEFORE_VERB.has(word.toLowerCase()));
  const verb = words[at];
  if (verb === undefined) return predicate;
  words[at] = thirdPersonVerb(verb);
  return words.join(' ');
}

function thirdPersonVerb(verb: string): string {
  const irregular = IRREGULAR_THIRD_PERSON.get(verb.toLowerCase().replace('’', "'"));
  if (irregular) return irregular;
  if (SAME_IN_EVERY_PERSON.test(verb) || !/^[a-z]+$/.test(verb)) return verb;
  if (/(?:s|sh|ch|x|z|o)$/.test(verb)) return `${verb}es`;
  if (/[^aeiou]y$/.test(verb)) return `${verb.slice(0, -1)}ies`;
  return `${verb}s`;
}

/** Titles are lowercase, single-spaced, without trailing punctuation. */
function titleOf(text: string): string {
  return text.toLowerCase().replace(/\s+/g, ' ').trim().replace(/[\p{P}\s]+$/u, '');
}

/** Words that carry no topic: they never make a title or count as shared between texts. */
export const STOPWORDS: ReadonlySet<string> = new Set(
  (
    'the and for with that this these those our your yours you are was were use uses used using not but from into onto than then ' +
    'them they their there here have has had will would should could can may might must been being about over under just also very ' +
    'really some any all each every when what which who whom how why its his her hers she him does did dont doesnt didnt isnt arent ' +
    'wasnt cant wont'
  ).split(' '),
);

/** Lowercased words of three characters or more that are not stopwords, in order (apostrophes dropped: "don't" -> "dont"). */
export function contentWords(text: string): string[] {
  const words = text.toLowerCase().replace(/['’]/g, '').match(/[\p{L}\p{N}]+/gu) ?? [];
  return words.filter((word) => word.length >= 3 && !STOPWORDS.has(word));
}

function firstContentWords(text: string, count = 3): string {
  return contentWords(text).slice(0, count).join(' ');
}
