// Drives Cairn's A2A door with the official JS client (@a2a-js/sdk), as an agent would.
// Input (stdin, JSON): {base, posterToken, contributorTokens: [..], post, contributions: [..], refused}
// Output (stdout, JSON): what the client saw. tests/a2a/test_js_client.py asserts on it.
import { ClientFactory, ClientFactoryOptions, JsonRpcTransportFactory } from '@a2a-js/sdk/client';
import { Role, TaskState } from '@a2a-js/sdk';
import { randomUUID } from 'node:crypto';

const input = JSON.parse(await new Promise((resolve) => {
  let text = '';
  process.stdin.on('data', (chunk) => { text += chunk; });
  process.stdin.on('end', () => resolve(text));
}));

// The token rides on every request through the transport's fetch.
async function cairnClient(token) {
  const fetchImpl = (url, init = {}) => {
    const headers = new Headers(init.headers);
    if (token) headers.set('Authorization', `Bearer ${token}`);
    return fetch(url, { ...init, headers });
  };
  const factory = new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
    transports: [new JsonRpcTransportFactory({ fetchImpl })],
  }));
  return factory.createFromUrl(input.base); // reads /.well-known/agent-card.json, calls the URL on the card
}

const dataMessage = (payload, taskId) => ({
  messageId: randomUUID(),
  role: Role.ROLE_USER,
  parts: [{ content: { $case: 'data', value: payload } }],
  ...(taskId ? { taskId } : {}),
  metadata: { cairn: { client: 'a2a-js-test/1.3.0' } },
});

const failure = async (call) => {
  try {
    await call();
    return null;
  } catch (error) {
    return { name: error.constructor.name, code: error.envelopeCode ?? null, message: String(error.message) };
  }
};

const out = {};
const poster = await cairnClient(input.posterToken);
out.posted = await poster.sendMessage({ message: dataMessage(input.post) });
const taskId = out.posted.id;
out.contributions = [];
for (const [index, token] of input.contributorTokens.entries()) {
  const contributor = await cairnClient(token);
  out.contributions.push(await contributor.sendMessage({ message: dataMessage(input.contributions[index], taskId) }));
}
out.refusal = await poster.sendMessage({ message: dataMessage(input.refused) });

const reader = await cairnClient(null);
out.got = await reader.getTask({ id: taskId });
out.listed = await reader.listTasks({ pageSize: 10 });
out.listedWorking = await reader.listTasks({ status: TaskState.TASK_STATE_WORKING, pageSize: 1 });
out.cancel = await failure(() => reader.cancelTask({ id: taskId }));
out.missing = await failure(() => reader.getTask({ id: randomUUID() }));
out.unauthorized = await failure(() => reader.sendMessage({ message: dataMessage(input.post) }));
out.card = await reader.getAgentCard();

process.stdout.write(JSON.stringify(out));
