import { StringDecoder } from 'node:string_decoder';

/**
 * JSONL read as a stream: one line at a time, never the whole file. A line longer than
 * `maxLineBytes` is not held either: it is reported as too long and skipped to its newline.
 */
export type JsonlLine = { lineNumber: number; text: string; tooLong?: false } | { lineNumber: number; text?: undefined; tooLong: true };

export async function* readJsonlLines(source: AsyncIterable<Buffer | string>, maxLineBytes: number): AsyncGenerator<JsonlLine> {
  const decoder = new StringDecoder('utf8');
  let pending: string[] = [];
  let pendingBytes = 0;
  let skipping = false;
  let lineNumber = 0;

  const take = (): JsonlLine => {
    lineNumber += 1;
    if (skipping) {
      skipping = false;
      return { lineNumber, tooLong: true };
    }
    const text = pending.join('').replace(/\r$/, '');
    pending = [];
    pendingBytes = 0;
    return { lineNumber, text };
  };

  for await (const chunk of source) {
    const text = typeof chunk === 'string' ? chunk : decoder.write(chunk);
    let start = 0;
    for (let newline = text.indexOf('\n'); newline !== -1; newline = text.indexOf('\n', start)) {
      if (!skipping) pending.push(text.slice(start, newline));
      yield take();
      start = newline + 1;
    }
    if (start < text.length && !skipping) {
      const rest = text.slice(start);
      pendingBytes += Buffer.byteLength(rest);
      if (pendingBytes > maxLineBytes) {
        skipping = true;
        pending = [];
        pendingBytes = 0;
      } else pending.push(rest);
    }
  }
  const tail = decoder.end();
  if (tail && !skipping) pending.push(tail);
  if (skipping || pending.some((part) => part.length > 0)) yield take();
}
