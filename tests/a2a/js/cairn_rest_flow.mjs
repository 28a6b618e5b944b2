// Drives Cairn's A2A HTTP+JSON binding with the official JS client (@a2a-js/sdk), allowed no other.
// Input (stdin, JSON): {base, posterToken, contributorTokens: [..], post, contributions: [..], refused, evaluatedId}
// Output (stdout, JSON): what the client saw, and every request it made. tests/a2a/test_rest_clients.py asserts on it.
import { ClientFactory, RestTransportFactory } from '@a2a-js/sdk/client';
import { Role, TaskState, verifyAgentCardSignature } from '@a2a-js/sdk';
import { randomUUID } from 'node:crypto';

const input = JSON.parse(await new Promise((resolve) => {
  let text = '';
  process.stdin.on('data', (chunk) => { text += chunk; });
  process.stdin.on('end', () => resolve(text));
}));

const requests = [];

async function cairnClient(token) {
  const fetchImpl = (url, init = {}) => {
    const headers = new Headers(init.headers);
    if (token) headers.set('Authorization', `Bearer ${token}`);
    requests.push(`${init.method ?? 'GET'} ${new URL(url).pathname}`);
    return fetch(url, { ...init, headers });
  };
  const factory = new ClientFactory({ transports: [new RestTransportFactory({ fetchImpl })] });
  return factory.createFromUrl(input.base);
}

const dataMessage = (payload, taskId, messageId) => ({
  messageId: messageId ?? randomUUID(),
  role: Role.ROLE_USER,
  parts: [{ content: { $case: 'data', value: payload } }],
  ...(taskId ? { taskId } : {}),
  metadata: { cairn: { client: 'a2a-js-rest-test/1.3.0' } },
});

const failure = async (call) => {
  try {
    await call();
    return null;
  } catch (error) {
    return { name: error.constructor.name, reason: error.reason ?? null, message: String(error.message) };
  }
};

const out = {};
const poster = await cairnClient(input.posterToken);
const postId = randomUUID();
out.posted = await poster.sendMessage({ message: dataMessage(input.post, undefined, postId) });
out.replayed = await poster.sendMessage({ message: dataMessage(input.post, undefined, postId) });
const taskId = out.posted.id;
out.contributions = [];
for (const [index, token] of input.contributorTokens.entries()) {
  const contributor = await cairnClient(token);
  out.contributions.push(await contributor.sendMessage({ message: dataMessage(input.contributions[index], taskId) }));
}
out.refusal = await poster.sendMessage({ message: dataMessage(input.refused) });

const reader = await cairnClient(null);
out.evaluated = await reader.getTask({ id: input.evaluatedId });
out.firstPage = await reader.listTasks({ status: TaskState.TASK_STATE_WORKING, pageSize: 1 });
out.secondPage = await reader.listTasks({
  status: TaskState.TASK_STATE_WORKING, pageSize: 1, pageToken: out.firstPage.nextPageToken,
});
out.cancel = await failure(() => reader.cancelTask({ id: taskId }));
out.missing = await failure(() => reader.getTask({ id: randomUUID() }));
out.unauthorized = await failure(() => reader.sendMessage({ message: dataMessage(input.post) }));

// The card's signature, checked by the SDK's verifier on the JSON as fetched.
const card = await (await fetch(`${input.base}/.well-known/agent-card.json`)).json();
const jwks = await (await fetch(`${input.base}/.well-known/jwks.json`)).json();
out.cardVerified = await verifyAgentCardSignature(async (kid) => jwks.keys.find((key) => key.kid === kid))(card)
  .then(() => true, (error) => String(error));
out.requests = requests;

process.stdout.write(JSON.stringify(out));
