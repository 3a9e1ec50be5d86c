import busboy from 'busboy';
import type { Request } from 'express';
import { serviceError } from '../shared/errors.js';

/** A multipart/form-data body read into memory: its text fields and at most one file part. */
export interface MultipartBody {
  fields: Record<string, string>;
  file?: { buffer: Buffer; filename: string; mimeType: string };
}

/**
 * Reads a small multipart body (an audio file of at most `maxFileBytes`). A body that is not
 * multipart is invalid_multipart; a file over the limit is refused as soon as it passes it.
 */
export function readMultipart(req: Request, maxFileBytes: number): Promise<MultipartBody> {
  if (!req.is('multipart/form-data')) return Promise.reject(serviceError('invalid_multipart'));
  return new Promise((resolve, reject) => {
    let parser: busboy.Busboy;
    try {
      parser = busboy({ headers: req.headers, limits: { files: 1, fileSize: maxFileBytes, fields: 32, fieldSize: 64 * 1024 } });
    } catch {
      reject(serviceError('invalid_multipart'));
      return;
    }
    const body: MultipartBody = { fields: {} };
    let failed = false;
    const fail = (error: unknown) => {
      if (failed) return;
      failed = true;
      req.unpipe(parser);
      req.resume();
      reject(error);
    };
    parser.on('field', (name, value) => {
      body.fields[name] = value;
    });
    parser.on('file', (name, stream, info) => {
      if (name !== 'file') {
        stream.resume();
        return;
      }
      const chunks: Buffer[] = [];
      stream.on('data', (chunk: Buffer) => chunks.push(chunk));
      stream.on('limit', () => fail(serviceError('request_too_large', { message: `The file is larger than ${maxFileBytes} bytes.` })));
      stream.on('end', () => {
        if (!info.filename) fail(serviceError('missing_filename', { param: 'file' }));
        else body.file = { buffer: Buffer.concat(chunks), filename: info.filename, mimeType: info.mimeType };
      });
    });
    parser.on('error', () => fail(serviceError('invalid_multipart')));
    parser.on('close', () => {
      if (!failed) resolve(body);
    });
    req.pipe(parser);
  });
}
