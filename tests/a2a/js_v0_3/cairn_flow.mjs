// Drives Cairn's A2A 0.3 JSON-RPC binding with the last 0.3 release of the official JS client
// (@a2a-js/sdk 0.3.14), allowed JSON-RPC only, as a 0.3 agent would: it reads the card's 0.3 fields.
// Input (stdin, JSON): {base, posterToken, contributorToken, post, contribution, refused, evaluatedId}
// Output (stdout, JSON): what the client saw. tests/a2a/test_v0_3_clients.py asserts on it.
import { ClientFactory, JsonRpcTransportFactory } from '@a2a-js/sdk/client';
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
  const factory = new ClientFactory({ transports: [new JsonRpcTransportFactory({ fetchImpl })] });
  return factory.createFromUrl(input.base);
}

const dataMessage = (payload, taskId) => ({
  kind: 'message',
  messageId: randomUUID(),
  role: 'user',
  parts: [{ kind: 'data', data: payload }],
  ...(taskId ? { taskId } : {}),
  metadata: { cairn: { client: 'a2a-js-test/0.3.14' } },
});

const out = {};
const poster = await cairnClient(input.posterToken);
out.card = await poster.getAgentCard();
out.posted = await poster.sendMessage({ message: dataMessage(input.post) });
out.refusal = await poster.sendMessage({ message: dataMessage(input.refused) });
const contributor = await cairnClient(input.contributorToken);
out.contributed = await contributor.sendMessage({ message: dataMessage(input.contribution, out.posted.id) });
const reader = await cairnClient(null);
out.evaluated = await reader.getTask({ id: input.evaluatedId });
out.requests = requests;

process.stdout.write(JSON.stringify(out));
