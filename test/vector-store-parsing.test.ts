import JSZip from 'jszip';
import { Tiktoken } from 'js-tiktoken/lite';
import cl100k_base from 'js-tiktoken/ranks/cl100k_base';
import { describe, expect, it } from 'vitest';
import { AUTO_CHUNKING, chunkText, chunkingStrategyParam, encodeCl100k, type Chunk } from '../shared/vector-stores/chunking.js';
import { FileParseError, SUPPORTED_EXTENSIONS, extractText } from '../shared/vector-stores/parsing.js';

/** Text extraction and token chunking for vector-store ingest (shared/vector-stores/parsing.ts, chunking.ts). */

/** A one-page PDF written by hand: Helvetica, one line of text, a byte-exact xref table. */
function pdfWith(line: string): Buffer {
  const content = `BT /F1 18 Tf 72 720 Td (${line}) Tj ET`;
  const objects = [
    '<< /Type /Catalog /Pages 2 0 R >>',
    '<< /Type /Pages /Kids [3 0 R] /Count 1 >>',
    '<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>',
    `<< /Length ${Buffer.byteLength(content, 'latin1')} >>\nstream\n${content}\nendstream`,
    '<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>',
  ];
  let pdf = '%PDF-1.4\n';
  const offsets: number[] = [];
  objects.forEach((body, i) => {
    offsets.push(Buffer.byteLength(pdf, 'latin1'));
    pdf += `${i + 1} 0 obj\n${body}\nendobj\n`;
  });
  const xref = Buffer.byteLength(pdf, 'latin1');
  pdf += `xref\n0 ${objects.length + 1}\n0000000000 65535 f \n`;
  for (const offset of offsets) pdf += `${String(offset).padStart(10, '0')} 00000 n \n`;
  pdf += `trailer\n<< /Size ${objects.length + 1} /Root 1 0 R >>\nstartxref\n${xref}\n%%EOF\n`;
  return Buffer.from(pdf, 'latin1');
}

/** A minimal .docx: content types, the package relationship and a document of the given paragraphs. */
async function docxWith(paragraphs: string[]): Promise<Buffer> {
  const zip = new JSZip();
  zip.file(
    '[Content_Types].xml',
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>' +
      '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">' +
      '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>' +
      '<Default Extension="xml" ContentType="application/xml"/>' +
      '<Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/>' +
      '</Types>',
  );
  zip.file(
    '_rels/.rels',
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>' +
      '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">' +
      '<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="word/document.xml"/>' +
      '</Relationships>',
  );
  zip.file(
    'word/document.xml',
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>' +
      '<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>' +
      paragraphs.map((text) => `<w:p><w:r><w:t>${text}</w:t></w:r></w:p>`).join('') +
      '</w:body></w:document>',
  );
  return zip.generateAsync({ type: 'nodebuffer' });
}

async function parseFailure(bytes: Buffer, filename: string): Promise<FileParseError> {
  try {
    await extractText(bytes, filename);
  } catch (error) {
    if (error instanceof FileParseError) return error;
    throw error;
  }
  throw new Error(`expected ${filename} to fail`);
}

const text = (value: string) => Buffer.from(value, 'utf8');

describe('extractText', () => {
  it('lists the supported extensions', () => {
    expect([...SUPPORTED_EXTENSIONS].sort()).toEqual(['csv', 'docx', 'htm', 'html', 'json', 'markdown', 'md', 'pdf', 'txt']);
  });

  it('reads the text of a PDF', async () => {
    expect(await extractText(pdfWith('Quarterly revenue grew 12 percent'), 'report.PDF')).toBe('Quarterly revenue grew 12 percent');
  });

  it('reads the paragraphs of a DOCX', async () => {
    const docx = await docxWith(['Onboarding checklist', 'Every new hire gets a laptop on day one.']);
    expect(await extractText(docx, 'Handbook.docx')).toBe('Onboarding checklist\n\nEvery new hire gets a laptop on day one.');
  });

  it('turns HTML into text without scripts, styles, images or link targets', async () => {
    const html = `<!doctype html><html><head><title>Doc</title><style>.secret-style { color: red }</style>
      <script>var secretScript = 1;</script></head><body>
      <h1>Refund policy</h1><p>Refunds take <b>5 days</b>. See <a href="https://example.com/terms">the terms</a>.
      <img src="chart.png" alt="chart"></p><script>alert('secretInline')</script>
      <table><tr><th>Plan</th><th>Days</th></tr><tr><td>Pro</td><td>30</td></tr></table></body></html>`;
    const out = await extractText(text(html), 'policy.htm');
    expect(out).toContain('Refund policy');
    expect(out).toContain('Refunds take 5 days. See the terms.');
    expect(out).toMatch(/Plan +Days\nPro +30/);
    for (const absent of ['secret', 'color', 'alert', 'https://', 'chart', 'Doc']) expect(out).not.toContain(absent);
  });

  it('renders each CSV row as self-describing header: value lines', async () => {
    const csv = '\uFEFFname,city,notes\r\nAda,London,"first, programmer"\r\nGrace,,"line one\nline two"\r\n';
    expect(await extractText(text(csv), 'people.csv')).toBe(
      'name: Ada\ncity: London\nnotes: first, programmer\n\nname: Grace\nnotes: line one\nline two',
    );
  });

  it('renders JSON leaves as path: value lines', async () => {
    const json = JSON.stringify({ order: { id: 42, items: [{ sku: 'A-1', qty: 2 }], gift: false, note: null }, 'first name': 'Ada', tags: [] });
    expect(await extractText(text(json), 'order.json')).toBe(
      ['order.id: 42', 'order.items[0].sku: A-1', 'order.items[0].qty: 2', 'order.gift: false', 'order.note: null', '["first name"]: Ada', 'tags: []'].join('\n'),
    );
  });

  it('keeps markdown and text as they are, normalising BOM, line ends and blank runs', async () => {
    const markdown = '\uFEFF# Title\r\n\r\n\r\n\r\n- one\r\n- **two**\r\n\n\n';
    expect(await extractText(text(markdown), 'notes.md')).toBe('# Title\n\n- one\n- **two**');
    expect(await extractText(text('  hello\n\n\n\nworld  '), 'a.markdown')).toBe('hello\n\nworld');
    expect(await extractText(text('plain 中文 😀'), 'a.TXT')).toBe('plain 中文 😀');
  });

  it('rejects a PDF that does not parse', async () => {
    const error = await parseFailure(Buffer.from('%PDF-1.4 garbage', 'latin1'), 'broken.pdf');
    expect(error.code).toBe('invalid_file');
    expect(error.message).toMatch(/^The file is not a valid PDF: /);
  });

  it('rejects a .pdf that is not a PDF', async () => {
    const error = await parseFailure(text('just some text'), 'fake.pdf');
    expect(error).toMatchObject({ code: 'invalid_file', message: 'The file is not a valid PDF: it does not start with a %PDF- header.' });
  });

  it('rejects a .docx that is not a Word document', async () => {
    const random = Buffer.from(Array.from({ length: 256 }, (_, i) => (i * 73 + 11) % 256));
    expect(await parseFailure(random, 'random.docx')).toMatchObject({ code: 'invalid_file', message: expect.stringMatching(/not a ZIP archive/) });
    const truncated = (await docxWith(['x'])).subarray(0, 60);
    expect(await parseFailure(truncated, 'cut.docx')).toMatchObject({ code: 'invalid_file' });
    const zip = new JSZip();
    zip.file('hello.txt', 'not a document');
    const notWord = await zip.generateAsync({ type: 'nodebuffer' });
    expect(await parseFailure(notWord, 'other.docx')).toMatchObject({ code: 'invalid_file', message: expect.stringMatching(/main document part/) });
  });

  it('rejects text that is not UTF-8 or holds NUL bytes', async () => {
    expect(await parseFailure(Buffer.from([0x68, 0x69, 0xff, 0xfe, 0x80]), 'latin.txt')).toMatchObject({
      code: 'invalid_file',
      message: expect.stringMatching(/not UTF-8/),
    });
    expect(await parseFailure(Buffer.from('a\u0000b'), 'binary.md')).toMatchObject({ code: 'invalid_file', message: expect.stringMatching(/NUL/) });
  });

  it('rejects malformed JSON and CSV without quoting the file', async () => {
    const json = await parseFailure(text('{"secret-value": tru'), 'bad.json');
    expect(json.code).toBe('invalid_file');
    expect(json.message).not.toContain('secret');
    const csv = await parseFailure(text('a,b\n"secret-value,1\n'), 'bad.csv');
    expect(csv.code).toBe('invalid_file');
    expect(csv.message).not.toContain('secret');
  });

  it('refuses unknown types and names without an extension', async () => {
    const exe = await parseFailure(text('MZ'), 'setup.EXE');
    expect(exe).toMatchObject({ code: 'unsupported_file' });
    expect(exe.message).toBe('Files of type .exe cannot be searched; supported: .txt, .md, .html, .json, .csv, .pdf, .docx.');
    expect(await parseFailure(text('hello'), 'README')).toMatchObject({ code: 'unsupported_file' });
    expect(await parseFailure(text('hello'), '.bashrc')).toMatchObject({ code: 'unsupported_file' });
  });

  it('rejects a file with no text at all', async () => {
    for (const [bytes, name] of [
      [text(''), 'empty.txt'],
      [text(' \r\n\n\t '), 'blank.md'],
      [text('<html><body><img src="scan.png"><script>x()</script></body></html>'), 'image.html'],
      [text('[]'), 'empty.json'],
      [await docxWith([]), 'empty.docx'],
      [pdfWith(''), 'scan.pdf'],
    ] as const) {
      expect(await parseFailure(bytes, name)).toMatchObject({ code: 'invalid_file', message: 'The file contains no extractable text.' });
    }
  });
});

const encoder = new Tiktoken(cl100k_base);
const encode = (value: string) => encoder.encode(value, [], []);

/** Distinct sentences, so equal token runs come only from real overlap. */
function english(sentences: number): string {
  const words = ['revenue', 'customer', 'growth', 'quarter', 'market', 'product', 'support', 'pricing', 'region', 'team'];
  return Array.from({ length: sentences }, (_, i) => `Sentence ${i} is about ${words[i % 10]} and ${words[(i * 7) % 10]} in year ${2000 + (i % 25)}.`).join(' ');
}

function expectNoReplacementChar(chunks: Chunk[]): void {
  for (const chunk of chunks) expect(chunk.text).not.toContain('\uFFFD');
}

describe('encodeCl100k', () => {
  it("gives js-tiktoken's cl100k_base tokens", () => {
    const samples = [
      english(50),
      "It's 3.14159 o'clock, isn't it? They'll say we'd've known.\r\n\r\n\tIndented   spaces   \n\n\n",
      'function f(x) { return x ** 2 >= 10 ? "big" : `small ${x}`; } // ==== ---- ____ ####',
      '季度收入增长了百分之十二，主要来自企业客户。この四半期の売上高は増加しました。매출이 증가했습니다.',
      'Ünïcödé naïve café résumé Ελληνικά русский язык עברית العربية हिन्दी ภาษาไทย',
      '👩‍👩‍👧‍👦🇯🇵🧑🏽‍🚀😀 emoji 🎉🎉🎉 and symbols ∑∫√ ©®™ ½ ¾',
      'special strings <|endoftext|> <|fim_prefix|> <|endofprompt|> stay text',
      'lone surrogate \ud800 here',
      '-'.repeat(1500) + '鑫龘齉𠮷𩸽'.repeat(100) + ' '.repeat(300) + 'x',
    ];
    for (const sample of samples) expect(encodeCl100k(sample)).toEqual(encode(sample));
    expect(encodeCl100k('')).toEqual([]);
  });

  it('keeps a long piece without spaces or punctuation linear enough to chunk', () => {
    // js-tiktoken's own merge is quadratic in a piece's length (minutes for this); the heap merge is not.
    const chunks = chunkText('数据'.repeat(50_000), AUTO_CHUNKING);
    expect(chunks.length).toBeGreaterThan(10);
    expectNoReplacementChar(chunks);
  });
});

describe('chunkText', () => {
  it('cuts token windows of at most max that overlap by exactly the overlap, at a stride of max - overlap', () => {
    const source = english(400);
    const tokens = encode(source);
    const strategy = { max_chunk_size_tokens: 200, chunk_overlap_tokens: 50 };
    const chunks = chunkText(source, strategy);
    expect(chunks.length).toBeGreaterThan(3);
    chunks.forEach((chunk, i) => {
      expect(chunk.index).toBe(i);
      expect(chunk.tokens).toBeLessThanOrEqual(200);
      // ASCII text: every token edge is a character edge, so each window is the exact token slice.
      expect(encode(chunk.text)).toEqual(tokens.slice(i * 150, i * 150 + chunk.tokens));
    });
    for (let i = 0; i + 1 < chunks.length; i++) {
      expect(chunks[i]!.tokens).toBe(200);
      const current = tokens.slice(i * 150, i * 150 + 200);
      const next = tokens.slice((i + 1) * 150, (i + 1) * 150 + 200);
      expect(current.slice(-50)).toEqual(next.slice(0, 50));
    }
    const last = chunks.at(-1)!;
    expect((chunks.length - 1) * 150 + last.tokens).toBe(tokens.length);
  });

  it('uses 800 / 400 for auto and covers the whole text', () => {
    expect(AUTO_CHUNKING).toEqual({ max_chunk_size_tokens: 800, chunk_overlap_tokens: 400 });
    const source = english(600);
    const total = encode(source).length;
    const chunks = chunkText(source, AUTO_CHUNKING);
    expect(chunks.every((chunk) => chunk.tokens <= 800)).toBe(true);
    expect((chunks.length - 1) * 400 + chunks.at(-1)!.tokens).toBe(total);
  });

  it('returns one chunk for short text, none for empty text, and no overlap when it is zero', () => {
    expect(chunkText('', AUTO_CHUNKING)).toEqual([]);
    expect(chunkText('Hello world', AUTO_CHUNKING)).toEqual([{ index: 0, text: 'Hello world', tokens: 2 }]);
    const source = english(100);
    const chunks = chunkText(source, { max_chunk_size_tokens: 100, chunk_overlap_tokens: 0 });
    expect(chunks.map((chunk) => chunk.text).join('')).toBe(source);
  });

  it('treats special-token strings in a document as text', () => {
    const chunks = chunkText('before <|endoftext|> after', AUTO_CHUNKING);
    expect(chunks.map((chunk) => chunk.text)).toEqual(['before <|endoftext|> after']);
  });

  it('never cuts an emoji or a CJK character in half', () => {
    const emoji = '👩‍👩‍👧‍👦🇯🇵🧑🏽‍🚀😀'.repeat(60);
    const cjk = '季度收入增长了百分之十二，主要来自企业客户。鑫龘齉𠮷𩸽'.repeat(40);
    const mixed = `${english(20)} ${emoji} ${cjk} ${english(20)}`;
    for (const source of [emoji, cjk, mixed]) {
      for (const strategy of [
        { max_chunk_size_tokens: 100, chunk_overlap_tokens: 0 },
        { max_chunk_size_tokens: 101, chunk_overlap_tokens: 37 },
        { max_chunk_size_tokens: 150, chunk_overlap_tokens: 75 },
      ]) {
        const chunks = chunkText(source, strategy);
        expect(chunks.length).toBeGreaterThan(1);
        expectNoReplacementChar(chunks);
        for (const chunk of chunks) {
          expect(chunk.tokens).toBeLessThanOrEqual(strategy.max_chunk_size_tokens);
          expect(source).toContain(chunk.text);
        }
        if (strategy.chunk_overlap_tokens === 0) expect(chunks.map((chunk) => chunk.text).join('')).toBe(source);
      }
    }
  });
});

describe('chunkingStrategyParam', () => {
  const fixed = (max: number, overlap: number) => ({ type: 'static', static: { max_chunk_size_tokens: max, chunk_overlap_tokens: overlap } });

  it('accepts auto and static strategies within bounds', () => {
    expect(chunkingStrategyParam.parse({ type: 'auto' })).toEqual({ type: 'auto' });
    expect(chunkingStrategyParam.parse(fixed(100, 50))).toEqual(fixed(100, 50));
    expect(chunkingStrategyParam.parse(fixed(4096, 0))).toEqual(fixed(4096, 0));
    expect(chunkingStrategyParam.safeParse(fixed(800, 400)).success).toBe(true);
  });

  it('rejects sizes outside 100-4096, negative or fractional values and extra keys', () => {
    for (const value of [
      fixed(99, 0),
      fixed(4097, 0),
      fixed(800, -1),
      fixed(800.5, 0),
      { type: 'auto', static: { max_chunk_size_tokens: 800, chunk_overlap_tokens: 400 } },
      { type: 'static' },
      { ...fixed(800, 400), extra: true },
      { type: 'static', static: { max_chunk_size_tokens: 800, chunk_overlap_tokens: 400, extra: 1 } },
      { type: 'other' },
    ]) {
      expect(chunkingStrategyParam.safeParse(value).success).toBe(false);
    }
  });

  it('rejects an overlap over half of max, on the overlap field', () => {
    const result = chunkingStrategyParam.safeParse(fixed(800, 401));
    expect(result.success).toBe(false);
    expect(result.error?.issues[0]?.path).toEqual(['static', 'chunk_overlap_tokens']);
    expect(chunkingStrategyParam.safeParse(fixed(101, 51)).success).toBe(false);
    expect(chunkingStrategyParam.safeParse(fixed(101, 50)).success).toBe(true);
  });
});
