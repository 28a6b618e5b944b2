// SendMessage without a token (and with an unknown one) through the official JS client (@a2a-js/sdk),
// once over each HTTP binding the card lists, each client allowed that binding only.
// Input (stdin, JSON): {base, post}
// Output (stdout, JSON): {"JSONRPC": {...}, "HTTP+JSON": {...}}: per binding and token, the error the
// client raised and the HTTP status and challenge of the answer it read. tests/a2a/test_unauthenticated.py
// asserts on it.
import { ClientFactory, JsonRpcTransportFactory, RestTransportFactory } from '@a2a-js/sdk/client';
import { Role } from '@a2a-js/sdk';
import { A2AError } from '@a2a-js/sdk/errors';
import { randomUUID } from 'node:crypto';

const input = JSON.parse(await new Promise((resolve) => {
  let text = '';
  process.stdin.on('data', (chunk) => { text += chunk; });
  process.stdin.on('end', () => resolve(text));
}));

const message = () => ({
  messageId: randomUUID(),
  role: Role.ROLE_USER,
  parts: [{ content: { $case: 'data', value: input.post } }],
});

async function attempt(Factory, token) {
  let answered = null;
  const fetchImpl = async (url, init = {}) => {
    const headers = new Headers(init.headers);
    if (token) headers.set('Authorization', `Bearer ${token}`);
    const response = await fetch(url, { ...init, headers });
    if (init.method === 'POST') {
      answered = { status: response.status, challenge: response.headers.get('www-authenticate') };
    }
    return response;
  };
  const client = await new ClientFactory({ transports: [new Factory({ fetchImpl })] }).createFromUrl(input.base);
  try {
    await client.sendMessage({ message: message() });
    return { raised: null, answered };
  } catch (error) {
    return { raised: { kind: kindOf(error), name: error.name, message: String(error.message) }, answered };
  }
}

// The kind of error the client raised: `http <status>` for its error for an HTTP status (over
// HTTP+JSON a plain A2AError carrying `statusCode`; over JSON-RPC an Error naming the status,
// when the body is no JSON-RPC error for it to map), else the error's name (one of A2A's errors,
// such as RequestMalformedError, or another).
function kindOf(error) {
  if (error instanceof A2AError) {
    return error.name === 'A2AError' && error.statusCode ? `http ${error.statusCode}` : error.name;
  }
  const status = /^HTTP error for \S+! Status: (\d{3})\b/.exec(String(error.message));
  return status ? `http ${status[1]}` : error.name;
}

const out = {};
for (const [binding, Factory] of [['JSONRPC', JsonRpcTransportFactory], ['HTTP+JSON', RestTransportFactory]]) {
  out[binding] = { none: await attempt(Factory, null), unknown: await attempt(Factory, 'cairn_unknown-token') };
}
process.stdout.write(JSON.stringify(out));
