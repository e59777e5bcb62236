// The `openai` npm package (tests/server/package.json) drives hanashi-cli serve: the
// models list, a reply, the same reply streamed, json_schema output parsed and checked, a
// completion, and a wrong key refused.  HANASHI_SERVER_URL and HANASHI_SERVER_KEY come from
// test-serve-openai.py, which starts the server.  TAP output.
import OpenAI from 'openai';

const baseURL = process.env.HANASHI_SERVER_URL + '/v1';
const apiKey = process.env.HANASHI_SERVER_KEY;
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 600000 });

let n = 0;
let failed = 0;
function ok(cond, name, detail) {
  n++;
  console.log(`${cond ? 'ok' : 'not ok'} ${n} - ${name}`);
  if (!cond) {
    failed++;
    for (const line of String(JSON.stringify(detail, null, 1)).split('\n'))
      console.log('# ' + line);
  }
}

const messages = [
  { role: 'system', content: 'Be brief.' },
  { role: 'user', content: 'Tell me a story.' },
];

const models = await client.models.list();
ok(models.data.length === 1 && models.data[0].id === 'tiny', 'models.list() lists the model', models.data);

const reply = await client.chat.completions.create({ model: 'tiny', messages, max_tokens: 16, seed: 21, temperature: 0.8 });
const content = reply.choices[0].message.content;
ok(typeof content === 'string' && content.length > 0 && reply.choices[0].message.role === 'assistant',
   'chat.completions.create() replies', reply);
ok(reply.usage.completion_tokens === 16 && reply.usage.total_tokens === reply.usage.prompt_tokens + 16 &&
   reply.choices[0].finish_reason === 'length', 'usage and finish_reason', reply);

const stream = await client.chat.completions.create({ model: 'tiny', messages, max_tokens: 16, seed: 21,
                                                      temperature: 0.8, stream: true,
                                                      stream_options: { include_usage: true } });
let streamed = '';
let finish = null;
let usage = null;
let chunks = 0;
for await (const chunk of stream) {
  chunks++;
  if (chunk.usage)
    usage = chunk.usage;
  for (const choice of chunk.choices) {
    streamed += choice.delta.content ?? '';
    if (choice.finish_reason)
      finish = choice.finish_reason;
  }
}
ok(streamed === content && finish === 'length' && chunks > 2, 'the stream gives the same reply, chunk by chunk',
   { streamed, content, finish, chunks });
ok(usage && usage.completion_tokens === 16, 'stream_options.include_usage', usage);

const schema = {
  type: 'object',
  properties: { name: { type: 'string', maxLength: 12 }, ok: { type: 'boolean' }, size: { enum: ['S', 'M', 'L'] } },
  required: ['name', 'ok', 'size'],
  additionalProperties: false,
};
const structured = await client.chat.completions.create({
  model: 'tiny', messages: [{ role: 'user', content: 'Describe a shirt as JSON.' }], max_tokens: 80, seed: 5,
  response_format: { type: 'json_schema', json_schema: { name: 'shirt', schema, strict: true } },
});
let parsed = null;
try {
  parsed = JSON.parse(structured.choices[0].message.content);
} catch (e) {
  parsed = null;
}
ok(parsed !== null && typeof parsed.name === 'string' && parsed.name.length <= 12 && typeof parsed.ok === 'boolean' &&
   ['S', 'M', 'L'].includes(parsed.size) && Object.keys(parsed).length === 3,
   'response_format json_schema: the content parses and follows the schema', structured.choices[0]);

const completion = await client.completions.create({ model: 'tiny', prompt: 'Once upon a time', max_tokens: 8, seed: 2 });
ok(typeof completion.choices[0].text === 'string' && completion.usage.completion_tokens > 0,
   'completions.create() answers', completion);

const wrong = new OpenAI({ baseURL, apiKey: apiKey + '-wrong', maxRetries: 0 });
let refused = null;
try {
  await wrong.chat.completions.create({ model: 'tiny', messages, max_tokens: 2 });
} catch (e) {
  refused = e;
}
ok(refused instanceof OpenAI.AuthenticationError && refused.status === 401 && refused.code === 'invalid_api_key',
   'a wrong key is refused (AuthenticationError, 401)', refused && { status: refused.status, message: refused.message });

const bad = await client.chat.completions.create({ model: 'tiny', messages, n: 3 }).catch((e) => e);
ok(bad instanceof OpenAI.BadRequestError && bad.param === 'n', 'n = 3 is a BadRequestError on "n"',
   { status: bad.status, param: bad.param });

console.log(`1..${n}`);
process.exit(failed ? 1 : 0);
