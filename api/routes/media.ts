import { generateImages, imageBody, planImages, planSpeech, speak, speechBody } from '../../shared/inference/media.js';
import { MAX_AUDIO_BYTES, planTranscription, transcribe, transcriptionFields } from '../../shared/inference/transcriptions.js';
import type { GatewayServices } from '../../shared/composition/gateway.js';
import { abortWhenClientLeaves, meteredCallOf, setWalletHeaders } from '../middleware/metered-call.js';
import { metered, route, uploadIntoMemory, type RouteDefinition } from '../route-table.js';

/** Images, text-to-speech and transcription: metered per image, per character and per second; not for client tokens. */
export function mediaRoutes(platform: GatewayServices): RouteDefinition[] {
  const access = metered('api:chat', null);
  return [
    route({
      method: 'post', path: '/v1/images/generations', surface: 'images', summary: 'Generate images from a prompt', access, input: { body: imageBody, bodyOptional: true },
      handle: async (req, res, { body }) => {
        const plan = await planImages(body, platform.providers);
        const generated = await generateImages(platform, meteredCallOf(req), plan, abortWhenClientLeaves(res));
        setWalletHeaders(res, generated);
        res.json(generated.body);
      },
    }),
    route({
      method: 'post', path: '/v1/audio/speech', surface: 'audio.speech', summary: 'Speak text', access, input: { body: speechBody, bodyOptional: true },
      response: { contentType: 'audio/mpeg', description: 'The audio in the requested response_format' },
      handle: async (req, res, { body }) => {
        const plan = await planSpeech(body, platform.providers);
        const spoken = await speak(platform, meteredCallOf(req), plan, abortWhenClientLeaves(res));
        setWalletHeaders(res, spoken);
        res.setHeader('content-type', spoken.contentType);
        res.send(spoken.audio);
      },
    }),
    route({
      method: 'post', path: '/v1/audio/transcriptions', surface: 'audio.transcriptions', summary: 'Transcribe audio', access,
      input: { body: transcriptionFields, upload: uploadIntoMemory(MAX_AUDIO_BYTES) },
      handle: async (req, res, { body, file }) => {
        const plan = await planTranscription(body, file !== undefined, platform.providers);
        const transcript = await transcribe(platform, meteredCallOf(req), plan, file!, abortWhenClientLeaves(res));
        setWalletHeaders(res, transcript);
        res.setHeader('content-type', transcript.contentType);
        res.send(typeof transcript.body === 'string' ? transcript.body : JSON.stringify(transcript.body));
      },
    }),
  ];
}
