// A chat completion with a brain attached, through the official openai SDK: the Brain headers go as
// custom headers, and Brain-Status comes back on the response. Reads OPENAI_BASE_URL (the gateway's
// /v1), OPENAI_API_KEY (a ko_ key with api:chat) and BRAIN (a brain id) from the environment.
import OpenAI from 'openai';

const client = new OpenAI();
const { data, response } = await client.chat.completions
  .create(
    { model: 'svc:openai/gpt-4o-mini', messages: [{ role: 'user', content: 'When does the deploy freeze start?' }] },
    { headers: { Brain: process.env.BRAIN, 'Brain-Scope': '/ops' } },
  )
  .withResponse();
console.log(`Brain-Status: ${response.headers.get('brain-status')}`);
console.log(data.choices[0].message.content);
