import { createHash } from 'node:crypto';
import { deflateSync } from 'node:zlib';
import busboy from 'busboy';
import type { Request } from 'express';
import { z } from 'zod';
import { countTokens, deterministicReply } from '../../core.js';
import { invalidRequest } from './errors.js';
import { parseBody, type Endpoint } from './endpoint.js';

/**
 * Images, transcriptions and speech. Images are real (1x1) PNGs; transcripts are deterministic
 * text from the audio file's sha256; speech is deterministic bytes from the input text behind the
 * format's magic number. Those bytes are NOT playable audio: they let tests check content types,
 * sizes and byte-for-byte determinism, nothing more.
 */

// ----- images -------------------------------------------------------------------------------

const CRC_TABLE = Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});

function crc32(bytes: Buffer): number {
  let crc = 0xffffffff;
  for (const byte of bytes) crc = CRC_TABLE[(crc ^ byte) & 0xff]! ^ (crc >>> 8);
  return (crc ^ 0xffffffff) >>> 0;
}

function pngChunk(type: string, data: Buffer): Buffer {
  const length = Buffer.alloc(4);
  length.writeUInt32BE(data.length);
  const body = Buffer.concat([Buffer.from(type, 'ascii'), data]);
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(body));
  return Buffer.concat([length, body, crc]);
}

/** A valid 1x1 RGB PNG whose colour comes from the prompt, so each image is deterministic. */
export function onePixelPng(seed: string): Buffer {
  const [red, green, blue] = createHash('sha256').update(seed).digest();
  const header = Buffer.alloc(13);
  header.writeUInt32BE(1, 0); // width
  header.writeUInt32BE(1, 4); // height
  header.writeUInt8(8, 8); // bit depth
  header.writeUInt8(2, 9); // colour type: RGB
  const scanline = Buffer.from([0, red!, green!, blue!]); // filter byte, then one pixel
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    pngChunk('IHDR', header),
    pngChunk('IDAT', deflateSync(scanline)),
    pngChunk('IEND', Buffer.alloc(0)),
  ]);
}

const ImageRequest = z.looseObject({
  model: z.string(),
  prompt: z.string().min(1),
  n: z.number().int().min(1).max(10).nullish(),
});

export const imageGenerations: Endpoint = {
  path: '/images/generations',
  kind: 'image',
  handle({ res, model, body }) {
    const request = parseBody(ImageRequest, body);
    const count = request.n ?? 1;
    const data = Array.from({ length: count }, (_, i) => ({ b64_json: onePixelPng(`${model.model}\n${request.prompt}\n${i}`).toString('base64') }));
    const promptTokens = countTokens(request.prompt);
    // gpt-image-1 reports token usage; the other image models do not.
    const usage = model.model === 'gpt-image-1' ? { usage: { input_tokens: promptTokens, input_tokens_details: { text_tokens: promptTokens, image_tokens: 0 }, output_tokens: 272 * count, total_tokens: promptTokens + 272 * count } } : {};
    res.json({ created: Math.floor(Date.now() / 1000), data, ...usage });
  },
};

// ----- transcriptions -----------------------------------------------------------------------

interface UploadedFile {
  filename: string;
  bytes: Buffer;
}

const MAX_AUDIO_BYTES = 25 * 1024 * 1024;

/** Reads a multipart form: text fields as strings, files as their name and bytes. */
function readMultipart(req: Request): Promise<Record<string, unknown>> {
  if (!req.is('multipart/form-data')) return Promise.reject(invalidRequest('The request must be multipart/form-data.', 'file'));
  return new Promise((resolve, reject) => {
    const fields: Record<string, unknown> = {};
    const parser = busboy({ headers: req.headers, limits: { fileSize: MAX_AUDIO_BYTES } });
    parser.on('field', (name, value) => {
      fields[name] = value;
    });
    parser.on('file', (name, stream, info) => {
      const chunks: Buffer[] = [];
      stream.on('data', (chunk: Buffer) => chunks.push(chunk));
      stream.on('limit', () => reject(invalidRequest('The audio file is larger than 25 MB.', name)));
      stream.on('end', () => {
        fields[name] = { filename: info.filename ?? name, bytes: Buffer.concat(chunks) } satisfies UploadedFile;
      });
    });
    parser.on('close', () => resolve(fields));
    parser.on('error', (error) => reject(invalidRequest(`The multipart body could not be read: ${(error as Error).message}`)));
    req.pipe(parser);
  });
}

const TranscriptionRequest = z.looseObject({
  model: z.string(),
  file: z.custom<UploadedFile>((value) => typeof value === 'object' && value !== null && Buffer.isBuffer((value as UploadedFile).bytes)),
  response_format: z.enum(['json', 'text', 'verbose_json', 'srt', 'vtt']).optional(),
  language: z.string().optional(),
});

function timestamp(seconds: number, separator: ',' | '.'): string {
  const ms = Math.round(seconds * 1000);
  const pad = (value: number, width = 2) => String(value).padStart(width, '0');
  return `${pad(Math.floor(ms / 3_600_000))}:${pad(Math.floor(ms / 60_000) % 60)}:${pad(Math.floor(ms / 1000) % 60)}${separator}${pad(ms % 1000, 3)}`;
}

export const audioTranscriptions: Endpoint = {
  path: '/audio/transcriptions',
  kind: 'speech_to_text',
  readBody: readMultipart,
  handle({ res, model, body }) {
    const request = parseBody(TranscriptionRequest, body);
    const audioHash = createHash('sha256').update(request.file.bytes).digest('hex');
    const text = deterministicReply(model.model, `audio:${audioHash}`).text;
    // As if the file were 16 kHz 16-bit mono PCM.
    const duration = Math.max(0.01, Math.round((request.file.bytes.length / 32_000) * 100) / 100);
    switch (request.response_format ?? 'json') {
      case 'text':
        res.type('text/plain').send(`${text}\n`);
        return;
      case 'srt':
        res.type('text/plain').send(`1\n${timestamp(0, ',')} --> ${timestamp(duration, ',')}\n${text}\n\n`);
        return;
      case 'vtt':
        res.type('text/vtt').send(`WEBVTT\n\n${timestamp(0, '.')} --> ${timestamp(duration, '.')}\n${text}\n\n`);
        return;
      case 'verbose_json':
        res.json({ task: 'transcribe', language: request.language ?? 'english', duration, text, segments: [] });
        return;
      default:
        res.json({ text });
    }
  },
};

// ----- speech -------------------------------------------------------------------------------

const AUDIO_FORMATS = {
  mp3: { contentType: 'audio/mpeg', magic: Buffer.from('ID3\x04\x00\x00\x00\x00\x00\x00', 'latin1') },
  opus: { contentType: 'audio/ogg', magic: Buffer.from('OggS', 'latin1') },
  aac: { contentType: 'audio/aac', magic: Buffer.from([0xff, 0xf1]) },
  flac: { contentType: 'audio/flac', magic: Buffer.from('fLaC', 'latin1') },
  wav: { contentType: 'audio/wav', magic: Buffer.from('RIFF\x00\x00\x00\x00WAVE', 'latin1') },
  pcm: { contentType: 'audio/pcm', magic: Buffer.alloc(0) },
} as const;

const SpeechRequest = z.looseObject({
  model: z.string(),
  input: z.string().min(1).max(4096),
  voice: z.string().min(1),
  response_format: z.enum(Object.keys(AUDIO_FORMATS) as [keyof typeof AUDIO_FORMATS]).optional(),
  speed: z.number().min(0.25).max(4).optional(),
});

/** 64 bytes per input character, from a sha256 chain over the request: same request, same bytes. */
function speechBytes(seed: string, length: number): Buffer {
  const blocks: Buffer[] = [];
  for (let i = 0; blocks.length * 32 < length; i++) blocks.push(createHash('sha256').update(`${seed}\n${i}`).digest());
  return Buffer.concat(blocks).subarray(0, length);
}

export const audioSpeech: Endpoint = {
  path: '/audio/speech',
  kind: 'text_to_speech',
  handle({ res, model, body }) {
    const request = parseBody(SpeechRequest, body);
    const format = AUDIO_FORMATS[request.response_format ?? 'mp3'];
    const seed = `${model.model}\n${request.voice}\n${request.response_format ?? 'mp3'}\n${request.speed ?? 1}\n${request.input}`;
    res.type(format.contentType).send(Buffer.concat([format.magic, speechBytes(seed, request.input.length * 64)]));
  },
};
