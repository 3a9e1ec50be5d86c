import { describe, expect, it } from 'vitest';
import { CATALOG, embeddingModel } from '../shared/models/catalog.js';
import { chooseFromProfile, estimateDifficulty, EMPTY_REQUEST_SHAPE, type RequestShape } from '../shared/models/dynamic-profiles.js';
import { parseModelField, parseModelRef, resolveModelRef, type ResolutionContext } from '../shared/models/refs.js';

const noDefinitions: ResolutionContext = { slot: async () => undefined, dynamic: async () => undefined };

function context(slots: Record<string, string>, profiles: Record<string, { ref: string; reason: string }> = {}): ResolutionContext {
  return { slot: async (alias) => slots[alias], dynamic: async (profile) => profiles[profile] };
}

const resolveText = (text: string, ctx = noDefinitions) => resolveModelRef(parseModelRef(text), ctx);

describe('parsing', () => {
  it.each([
    ['svc:openai/gpt-4o', { kind: 'svc', provider: 'openai', model: 'gpt-4o', region: undefined }],
    ['svc:together/meta-llama/Llama-3.3-70B-Instruct-Turbo', { kind: 'svc', provider: 'together', model: 'meta-llama/Llama-3.3-70B-Instruct-Turbo' }],
    ['svc:anthropic/claude-sonnet-4-20250514@eu-cloud1', { kind: 'svc', region: 'eu-cloud1' }],
    ['match:anthropic/sonnet', { kind: 'match', family: 'sonnet', constraint: undefined }],
    ['match:anthropic/opus>=4', { kind: 'match', constraint: { op: '>=', version: 4 } }],
    ['match:anthropic/haiku=3.5', { kind: 'match', constraint: { op: '=', version: 3.5 } }],
    ['slot:fast', { kind: 'slot', alias: 'fast' }],
    ['dyn:router-1', { kind: 'dyn', profile: 'router-1' }],
  ])('%s', (text, expected) => {
    expect(parseModelRef(text)).toMatchObject(expected);
  });

  it.each([
    ['gpt-4o', 'invalid_model_ref'],
    ['openai/gpt-4o', 'invalid_model_ref'],
    ['model:openai/gpt-4o', 'invalid_model_ref'],
    ['svc:', 'invalid_model_ref'],
    ['svc:openai', 'invalid_model_ref'],
    ['svc:openai/', 'invalid_model_ref'],
    ['svc:openai/gpt-4o@mars', 'invalid_model_ref'],
    ['match:anthropic/sonnet@eu', 'invalid_model_ref'],
    ['match:anthropic', 'invalid_model_ref'],
    ['match:anthropic/sonnet>4', 'invalid_model_ref'],
    ['slot:', 'invalid_model_ref'],
    ['dyn:has space', 'invalid_model_ref'],
    ['user:sk-abc/gpt-4o', 'byok_not_supported'],
  ])('%j is refused with %s, param model', (text, code) => {
    expect(() => parseModelRef(text)).toThrow(expect.objectContaining({ code, status: 400, param: 'model' }));
  });

  it('reads cascades and refuses what the spec forbids in them', () => {
    expect(parseModelField(['svc:groq/llama-3.3-70b-versatile', 'match:anthropic/sonnet'])).toMatchObject({ cascade: true, refs: [{ kind: 'svc' }, { kind: 'match' }] });
    expect(parseModelField('svc:openai/gpt-4o')).toMatchObject({ cascade: false });
    for (const bad of [[], [''], [1], ['svc:openai/gpt-4o', 'svc:anthropic/claude-sonnet-4-20250514@eu'], Array(9).fill('svc:openai/gpt-4o'), { model: 'x' }]) {
      expect(() => parseModelField(bad)).toThrow(expect.objectContaining({ code: 'invalid_model_ref' }));
    }
    for (const missing of [undefined, null, '']) expect(() => parseModelField(missing)).toThrow(expect.objectContaining({ code: 'missing_model', param: 'model' }));
  });
});

describe('resolution', () => {
  it('resolves svc: to its catalog entry, keeping the region', async () => {
    const resolved = await resolveText('svc:anthropic/claude-sonnet-4-20250514@us-cloud2');
    expect(resolved.model.id).toBe('svc:anthropic/claude-sonnet-4-20250514');
    expect(resolved.region).toBe('us-cloud2');
    expect(resolved.model.cloudIds?.cloud2).toBe('claude-sonnet-4@20250514');
  });

  it.each([
    ['svc:openai/gpt-4o@eu', 'unsupported_provider'],
    ['svc:openai/gpt-4o@eu-cloud1', 'unsupported_provider'],
    ['svc:nowhere/model', 'unsupported_provider'],
    ['svc:openai/gpt-7', 'invalid_model_ref'],
    ['match:openai/sonnet', 'unsupported_provider'],
    ['match:anthropic/sonata', 'invalid_model_ref'],
    ['match:anthropic/opus>=9', 'invalid_model_ref'],
    ['match:anthropic/opus=3', 'invalid_model_ref'],
    ['dyn:unknown', 'unknown_dynamic_profile'],
    ['slot:unknown', 'unknown_slot'],
  ])('%s → %s', async (text, code) => {
    await expect(resolveText(text)).rejects.toMatchObject({ code, param: 'model' });
  });

  it('takes @eu and @us on the first-party provider', async () => {
    expect((await resolveText('svc:anthropic/claude-opus-4-1-20250805@eu')).region).toBe('eu');
  });

  it('resolves match: to the newest of the family, honouring floor and pin', async () => {
    const newestSonnet = CATALOG.filter((model) => model.family === 'sonnet').sort((a, b) => b.version! - a.version!)[0]!;
    expect((await resolveText('match:anthropic/sonnet')).model.id).toBe(newestSonnet.id);
    expect((await resolveText('match:anthropic/sonnet>=4')).model.id).toBe(newestSonnet.id);
    const pinned = await resolveText('match:anthropic/sonnet=4');
    expect(pinned.model.id).toBe('svc:anthropic/claude-sonnet-4-20250514');
    expect(pinned.newerAvailable).toBe(newestSonnet.id);
    expect((await resolveText(`match:anthropic/sonnet=${newestSonnet.version}`)).newerAvailable).toBeUndefined();
  });

  it('follows slot aliases, refusing cycles and region-pinned targets', async () => {
    const slots = context({ fast: 'slot:cheap', cheap: 'svc:groq/llama-3.3-70b-versatile', loop: 'slot:back', back: 'slot:loop', pinned: 'svc:anthropic/claude-opus-4-20250514@eu' });
    const resolved = await resolveText('slot:fast', slots);
    expect(resolved).toMatchObject({ requested: 'slot:fast', model: { id: 'svc:groq/llama-3.3-70b-versatile' } });
    await expect(resolveText('slot:loop', slots)).rejects.toMatchObject({ code: 'slot_cycle', param: 'model' });
    await expect(resolveText('slot:pinned', slots)).rejects.toMatchObject({ code: 'invalid_model_ref' });
  });

  it('resolves dyn: through the profile’s choice and says why', async () => {
    const profiles = context({ cheap: 'svc:openai/gpt-4o-mini' }, { router: { ref: 'slot:cheap', reason: 'short prompt, no tools' } });
    const resolved = await resolveText('dyn:router', profiles);
    expect(resolved).toMatchObject({ model: { id: 'svc:openai/gpt-4o-mini' }, dynamic: { profile: 'router', reason: 'short prompt, no tools' } });
  });
});

describe('dynamic profiles', () => {
  const profile = {
    rules: [
      { when: { tools: true }, model: 'svc:openai/gpt-4o' },
      { when: { min_prompt_tokens: 1000, max_difficulty: 0.5 }, model: 'svc:openai/gpt-4.1' },
      { when: { max_prompt_tokens: 999, vision: false, json_schema: false }, model: 'slot:cheap' },
    ],
    default_model: 'match:anthropic/opus',
  };
  const shape = (fields: Partial<RequestShape>): RequestShape => ({ ...EMPTY_REQUEST_SHAPE, ...fields });

  it.each([
    [{ tools: true }, 'svc:openai/gpt-4o', 'rule 1 (tools)'],
    [{ promptTokens: 1500, difficulty: 0.2 }, 'svc:openai/gpt-4.1', 'rule 2 (prompt_tokens 1500 >= 1000; difficulty 0.20 <= 0.5)'],
    [{ promptTokens: 10 }, 'slot:cheap', 'rule 3 (prompt_tokens 10 <= 999; no vision; no json_schema)'],
    [{ promptTokens: 10, vision: true }, 'match:anthropic/opus', 'default_model (no rule matched: prompt_tokens 10, no tools, vision, no json_schema, difficulty 0.00)'],
    [{ promptTokens: 1500, difficulty: 0.9 }, 'match:anthropic/opus', 'default_model (no rule matched: prompt_tokens 1500, no tools, no vision, no json_schema, difficulty 0.90)'],
  ])('%j → %s', (fields, ref, reason) => {
    expect(chooseFromProfile(profile, shape(fields))).toEqual({ ref, reason });
  });

  it('estimates difficulty from length, reasoning words, code and conversation length, within [0, 1]', () => {
    const easy = estimateDifficulty({ last: 'hi', all: 'hi', turns: 1, promptTokens: 5 });
    const hard = estimateDifficulty({ last: 'Prove it step by step and analyze the algorithm', all: '```ts\nfunction f() {}\n```', turns: 8, promptTokens: 8000 });
    expect(easy).toBeLessThan(0.05);
    expect(hard).toBe(1);
  });

  it('hands the request shape to the profile when resolving dyn:', async () => {
    const seen: RequestShape[] = [];
    const ctx: ResolutionContext = {
      slot: async () => undefined,
      dynamic: async (_profile, request) => {
        seen.push(request);
        return { ref: 'svc:openai/gpt-4o-mini', reason: 'test' };
      },
    };
    await resolveModelRef(parseModelRef('dyn:p'), ctx, shape({ tools: true, promptTokens: 42 }));
    expect(seen).toEqual([shape({ tools: true, promptTokens: 42 })]);
    await expect(resolveModelRef(parseModelRef('dyn:p'), { ...ctx, dynamic: async () => ({ ref: 'svc:anthropic/claude-opus-4-20250514@eu', reason: 'x' }) })).rejects.toMatchObject({ code: 'invalid_model_ref' });
  });
});

describe('catalog', () => {
  it('has the nine embedding models of the spec with their dimensions, and the four rerank references', () => {
    const dims = Object.fromEntries(
      ['text-embedding-3-small', 'text-embedding-3-large', 'text-embedding-ada-002', 'embed-english-v3.0', 'embed-multilingual-v3.0', 'voyage-3-large', 'voyage-3-lite', 'mistral-embed', 'text-embedding-004'].map(
        (id) => [id, embeddingModel(id)?.dimensions],
      ),
    );
    expect(dims).toEqual({
      'text-embedding-3-small': 1536,
      'text-embedding-3-large': 3072,
      'text-embedding-ada-002': 1536,
      'embed-english-v3.0': 1024,
      'embed-multilingual-v3.0': 1024,
      'voyage-3-large': 1024,
      'voyage-3-lite': 512,
      'mistral-embed': 1024,
      'text-embedding-004': 768,
    });
    expect(CATALOG.filter((model) => model.kind === 'rerank').map((model) => model.id).sort()).toEqual([
      'svc:cohere/rerank-multilingual-v3.0',
      'svc:cohere/rerank-v3.5',
      'svc:voyage/rerank-2',
      'svc:voyage/rerank-2-lite',
    ]);
  });

  it('routes media as the spec says: images to three providers, speech-to-text and text-to-speech to two', () => {
    const providersOf = (kind: string) => new Set(CATALOG.filter((model) => model.kind === kind).map((model) => model.provider)).size;
    expect([providersOf('image'), providersOf('speech_to_text'), providersOf('text_to_speech')]).toEqual([3, 2, 2]);
  });

  it('spans nineteen providers, with unique ids', () => {
    expect(new Set(CATALOG.map((model) => model.provider)).size).toBe(19);
    expect(new Set(CATALOG.map((model) => model.id)).size).toBe(CATALOG.length);
  });
});
