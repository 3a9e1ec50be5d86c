import { crc32 } from 'node:zlib';

/**
 * A decoder for AWS's binary event-stream framing (`application/vnd.amazon.eventstream`), which
 * Bedrock's streaming operations answer with. One message is
 *   prelude  total length (u32 BE), headers length (u32 BE), CRC32 of those 8 bytes (u32 BE)
 *   headers  repeated: name length (u8), name, value type (u8), value
 *   payload  the event's bytes
 *   trailer  CRC32 of everything before it (u32 BE)
 * A message whose CRCs do not match is refused: a corrupted frame must not pass for an event.
 */
export type EventStreamHeaderValue = boolean | number | bigint | string | Uint8Array | Date;

export interface EventStreamMessage {
  headers: Record<string, EventStreamHeaderValue>;
  payload: Uint8Array;
}

export class EventStreamDecodeError extends Error {
  override name = 'EventStreamDecodeError';
}

const PRELUDE_LENGTH = 12;
const TRAILER_LENGTH = 4;
/** AWS caps a message at 16 MiB; a larger declared length means the framing is lost. */
const MAX_MESSAGE_LENGTH = 16 * 1024 * 1024;

function decodeHeaders(bytes: Buffer): Record<string, EventStreamHeaderValue> {
  const headers: Record<string, EventStreamHeaderValue> = {};
  let at = 0;
  const need = (n: number) => {
    if (at + n > bytes.length) throw new EventStreamDecodeError('event-stream header runs past its section');
  };
  while (at < bytes.length) {
    need(1);
    const nameLength = bytes.readUInt8(at);
    at += 1;
    need(nameLength + 1);
    const name = bytes.toString('utf8', at, at + nameLength);
    at += nameLength;
    const type = bytes.readUInt8(at);
    at += 1;
    switch (type) {
      case 0:
        headers[name] = true;
        break;
      case 1:
        headers[name] = false;
        break;
      case 2:
        need(1);
        headers[name] = bytes.readInt8(at);
        at += 1;
        break;
      case 3:
        need(2);
        headers[name] = bytes.readInt16BE(at);
        at += 2;
        break;
      case 4:
        need(4);
        headers[name] = bytes.readInt32BE(at);
        at += 4;
        break;
      case 5:
        need(8);
        headers[name] = bytes.readBigInt64BE(at);
        at += 8;
        break;
      case 6:
      case 7: {
        need(2);
        const length = bytes.readUInt16BE(at);
        at += 2;
        need(length);
        headers[name] = type === 7 ? bytes.toString('utf8', at, at + length) : new Uint8Array(bytes.subarray(at, at + length));
        at += length;
        break;
      }
      case 8:
        need(8);
        headers[name] = new Date(Number(bytes.readBigInt64BE(at)));
        at += 8;
        break;
      case 9:
        need(16);
        headers[name] = bytes.toString('hex', at, at + 16);
        at += 16;
        break;
      default:
        throw new EventStreamDecodeError(`unknown event-stream header value type ${type}`);
    }
  }
  return headers;
}

/** Decodes one complete message (exactly its bytes). */
export function decodeEventStreamMessage(message: Buffer): EventStreamMessage {
  if (message.length < PRELUDE_LENGTH + TRAILER_LENGTH) throw new EventStreamDecodeError('event-stream message shorter than its prelude');
  const totalLength = message.readUInt32BE(0);
  const headersLength = message.readUInt32BE(4);
  if (totalLength !== message.length) throw new EventStreamDecodeError('event-stream message length does not match its prelude');
  if (crc32(message.subarray(0, 8)) !== message.readUInt32BE(8)) throw new EventStreamDecodeError('event-stream prelude CRC mismatch');
  if (crc32(message.subarray(0, totalLength - TRAILER_LENGTH)) !== message.readUInt32BE(totalLength - TRAILER_LENGTH)) {
    throw new EventStreamDecodeError('event-stream message CRC mismatch');
  }
  const headersEnd = PRELUDE_LENGTH + headersLength;
  if (headersEnd > totalLength - TRAILER_LENGTH) throw new EventStreamDecodeError('event-stream headers run past the message');
  return {
    headers: decodeHeaders(message.subarray(PRELUDE_LENGTH, headersEnd)),
    payload: new Uint8Array(message.subarray(headersEnd, totalLength - TRAILER_LENGTH)),
  };
}

/**
 * The messages of a streamed body, each as soon as its last byte arrives. A body that ends inside
 * a message is an error (a cut connection must not look like a finished stream).
 */
export async function* readEventStream(body: AsyncIterable<Uint8Array>): AsyncGenerator<EventStreamMessage> {
  let buffer = Buffer.alloc(0);
  for await (const chunk of body) {
    buffer = buffer.length === 0 ? Buffer.from(chunk) : Buffer.concat([buffer, chunk]);
    while (buffer.length >= PRELUDE_LENGTH) {
      const totalLength = buffer.readUInt32BE(0);
      if (totalLength < PRELUDE_LENGTH + TRAILER_LENGTH || totalLength > MAX_MESSAGE_LENGTH) {
        throw new EventStreamDecodeError(`event-stream message length ${totalLength} is out of range`);
      }
      if (buffer.length < totalLength) break;
      yield decodeEventStreamMessage(buffer.subarray(0, totalLength));
      buffer = buffer.subarray(totalLength);
    }
  }
  if (buffer.length > 0) throw new EventStreamDecodeError('event-stream body ended inside a message');
}
