import path from 'node:path';
import { parse as parseCsv } from 'csv-parse/sync';
import { convert as htmlToText } from 'html-to-text';
import mammoth from 'mammoth';
import { extractText as extractPdfText, getDocumentProxy } from 'unpdf';

/**
 * Text extraction for vector-store file ingest: one parser per file type, chosen by the file's
 * extension and checked against its first bytes where that is cheap. Every failure is a
 * FileParseError whose message is safe to show the caller: it says why, never quotes the file
 * (parser messages that may quote content, such as JSON.parse's and csv-parse's, are not passed on).
 */
export class FileParseError extends Error {
  constructor(
    readonly code: 'unsupported_file' | 'invalid_file',
    message: string,
  ) {
    super(message);
    this.name = 'FileParseError';
  }
}

export const SUPPORTED_EXTENSIONS = ['txt', 'md', 'markdown', 'html', 'htm', 'json', 'csv', 'pdf', 'docx'] as const;
export type SupportedExtension = (typeof SUPPORTED_EXTENSIONS)[number];

/** The list the unsupported_file message names (markdown and htm are spellings of md and html). */
const SUPPORTED_LIST = '.txt, .md, .html, .json, .csv, .pdf, .docx';

const PDF_MAGIC = Buffer.from('%PDF-', 'latin1');
const ZIP_MAGIC = Buffer.from([0x50, 0x4b, 0x03, 0x04]);
/** OLE2 compound file: a legacy binary .doc (or .xls) renamed to .docx. */
const OLE2_MAGIC = Buffer.from([0xd0, 0xcf, 0x11, 0xe0, 0xa1, 0xb1, 0x1a, 0xe1]);

const NO_TEXT = 'The file contains no extractable text.';

/** The file's text, normalised (no BOM, LF line ends, at most one blank line in a row, trimmed). */
export async function extractText(bytes: Buffer, filename: string): Promise<string> {
  const extension = extensionOf(filename);
  let text: string;
  switch (extension) {
    case 'pdf':
      text = await pdfText(bytes);
      break;
    case 'docx':
      text = await docxText(bytes);
      break;
    case 'html':
    case 'htm':
      text = htmlText(decodeUtf8(bytes, 'HTML'));
      break;
    case 'csv':
      text = csvText(decodeUtf8(bytes, 'CSV'));
      break;
    case 'json':
      text = jsonText(decodeUtf8(bytes, 'JSON'));
      break;
    case 'md':
    case 'markdown':
      text = decodeUtf8(bytes, 'Markdown');
      break;
    case 'txt':
      text = decodeUtf8(bytes, 'text');
      break;
  }
  const normalised = normalise(text);
  if (normalised === '') throw new FileParseError('invalid_file', NO_TEXT);
  return normalised;
}

function extensionOf(filename: string): SupportedExtension {
  // Both separators: a name from a Windows client may carry a path.
  const base = path.posix.basename(filename.replaceAll('\\', '/'));
  const extension = path.posix.extname(base).slice(1).toLowerCase();
  if ((SUPPORTED_EXTENSIONS as readonly string[]).includes(extension)) return extension as SupportedExtension;
  if (extension === '') {
    throw new FileParseError('unsupported_file', `Files without an extension cannot be searched; supported: ${SUPPORTED_LIST}.`);
  }
  // The extension comes from the caller's file name: named only when short and plain.
  const type = /^[a-z0-9]{1,16}$/.test(extension) ? `Files of type .${extension}` : 'Files of this type';
  throw new FileParseError('unsupported_file', `${type} cannot be searched; supported: ${SUPPORTED_LIST}.`);
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

function decodeUtf8(bytes: Buffer, kind: string): string {
  if (bytes.includes(0)) {
    throw new FileParseError('invalid_file', `The file is not a valid ${kind} file: it contains NUL bytes, so it looks binary.`);
  }
  try {
    return utf8.decode(bytes);
  } catch {
    throw new FileParseError('invalid_file', `The file is not a valid ${kind} file: it is not UTF-8 encoded text.`);
  }
}

function normalise(text: string): string {
  return text
    .replace(/^\uFEFF/, '')
    .replace(/\r\n?/g, '\n')
    .replace(/\n{3,}/g, '\n\n')
    .trim();
}

async function pdfText(bytes: Buffer): Promise<string> {
  const invalid = (reason: string) => new FileParseError('invalid_file', `The file is not a valid PDF: ${reason}.`);
  if (!startsWith(bytes, PDF_MAGIC)) throw invalid('it does not start with a %PDF- header');
  let pdf: Awaited<ReturnType<typeof getDocumentProxy>>;
  try {
    // A copy: PDF.js may transfer (detach) the buffer it is given, and the caller still owns `bytes`.
    pdf = await getDocumentProxy(new Uint8Array(bytes), { verbosity: 0 });
  } catch (error) {
    throw invalid(pdfReason(error));
  }
  try {
    const { text } = await extractPdfText(pdf, { mergePages: true });
    return text;
  } catch (error) {
    throw invalid(pdfReason(error));
  } finally {
    await pdf.destroy().catch(() => {});
  }
}

/** PDF.js's exception classes, by name; their messages are not passed on. */
function pdfReason(error: unknown): string {
  const name = error instanceof Error ? error.name : '';
  if (name === 'PasswordException') return 'it is password-protected';
  if (name === 'InvalidPDFException') return 'its structure is damaged or incomplete';
  return 'it could not be read';
}

async function docxText(bytes: Buffer): Promise<string> {
  const invalid = (reason: string) => new FileParseError('invalid_file', `The file is not a valid Word (.docx) document: ${reason}.`);
  if (startsWith(bytes, OLE2_MAGIC)) throw invalid('it is a legacy binary .doc file; save it as .docx');
  if (!startsWith(bytes, ZIP_MAGIC)) throw invalid('it is not a ZIP archive');
  let result: { value: string };
  try {
    result = await mammoth.extractRawText({ buffer: bytes });
  } catch (error) {
    const message = error instanceof Error ? error.message : '';
    if (/main document part/i.test(message)) throw invalid('it has no main document part (word/document.xml)');
    if (/central directory|zip|corrupt|compression/i.test(message)) throw invalid('the ZIP archive is damaged');
    throw invalid('it could not be read');
  }
  return result.value;
}

const HEADINGS = ['h1', 'h2', 'h3', 'h4', 'h5', 'h6'].map((selector) => ({ selector, options: { uppercase: false } }));

/** Readable text of the body: no scripts, styles, images or link targets; tables as aligned columns. */
function htmlText(html: string): string {
  try {
    return htmlToText(html, {
      wordwrap: false,
      selectors: [
        { selector: 'img', format: 'skip' },
        { selector: 'noscript', format: 'skip' },
        { selector: 'a', options: { ignoreHref: true } },
        { selector: 'table', format: 'dataTable', options: { uppercaseHeaderCells: false } },
        ...HEADINGS,
      ],
    });
  } catch {
    throw new FileParseError('invalid_file', 'The file is not a valid HTML file: it could not be converted to text.');
  }
}

/**
 * One block per record, one `header: value` line per non-empty field, blocks separated by a blank
 * line, so each row still says what its values are when it lands in a chunk of its own.
 */
function csvText(csv: string): string {
  let rows: string[][];
  try {
    rows = parseCsv(csv, { bom: true, skip_empty_lines: true, relax_column_count: true }) as string[][];
  } catch (error) {
    // csv-parse's messages can quote field values; pass on only the line it stopped at.
    const line = typeof (error as { lines?: unknown }).lines === 'number' ? ` (near line ${(error as { lines: number }).lines})` : '';
    throw new FileParseError('invalid_file', `The file is not a valid CSV file: its quoting or structure is broken${line}.`);
  }
  const [header, ...records] = rows;
  if (!header) return '';
  const names = header.map((name, i) => name.trim() || `column ${i + 1}`);
  // A header-only file still has text: its column names.
  if (records.length === 0) return names.join(', ');
  const blocks: string[] = [];
  for (const record of records) {
    const lines: string[] = [];
    record.forEach((value, i) => {
      if (value.trim() !== '') lines.push(`${names[i] ?? `column ${i + 1}`}: ${value}`);
    });
    if (lines.length > 0) blocks.push(lines.join('\n'));
  }
  return blocks.join('\n\n');
}

/**
 * One `path.to.key: value` line per leaf, in document order (`items[0].name: …`; keys that are not
 * plain identifiers are quoted: `["first name"]`). Walked with an explicit stack, so a deeply
 * nested document cannot overflow the call stack.
 */
function jsonText(json: string): string {
  let root: unknown;
  try {
    root = JSON.parse(json);
  } catch {
    // JSON.parse's message quotes the text around the error; it is not passed on.
    throw new FileParseError('invalid_file', 'The file is not valid JSON: it could not be parsed.');
  }
  const lines: string[] = [];
  const stack: Array<{ path: string; value: unknown }> = [{ path: '', value: root }];
  while (stack.length > 0) {
    const { path: at, value } = stack.pop()!;
    if (value !== null && typeof value === 'object') {
      const entries = Array.isArray(value)
        ? value.map((item, i) => [`${at}[${i}]`, item] as const)
        : Object.entries(value).map(([key, item]) => [joinKey(at, key), item] as const);
      if (entries.length === 0) {
        if (at !== '') lines.push(`${at}: ${Array.isArray(value) ? '[]' : '{}'}`);
        continue;
      }
      for (let i = entries.length - 1; i >= 0; i--) {
        const [childPath, item] = entries[i]!;
        stack.push({ path: childPath, value: item });
      }
      continue;
    }
    const leaf = typeof value === 'string' ? value : String(value);
    lines.push(at === '' ? leaf : `${at}: ${leaf}`);
  }
  return lines.join('\n');
}

const IDENTIFIER = /^[\p{L}_$][\p{L}\p{N}_$-]*$/u;

function joinKey(at: string, key: string): string {
  if (IDENTIFIER.test(key)) return at === '' ? key : `${at}.${key}`;
  return `${at}[${JSON.stringify(key)}]`;
}

function startsWith(bytes: Buffer, magic: Buffer): boolean {
  return bytes.length >= magic.length && bytes.subarray(0, magic.length).equals(magic);
}
