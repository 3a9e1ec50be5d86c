import type { EmulatorStyle } from '../server.js';
import { azureStyle } from './custom-transports/azure.js';
import { bedrockStyle } from './custom-transports/bedrock.js';
import { vertexStyle } from './custom-transports/vertex.js';
import { watsonxStyle } from './custom-transports/watsonx.js';

/**
 * The four providers whose transport is more than a bearer key: Bedrock (AWS Signature V4, event
 * stream framing), Vertex (service-account JWT exchanged for an OAuth token), Azure OpenAI
 * (deployment URLs, api-key header, api-version) and watsonx (IAM token exchanged from an API key).
 */
export const customTransportStyles: EmulatorStyle[] = [bedrockStyle(), vertexStyle(), azureStyle(), watsonxStyle()];
