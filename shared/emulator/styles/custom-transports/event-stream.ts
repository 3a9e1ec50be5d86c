import { crc32 } from 'node:zlib';

/**
 * The AWS event-stream binary framing (`application/vnd.amazon.eventstream`) that Bedrock's
 * streaming APIs answer with. One message is:
 *   prelude  = total length (u32 BE) + headers length (u32 BE) + CRC32 of those 8 bytes (u32 BE)
 *   headers  = repeated: name length (u8), name, value type (u8, 7 = string), value length (u16 BE), value
 *   payload  = the event's bytes
 *   trailer  = CRC32 of everything before it (u32 BE)
 */
const STRING_HEADER = 7;

function u32(value: number): Buffer {
  const buffer = Buffer.alloc(4);
  buffer.writeUInt32BE(value >>> 0, 0);
  return buffer;
}

function encodeHeaders(headers: Record<string, string>): Buffer {
  return Buffer.concat(
    Object.entries(headers).map(([name, value]) => {
      const nameBytes = Buffer.from(name, 'utf8');
      const valueBytes = Buffer.from(value, 'utf8');
      const header = Buffer.alloc(1 + nameBytes.length + 1 + 2 + valueBytes.length);
      header.writeUInt8(nameBytes.length, 0);
      nameBytes.copy(header, 1);
      header.writeUInt8(STRING_HEADER, 1 + nameBytes.length);
      header.writeUInt16BE(valueBytes.length, 2 + nameBytes.length);
      valueBytes.copy(header, 4 + nameBytes.length);
      return header;
    }),
  );
}

export function encodeEventStreamMessage(headers: Record<string, string>, payload: Buffer): Buffer {
  const headerBytes = encodeHeaders(headers);
  const prelude = Buffer.concat([u32(12 + headerBytes.length + payload.length + 4), u32(headerBytes.length)]);
  const message = Buffer.concat([prelude, u32(crc32(prelude)), headerBytes, payload]);
  return Buffer.concat([message, u32(crc32(message))]);
}

/** A Bedrock stream event: `:event-type` names the union member the SDK decodes (chunk, messageStart, ...). */
export function encodeBedrockEvent(eventType: string, body: unknown): Buffer {
  return encodeEventStreamMessage(
    { ':event-type': eventType, ':content-type': 'application/json', ':message-type': 'event' },
    Buffer.from(JSON.stringify(body), 'utf8'),
  );
}

