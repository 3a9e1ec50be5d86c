import fc from 'fast-check';
import { fieldLocations, type JsonSchema, type Operation } from './operations.js';

/**
 * One spoiled part of an otherwise valid request, as fast-check arbitraries so a failure shrinks
 * to its smallest input. A hazard carries its class (`label`) beside its value, so failures group
 * by class whatever the exact value was.
 */
export interface Hazard {
  label: string;
  value: unknown;
}

/** JSON text that JSON.stringify cannot write: numbers past a double, nesting deeper than its stack. */
export class RawJson {
  constructor(readonly text: string) {}
  toString() {
    return this.text.length > 80 ? `${this.text.slice(0, 40)}…(${this.text.length} chars)` : this.text;
  }
}

export type Mutation =
  | { kind: 'path'; name: string; hazard: Hazard }
  | { kind: 'query'; name: string; hazard: Hazard }
  | { kind: 'header'; name: string; hazard: Hazard }
  | { kind: 'field'; path: Array<string | number>; hazard: Hazard }
  | { kind: 'body'; fault: BodyFault };

/** A fault of the body as bytes on the wire, not of any one field. */
export type BodyFault =
  | { label: 'truncated'; keepFraction: number }
  | { label: 'content-type'; contentType: string }
  | { label: 'content-encoding'; encoding: string; bytes: 'plain' | 'garbage' | 'truncated-gzip' | 'gzip-bomb' }
  | { label: 'declared-length'; declared: number }
  | { label: 'not-an-object'; text: string }
  | { label: 'invalid-utf8' }
  | { label: 'byte-order-mark' };

export interface FuzzCase {
  operationIndex: number;
  /** Which branch of each union the base request takes. */
  variant: number;
  mutation: Mutation;
}

export function describeMutation(mutation: Mutation): string {
  switch (mutation.kind) {
    case 'body':
      return `body ${mutation.fault.label}${'contentType' in mutation.fault ? ` ${mutation.fault.contentType}` : ''}${'encoding' in mutation.fault ? ` ${mutation.fault.encoding}/${mutation.fault.bytes}` : ''}`;
    case 'field':
      return `field ${mutation.path.length ? mutation.path.join('.') : '(whole body)'}: ${mutation.hazard.label}`;
    default:
      return `${mutation.kind} ${mutation.name}: ${mutation.hazard.label}`;
  }
}

const labeled = (label: string, arbitrary: fc.Arbitrary<unknown>): fc.Arbitrary<Hazard> => arbitrary.map((value) => ({ label, value }));
const word = fc.string({ maxLength: 6, unit: 'grapheme-ascii' });
const around = (middle: fc.Arbitrary<string>) => fc.tuple(word, middle, word).map(([before, inner, after]) => `${before}${inner}${after}`);

const CONTROL_CHARACTERS = ['\u0001', '\u0007', '\u0008', '\u000b', '\u001b', '\u007f', '\u0085', '\u2028', '\ufeff', '\r\n', '\t'];
const LONE_SURROGATES = ['\ud800', '\udbff', '\udc00', '\udfff'];

const stringHazards = fc.oneof(
  labeled('nul', around(fc.constant('\u0000'))),
  labeled('control-character', around(fc.constantFrom(...CONTROL_CHARACTERS))),
  labeled('lone-surrogate', around(fc.constantFrom(...LONE_SURROGATES))),
  labeled('overlong-string', fc.integer({ min: 1_000, max: 2_000_000 }).map((length) => 'x'.repeat(length))),
  labeled('empty-string', fc.constantFrom('', ' ', '\t\n')),
  labeled('odd-unicode', fc.constantFrom('\uffff', '\ufffe', '𝔘𝔫𝔦', 'e\u0301\u0301\u0301', '\u202eevil', '👩‍👩‍👧')),
  labeled('nan-like-string', fc.constantFrom('NaN', 'Infinity', '-Infinity', '1e999', '0x1F', '-0', ' 1 ', '9007199254740993', 'null', 'undefined', 'true')),
);

const dateHazards = labeled(
  'far-date',
  fc.constantFrom(
    '0000-01-01T00:00:00Z', '-000001-01-01T00:00:00Z', '0001-01-01T00:00:00Z', '1900-01-01T00:00:00+14:00', '9999-12-31T23:59:59Z',
    '+275760-09-13T00:00:00.001Z', '2024-02-30T00:00:00Z', '2024-13-01T00:00:00Z', '2038-01-19T03:14:08Z', -8.64e15 - 1, 8.64e15 + 1, 253402300800000,
  ),
);

const numberHazards = fc.oneof(
  labeled('int-boundary', fc.constantFrom(2 ** 31 - 1, 2 ** 31, 2 ** 32, 2 ** 53 - 1, 2 ** 53, 2 ** 53 + 2, 2 ** 63, 2 ** 64, 1e308)),
  labeled('negative', fc.constantFrom(-1, -(2 ** 31), -(2 ** 31) - 1, -(2 ** 53), -1e308, -0.5)),
  labeled('fraction', fc.constantFrom(0.5, 1e-300, 5e-324)),
  labeled('raw-number', fc.constantFrom('1e999', '-1e999', '123456789012345678901234567890', '1.0e+400', '-0').map((text) => new RawJson(text))),
  labeled('nan-like-string', fc.constantFrom('NaN', 'Infinity', '1e999', '0x10', '')),
);

const structureHazards = fc.oneof(
  labeled('wrong-type', fc.constantFrom<unknown>(null, true, false, 0, '', 'fuzz', {}, [], [null], { a: 1 })),
  labeled('empty-array', fc.constant([])),
  labeled('huge-array', fc.tuple(fc.integer({ min: 1_000, max: 100_000 }), fc.constantFrom<unknown>(0, 'x', {}, null)).map(([length, item]) => Array.from({ length }, () => item))),
  labeled('deep-nesting', fc.tuple(fc.integer({ min: 100, max: 20_000 }), fc.constantFrom('[]', '{"a":}')).map(([depth, shape]) =>
    new RawJson(shape === '[]' ? `${'['.repeat(depth)}${']'.repeat(depth)}` : `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`))),
  labeled('prototype-key', fc.constantFrom('{"__proto__":{"polluted":true}}', '{"constructor":{"prototype":{"polluted":true}}}').map((text) => JSON.parse(text) as unknown)),
);

const anyHazard = fc.oneof(stringHazards, numberHazards, structureHazards, dateHazards);

/** Hazards a field of this schema is most likely to mishandle, and now and then any hazard at all. */
export function hazardFor(schema: JsonSchema, name: string): fc.Arbitrary<Hazard> {
  const types = [schema.type, ...((schema.anyOf ?? schema.oneOf ?? []) as JsonSchema[]).map((branch) => branch.type)].flat().filter(Boolean);
  const typed: Array<fc.Arbitrary<Hazard>> = [];
  if (types.includes('string') || types.length === 0) typed.push(stringHazards);
  if (types.includes('integer') || types.includes('number')) typed.push(numberHazards);
  if (types.includes('array') || types.includes('object')) typed.push(structureHazards);
  const enumValues = (schema.enum ?? []) as unknown[];
  if (typeof enumValues[0] === 'string') {
    const first = enumValues[0];
    typed.push(labeled('unknown-enum', fc.constantFrom(`${first}x`, first.toUpperCase() === first ? first.toLowerCase() : first.toUpperCase(), `${first}\u0000`, 'bogus')));
  }
  if (schema.format === 'date-time' || schema.format === 'date' || /(^|_)(at|after|before|start|end|since|until|as_of|date)$/.test(name)) typed.push(dateHazards);
  // A boolean or null field has no hazards of its own type: any other type is its hazard.
  if (typed.length === 0) return anyHazard;
  return fc.oneof({ arbitrary: fc.oneof(...typed), weight: 4 }, { arbitrary: anyHazard, weight: 1 });
}

/** Path segments, sent as they are (already percent-encoded or deliberately not). */
const segmentHazards = fc.oneof(
  labeled('encoded-nul', fc.constantFrom('%00', 'a%00b', '%00%00')),
  labeled('dot-segment', fc.constantFrom('..', '.', '%2e%2e', '%2E', '..%2F..%2Fetc%2Fpasswd', '%2e%2e%5c')),
  labeled('encoded-slash', fc.constantFrom('%2F', 'a%2Fb', '%5C', 'a%2F..%2Fb')),
  labeled('bad-percent', fc.constantFrom('%', '%zz', '%C0%AE', '%FF', '%ED%A0%80', '%E2%82', '%25%30%30')),
  labeled('overlong-segment', fc.integer({ min: 200, max: 12_000 }).map((length) => 'x'.repeat(length))),
  labeled('odd-id', fc.constantFrom('0', '-1', '2147483648', '9223372036854775808', 'NaN', 'null', 'undefined', '__proto__', 'constructor', '%20', '+', '*', "'", '"', ';', '%22%3B--')),
  stringHazards.map(({ label, value }) => ({ label, value: percentEncode(String(value)) })),
);

/**
 * Percent-encoding that keeps a lone surrogate as its own (WTF-8) bytes: encodeURIComponent throws
 * on one, and a server must cope with the bytes a client sends anyway.
 */
export function percentEncode(text: string): string {
  let encoded = '';
  for (let index = 0; index < text.length; index += 1) {
    const unit = text.charCodeAt(index);
    const isHigh = unit >= 0xd800 && unit <= 0xdbff;
    const isLow = unit >= 0xdc00 && unit <= 0xdfff;
    const pairsWithNext = isHigh && index + 1 < text.length && text.charCodeAt(index + 1) >= 0xdc00 && text.charCodeAt(index + 1) <= 0xdfff;
    if (pairsWithNext) {
      encoded += encodeURIComponent(text.slice(index, index + 2));
      index += 1;
    } else if (isHigh || isLow) {
      encoded += [0xe0 | (unit >> 12), 0x80 | ((unit >> 6) & 0x3f), 0x80 | (unit & 0x3f)].map((byte) => `%${byte.toString(16).toUpperCase()}`).join('');
    } else encoded += encodeURIComponent(text[index]!);
  }
  return encoded;
}

const headerHazards = fc.oneof(
  stringHazards,
  labeled('header-injection', fc.constantFrom('a\r\nX-Injected: 1', 'a\nb', 'a\rb')),
  labeled('odd-credential', fc.constantFrom('Bearer', 'Bearer ', 'Bearer ko_', 'Bearer rsk_', `Bearer ko_${'0'.repeat(64)}`, 'Client a.b.c', 'Client ', 'Basic Og==', 'bearer  x', 'Bearer\u0000ko_')),
);

const bodyFaults: fc.Arbitrary<BodyFault> = fc.oneof(
  fc.double({ min: 0, max: 0.99, noNaN: true }).map((keepFraction) => ({ label: 'truncated' as const, keepFraction })),
  fc.constantFrom(
    'text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data', 'application/xml', '', 'application/json; charset=utf-16',
    'application/json; charset=latin9', 'application/json; charset=iso-8859-1', 'application/json;;;', 'application/merge-patch+json',
  ).map((contentType) => ({ label: 'content-type' as const, contentType })),
  fc.record({
    encoding: fc.constantFrom('gzip', 'deflate', 'br', 'compress', 'x-bogus', 'gzip, gzip', 'identity, gzip'),
    bytes: fc.constantFrom('plain' as const, 'garbage' as const, 'truncated-gzip' as const, 'gzip-bomb' as const),
  }).map((fault) => ({ label: 'content-encoding' as const, ...fault })),
  fc.constantFrom(1_000_000_000, 2 ** 31, 2 ** 53).map((declared) => ({ label: 'declared-length' as const, declared })),
  fc.constantFrom('', 'null', '[]', '"fuzz"', '1', 'true', '{', '}', '{"a":1,"a":2}', '{"a":1}garbage', '[' + '1,'.repeat(10) + ']').map((text) => ({ label: 'not-an-object' as const, text })),
  fc.constant({ label: 'invalid-utf8' as const }),
  fc.constant({ label: 'byte-order-mark' as const }),
);

/** The mutations of one operation: any one field, path parameter, query parameter, header, or the body as bytes. */
export function mutationsOf(operation: Operation): fc.Arbitrary<Mutation> {
  const choices: Array<{ arbitrary: fc.Arbitrary<Mutation>; weight: number }> = [];
  if (operation.pathParams.length) {
    choices.push({ weight: 2, arbitrary: fc.record({ kind: fc.constant('path' as const), name: fc.constantFrom(...operation.pathParams), hazard: segmentHazards }) });
  }
  const queryNames = Object.keys(operation.query);
  if (queryNames.length) {
    choices.push({ weight: 2, arbitrary: fc.constantFrom(...queryNames).chain((name) => hazardFor(operation.query[name]!.schema, name).map((hazard) => ({ kind: 'query' as const, name, hazard }))) });
  }
  const headerNames = [...Object.keys(operation.headers), ...(operation.credential === 'none' ? [] : ['authorization'])];
  if (headerNames.length) {
    choices.push({ weight: 1, arbitrary: fc.record({ kind: fc.constant('header' as const), name: fc.constantFrom(...headerNames), hazard: headerHazards }) });
  }
  if (operation.body) {
    const locations = fieldLocations(operation.body.schema);
    const fieldWeight = Math.min(6, locations.length);
    choices.push({
      weight: fieldWeight,
      arbitrary: fc.constantFrom(...locations).chain((location) =>
        hazardFor(location.schema, String(location.path.at(-1) ?? '')).map((hazard) => ({ kind: 'field' as const, path: location.path, hazard }))),
    });
    choices.push({ weight: 2, arbitrary: bodyFaults.map((fault) => ({ kind: 'body' as const, fault })) });
  } else if (operation.method !== 'get') {
    choices.push({ weight: 1, arbitrary: bodyFaults.map((fault) => ({ kind: 'body' as const, fault })) });
  }
  if (choices.length === 0) {
    // A GET with nothing to spoil still gets a junk query parameter and a bad credential header.
    choices.push({ weight: 1, arbitrary: fc.record({ kind: fc.constant('query' as const), name: fc.constantFrom('fuzz', 'limit', '__proto__'), hazard: anyHazard }) });
    choices.push({ weight: 1, arbitrary: fc.record({ kind: fc.constant('header' as const), name: fc.constant('authorization'), hazard: headerHazards }) });
  }
  return fc.oneof(...choices);
}

/** A case for any of the operations; shrinking keeps the operation and makes the mutation smaller. */
export function caseArbitrary(operations: readonly Operation[]): fc.Arbitrary<FuzzCase> {
  return fc.oneof(
    ...operations.map((operation, operationIndex) =>
      fc.record({ operationIndex: fc.constant(operationIndex), variant: fc.nat({ max: 7 }), mutation: mutationsOf(operation) }),
    ),
  );
}
