// Drives Cairn's gRPC binding with the official JS client (@a2a-js/sdk) allowed only gRPC, as an agent would.
// Input (stdin, JSON): {base, posterToken, contributorTokens: [..], post, contributions: [..], refused}
// Output (stdout, JSON): what the client saw. tests/grpc/test_js_client.py asserts on it.
import { ClientFactory, ClientFactoryOptions } from '@a2a-js/sdk/client';
import { GrpcTransportFactory } from '@a2a-js/sdk/client/grpc';
import {
  CancelTaskRequest, GetTaskRequest, ListTasksRequest, Message, SendMessageRequest,
} from '@a2a-js/sdk';
import { randomUUID } from 'node:crypto';

const input = JSON.parse(await new Promise((resolve) => {
  let text = '';
  process.stdin.on('data', (chunk) => { text += chunk; });
  process.stdin.on('end', () => resolve(text));
}));

// The token rides on every call as the `authorization` metadata, through the client's interceptor
// (the gRPC transport turns service parameters into metadata).
const bearer = (token) => ({
  before: async (args) => {
    args.options = {
      ...args.options,
      serviceParameters: { ...args.options?.serviceParameters, Authorization: `Bearer ${token}` },
    };
  },
  after: async () => {},
});

async function cairnClient(token) {
  const factory = new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
    transports: [new GrpcTransportFactory()],
    preferredTransports: ['GRPC'],
    clientConfig: { interceptors: token ? [bearer(token)] : [] },
  }));
  const client = await factory.createFromUrl(input.base); // reads the card, calls the gRPC address on it
  if (client.transport.protocolName !== 'GRPC') throw new Error(`not gRPC: ${client.transport.protocolName}`);
  return client;
}

// The gRPC transport encodes each request as it is given: a field left out is not its default
// (an absent `tenant` goes out as the text "undefined"), so every request is a whole proto
// message, made by the SDK's own codecs from its JSON form.
const dataMessage = (payload, taskId) => Message.fromJSON({
  messageId: randomUUID(),
  role: 'ROLE_USER',
  parts: [{ data: payload }],
  ...(taskId ? { taskId } : {}),
  metadata: { cairn: { client: 'a2a-js-grpc-test/1.3.0' } },
});

const failure = async (call) => {
  try {
    await call();
    return null;
  } catch (error) {
    return { name: error.constructor.name, status: error.status ?? null, reason: error.reason ?? null, message: String(error.message) };
  }
};

const out = {};
const poster = await cairnClient(input.posterToken);
out.protocol = poster.transport.protocolName;
const message = dataMessage(input.post);
const send = (client, sent) => client.sendMessage(SendMessageRequest.fromJSON({ message: Message.toJSON(sent) }));
out.posted = await send(poster, message);
out.replayed = await send(poster, message);
const taskId = out.posted.id;
out.contributions = [];
for (const [index, token] of input.contributorTokens.entries()) {
  const contributor = await cairnClient(token);
  out.contributions.push(await send(contributor, dataMessage(input.contributions[index], taskId)));
}
out.refusal = await send(poster, dataMessage(input.refused));

const reader = await cairnClient(null);
out.got = await reader.getTask(GetTaskRequest.fromJSON({ id: taskId }));
out.listed = await reader.listTasks(ListTasksRequest.fromJSON({ pageSize: 10 }));
const working = { status: 'TASK_STATE_WORKING', pageSize: 1 };
out.listedWorking = await reader.listTasks(ListTasksRequest.fromJSON(working));
out.nextPage = await reader.listTasks(ListTasksRequest.fromJSON({ ...working, pageToken: out.listedWorking.nextPageToken }));
out.cancel = await failure(() => reader.cancelTask(CancelTaskRequest.fromJSON({ id: taskId })));
out.missing = await failure(() => reader.getTask(GetTaskRequest.fromJSON({ id: randomUUID() })));
out.unauthenticated = await failure(() => send(reader, dataMessage(input.post)));

process.stdout.write(JSON.stringify(out));
process.exit(0); // grpc-js keeps its channels open
