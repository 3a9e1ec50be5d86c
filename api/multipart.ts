import busboy from 'busboy';
import type { Readable } from 'node:stream';
import type { Request } from 'express';
import { serviceError } from '../shared/errors.js';
import { declaresMoreThan } from './middleware/base-app.js';
import { isStorableText } from '../shared/validation.js';

const MAX_FIELDS = 32;
const MAX_FIELD_BYTES = 64 * 1024;
/** What the text fields and the parts' headers and boundaries can add to the file's bytes. */
const MAX_FIELDS_BYTES = MAX_FIELDS * (MAX_FIELD_BYTES + 1024);

/** What readMultipartStreaming hands back: the text fields, and what `storeFile` made of the file part. */
export interface StreamedMultipart<T> {
  fields: Record<string, string>;
  file?: T;
  /** True when a part named `file` arrived without a filename (a plain field, not a file). */
  fileWithoutName: boolean;
}

export interface StreamingOptions<T> {
  maxFileBytes: number;
  /** Runs on each text field as it arrives; throwing refuses the upload before its bytes are read. */
  checkField?: (name: string, value: string) => void;
  /** Consumes the `file` part's stream (to storage); its failure fails the whole read. */
  storeFile: (stream: Readable, info: { filename: string; mimeType: string }) => Promise<T>;
}

/**
 * Reads a multipart body whose file part may be large (uploads up to FILES_MAX_BYTES): the file
 * streams into `storeFile` as it arrives, never whole in memory. A file over the limit is refused
 * with 413 request_too_large as soon as it passes it. When the read fails after `storeFile`
 * succeeded, the stored result is passed to `discard` so nothing is left behind.
 */
export function readMultipartStreaming<T>(req: Request, options: StreamingOptions<T>, discard: (stored: T) => Promise<void>): Promise<StreamedMultipart<T>> {
  if (!req.is('multipart/form-data')) return Promise.reject(serviceError('invalid_multipart'));
  if (declaresMoreThan(req, options.maxFileBytes + MAX_FIELDS_BYTES)) {
    // Refused before a byte is read, as jsonBody refuses a lying Content-Length; the rest is never read, so the connection ends.
    req.res?.setHeader('Connection', 'close');
    return Promise.reject(serviceError('request_too_large', { message: `The upload is larger than ${options.maxFileBytes} bytes.` }));
  }
  return new Promise((resolve, reject) => {
    let parser: busboy.Busboy;
    try {
      // One byte over the limit, so a file of exactly maxFileBytes passes (busboy flags a file that reaches its limit).
      parser = busboy({ headers: req.headers, limits: { files: 1, fileSize: options.maxFileBytes + 1, fields: MAX_FIELDS, fieldSize: MAX_FIELD_BYTES } });
    } catch {
      reject(serviceError('invalid_multipart'));
      return;
    }
    const body: StreamedMultipart<T> = { fields: {}, fileWithoutName: false };
    let storing: Promise<T | undefined> | undefined;
    let fileStream: Readable | undefined;
    let failed = false;
    const fail = (error: unknown) => {
      if (failed) return;
      failed = true;
      fileStream?.destroy(error instanceof Error ? error : new Error(String(error)));
      req.unpipe(parser);
      req.resume();
      // Refuse only once the store has cleaned up after itself (its temporary file removed, or what it
      // stored discarded), so a caller that hears of the refusal finds nothing left behind.
      void (storing ?? Promise.resolve(undefined))
        .then((stored) => (stored === undefined ? undefined : discard(stored)))
        .catch(() => undefined)
        .finally(() => reject(error));
    };
    parser.on('field', (name, value) => {
      if (name === 'file') body.fileWithoutName = true;
      // An own property even for "__proto__", so the schema sees (and refuses) it as the field it is.
      Object.defineProperty(body.fields, name, { value, enumerable: true, writable: true, configurable: true });
      try {
        options.checkField?.(name, value);
      } catch (error) {
        fail(error);
      }
    });
    parser.on('file', (name, stream, info) => {
      if (name !== 'file' || storing || failed) {
        stream.resume();
        return;
      }
      // Both are stored with the file: held to the text rule of request input (shared/validation.ts).
      if (!isStorableText(info.filename ?? '') || !isStorableText(info.mimeType)) {
        stream.resume();
        fail(serviceError('invalid_request', { param: 'file', message: "The file part's filename or content type holds a NUL character or is not Unicode text." }));
        return;
      }
      if (!info.filename) {
        stream.resume();
        fail(serviceError('missing_filename', { param: 'file' }));
        return;
      }
      fileStream = stream;
      // A failed read destroys this stream with the refusal, which the read answers itself: a store
      // that has not yet attached to the stream (or is done with it) must not turn that into an
      // uncaught 'error' that ends the process.
      stream.on('error', () => undefined);
      stream.on('limit', () => fail(serviceError('request_too_large', { message: `The file is larger than ${options.maxFileBytes} bytes.` })));
      storing = options.storeFile(stream, { filename: info.filename, mimeType: info.mimeType }).then(
        (stored) => {
          body.file = stored;
          return stored;
        },
        (error: unknown) => {
          fail(error);
          return undefined;
        },
      );
    });
    parser.on('error', () => fail(serviceError('invalid_multipart')));
    parser.on('close', () => {
      // A failure meanwhile has already rejected and discarded what was stored.
      void (storing ?? Promise.resolve(undefined)).then(() => {
        if (!failed) resolve(body);
      });
    });
    req.on('aborted', () => fail(serviceError('invalid_multipart', { message: 'The upload was interrupted.' })));
    req.pipe(parser);
  });
}
