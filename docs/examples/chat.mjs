// One chat completion through the gateway with the official openai SDK, unchanged: the SDK reads
// OPENAI_BASE_URL (the gateway's /v1) and OPENAI_API_KEY (a ko_ key with api:chat) from the environment.
import OpenAI from 'openai';

const client = new OpenAI();
const completion = await client.chat.completions.create({
  model: 'svc:openai/gpt-4o-mini',
  messages: [{ role: 'user', content: 'Say hello to the gateway.' }],
});
console.log(completion.choices[0].message.content);
console.log(`tokens: ${completion.usage.total_tokens}`);
