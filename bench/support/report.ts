import { readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';

/**
 * The figures `npm run bench` measured, for bench/README.md: each section's tables (the same rows
 * it prints), its targets with whether they were met, and the machine, date and command. Writing
 * replaces the sections that ran and keeps the others, so the page always holds the latest figure
 * of every benchmark and never a history.
 */
export type Row = Record<string, string | number | undefined>;

export interface Target {
  figure: string;
  target: string;
  value: string;
  met: boolean;
}

interface Section {
  title: string;
  command: string;
  about?: string;
  tables: Array<{ caption: string; rows: Row[] }>;
  targets: Target[];
}

const sections = new Map<string, Section>();

/** Opens a section of the page (`BENCH_ONLY=<id>` runs just it, unless another command measured it). */
export function section(id: string, title: string, about?: string, command = `BENCH_ONLY=${id} npm run bench`): void {
  sections.set(id, { title, command, ...(about && { about }), tables: [], targets: [] });
}

/** The page's sections in order; the last, the fuzz suite's long run, is written by `npm run fuzz`. */
export const SECTION_ORDER = ['front-door', 'hot-path', 'gateway', 'gateway-as-started', 'webhooks', 'batch', 'cpu', 'emulator-embeddings', 'vector-stores', 'assistants', 'brains', 'packs', 'hive', 'faults', 'fuzz'];

/** Prints a table and keeps it for the page. */
export function table(id: string, caption: string, rows: Row[]): void {
  console.log(caption);
  console.table(rows);
  sections.get(id)?.tables.push({ caption, rows });
}

/** A figure with a target from the spec or the issue that set it. */
export function goal(id: string, entry: Target): void {
  console.log(`target ${entry.met ? 'met' : 'NOT met'}: ${entry.figure} ${entry.value} (target ${entry.target})`);
  sections.get(id)?.targets.push(entry);
}

const START = (id: string) => `<!-- bench:${id}:start -->`;
const END = (id: string) => `<!-- bench:${id}:end -->`;

export function machine(): string {
  const cpu = os.cpus()[0]?.model.trim() ?? 'unknown CPU';
  return `${cpu}, ${os.availableParallelism()} cores, ${Math.round(os.totalmem() / 2 ** 30)} GiB, Node ${process.version}`;
}

function render(id: string, entry: Section, date: string): string {
  const lines = [START(id), `## ${entry.title}`, '', `Measured ${date} on ${machine()} with \`${entry.command}\`.`, ''];
  if (entry.about) lines.push(entry.about, '');
  if (entry.targets.length > 0) {
    lines.push('| figure | value | target | met |', '|---|---|---|---|');
    for (const goal of entry.targets) lines.push(`| ${goal.figure} | ${goal.value} | ${goal.target} | ${goal.met ? 'yes' : '**no**'} |`);
    lines.push('');
  }
  for (const { caption, rows } of entry.tables) {
    const columns = [...new Set(rows.flatMap((row) => Object.keys(row)))];
    lines.push(`**${caption}**`, '', `| ${columns.join(' | ')} |`, `|${columns.map(() => '---').join('|')}|`);
    for (const row of rows) lines.push(`| ${columns.map((column) => String(row[column] ?? '')).join(' | ')} |`);
    lines.push('');
  }
  lines.push(END(id));
  return lines.join('\n');
}

const INTRO = `# Benchmarks

\`npm run bench\` measures the platform against the real PostgreSQL, Redis and Temporal of this
machine, each process on its own as in production, and rewrites the sections of this page that
ran (\`BENCH_ONLY=<section> npm run bench\` runs one; the others keep their last figures). Figures
are printed and recorded, never asserted: tests stay free of timing. Each section names the
machine, date and command of its figures.
`;

/**
 * Rewrites the page: the intro, then every section in `order`, the ones that ran with their new
 * figures and the others as they were.
 */
export function writeReport(file: string, order: string[]): void {
  let page = '';
  try {
    page = readFileSync(file, 'utf8');
  } catch {
    // A first run writes the page from scratch.
  }
  const date = new Date().toISOString().slice(0, 10);
  const blocks = order.flatMap((id) => {
    const entry = sections.get(id);
    if (entry) return [render(id, entry, date)];
    const start = page.indexOf(START(id));
    const end = page.indexOf(END(id));
    return start >= 0 && end > start ? [page.slice(start, end + END(id).length)] : [];
  });
  writeFileSync(file, `${INTRO}\n${blocks.join('\n\n')}\n`);
}
