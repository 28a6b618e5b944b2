// Sends SendMessage without a valid token through the official JS client (@a2a-js/sdk), over each
// HTTP binding in turn, the client allowed that binding only.
// Input (stdin, JSON): {base, tokens: {name: token or null}, post}
// Output (stdout, JSON): {binding: {name: the error the client raised}}. tests/a2a/test_unauthenticated.py asserts on it.
import { ClientFactory, JsonRpcTransportFactory, RestTransportFactory } from '@a2a-js/sdk/client';
import { Role } from '@a2a-js/sdk';
import { randomUUID } from 'node:crypto';

const input = JSON.parse(await new Promise((resolve) => {
  let text = '';
  process.stdin.on('data', (chunk) => { text += chunk; });
  process.stdin.on('end', () => resolve(text));
}));

const TRANSPORTS = {
  JSONRPC: (fetchImpl) => new JsonRpcTransportFactory({ fetchImpl }),
  'HTTP+JSON': (fetchImpl) => new RestTransportFactory({ fetchImpl }),
};

async function send(binding, token) {
  const fetchImpl = (url, init = {}) => {
    const headers = new Headers(init.headers);
    if (token) headers.set('Authorization', `Bearer ${token}`);
    return fetch(url, { ...init, headers });
  };
  const factory = new ClientFactory({ transports: [TRANSPORTS[binding](fetchImpl)] });
  const client = await factory.createFromUrl(input.base);
  const message = {
    messageId: randomUUID(),
    role: Role.ROLE_USER,
    parts: [{ content: { $case: 'data', value: input.post } }],
  };
  const used = client.transport?.constructor?.name ?? null;
  try {
    await client.sendMessage({ message });
    return null;
  } catch (error) {
    return {
      transport: used,
      name: error.constructor.name,
      isA2AError: 'reason' in error,
      statusCode: error.statusCode ?? null,
      code: error.envelopeCode ?? null,
      reason: error.reason ?? null,
      message: String(error.message),
    };
  }
}

const out = {};
for (const binding of Object.keys(TRANSPORTS)) {
  out[binding] = {};
  for (const [name, token] of Object.entries(input.tokens)) {
    out[binding][name] = await send(binding, token);
  }
}
process.stdout.write(JSON.stringify(out));
