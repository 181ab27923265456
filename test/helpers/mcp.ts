import type { Test } from 'tap';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';

/** The SDK's own client on /mcp of a listening server, with the key as Bearer; closed when t ends. */
export async function mcpClient(t: Test, base: string, key: string): Promise<Client> {
  const client = new Client({ name: 'imagegen-tests', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL('/mcp', base), {
    requestInit: { headers: { authorization: `Bearer ${key}` } },
  });
  await client.connect(transport);
  t.teardown(() => client.close());
  // The client validates structured results against the output schemas tools/list published.
  await client.listTools();
  return client;
}

export type ToolResult = CallToolResult;

/** Calls a tool and returns its result (tool errors included: isError). */
export async function callTool(
  client: Client,
  name: string,
  args: Record<string, unknown> = {},
  options: { onprogress?: (progress: { progress: number; message?: string }) => void } = {},
): Promise<ToolResult> {
  return (await client.callTool({ name, arguments: args }, undefined, {
    ...(options.onprogress && { onprogress: options.onprogress }),
    timeout: 120_000,
  })) as ToolResult;
}

/** The problem details a tool error carries as its second text item. */
export function problemOf(result: ToolResult): {
  code: string;
  status: number;
  detail: string;
  errors?: { pointer: string; code: string }[];
  retry_after_seconds?: number;
} {
  if (!result.isError) throw new Error(`not a tool error: ${JSON.stringify(result.content)}`);
  const item = result.content[1];
  if (item?.type !== 'text') throw new Error('a tool error carries its problem as a second text item');
  return JSON.parse(item.text);
}
