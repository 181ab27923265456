import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { CallToolRequestSchema, ListToolsRequestSchema, type Tool } from '@modelcontextprotocol/sdk/types.js';
import type { ImageTools, ToolCall } from './tools.js';
import { TOOL_DEFINITIONS } from './tool-schemas.js';

const SERVER_INFO = { name: 'imagegen', title: 'Image generation', version: '1.0.0' };
const INSTRUCTIONS =
  'Image generation paid in tokens from the account of the API key. list_models gives the models, sizes and prices; ' +
  'estimate_price prices a request; generate_image charges it, waits for the image and returns a link and a preview; ' +
  'get_task follows a task that took longer; cancel_task refunds an unfinished one; upload_reference turns an image ' +
  'into a media_id for image-to-image.';

/** Published as they are: JSON Schemas built by tool-schemas.ts, not zod (decision 0026). */
const TOOLS = Object.values(TOOL_DEFINITIONS) as unknown as Tool[];

/**
 * One MCP server for one HTTP request (stateless Streamable HTTP, decision 0026): it knows the
 * caller the request authenticated and lists and calls the tools; the SDK does the protocol
 * (initialize, JSON-RPC framing, cancellation, progress tokens).
 */
export function mcpServerFor(tools: ImageTools, caller: Omit<ToolCall, 'signal' | 'progress'>): Server {
  const server = new Server(SERVER_INFO, { capabilities: { tools: {} }, instructions: INSTRUCTIONS });
  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: TOOLS }));
  server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
    const progressToken = request.params._meta?.progressToken;
    const progress =
      progressToken === undefined
        ? undefined
        : (progress: number, message: string) =>
            extra.sendNotification({ method: 'notifications/progress', params: { progressToken, progress, message } });
    return tools.call(request.params.name, request.params.arguments ?? {}, {
      ...caller,
      signal: extra.signal,
      progress,
    });
  });
  return server;
}
