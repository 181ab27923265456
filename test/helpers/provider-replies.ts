import type { JsonReply } from './fake-upstream.js';

/**
 * Replies as the providers document them. Gemini API: GenerateContentResponse (candidates[].content
 * .parts[].inlineData, finishReason, promptFeedback.blockReason) and google.rpc.Status error bodies
 * (https://ai.google.dev/api/generate-content, https://ai.google.dev/gemini-api/docs/troubleshooting).
 * OpenAI images API: ImagesResponse ({created, data: [{b64_json}]}) and {error: {message, type,
 * param, code}} error bodies (https://platform.openai.com/docs/api-reference/images).
 */
export const geminiReply = {
  image(data: string, mimeType = 'image/png'): JsonReply {
    return {
      status: 200,
      json: {
        candidates: [
          {
            content: { role: 'model', parts: [{ inlineData: { mimeType, data } }] },
            finishReason: 'STOP',
            index: 0,
          },
        ],
        usageMetadata: { promptTokenCount: 12, candidatesTokenCount: 1120, totalTokenCount: 1132 },
        modelVersion: 'gemini-3-pro-image-preview',
        responseId: 'resp-1',
      },
    };
  },
  /** Gemini 3 image models may send an interim "thought" image before the final one. */
  thoughtThenImage(thought: string, data: string): JsonReply {
    return {
      status: 200,
      json: {
        candidates: [
          {
            content: {
              role: 'model',
              parts: [
                { inlineData: { mimeType: 'image/png', data: thought }, thought: true },
                { text: 'Here is the image.' },
                { inlineData: { mimeType: 'image/png', data } },
              ],
            },
            finishReason: 'STOP',
            index: 0,
          },
        ],
      },
    };
  },
  /** The prompt itself was blocked: no candidates, promptFeedback.blockReason. */
  promptBlocked(blockReason = 'PROHIBITED_CONTENT'): JsonReply {
    return {
      status: 200,
      json: { promptFeedback: { blockReason }, usageMetadata: { promptTokenCount: 9, totalTokenCount: 9 } },
    };
  },
  /** The generated image was blocked: a candidate without content, finishReason IMAGE_SAFETY. */
  imageBlocked(): JsonReply {
    return { status: 200, json: { candidates: [{ finishReason: 'IMAGE_SAFETY', index: 0 }] } };
  },
  /** The model answered with text only. */
  textOnly(): JsonReply {
    return {
      status: 200,
      json: {
        candidates: [
          {
            content: { role: 'model', parts: [{ text: 'I cannot draw that, sk-secret internals' }] },
            finishReason: 'STOP',
            index: 0,
          },
        ],
      },
    };
  },
  error(
    code: number,
    status: string,
    message: string,
    headers?: Record<string, string>,
    details?: unknown[],
  ): JsonReply {
    return { status: code, headers, json: { error: { code, message, status, ...(details ? { details } : {}) } } };
  },
};

export const openAiReply = {
  image(b64Json: string): JsonReply {
    return {
      status: 200,
      json: {
        created: 1_763_900_000,
        data: [{ b64_json: b64Json }],
        usage: { total_tokens: 100, input_tokens: 50, output_tokens: 50 },
      },
    };
  },
  /** The image as a URL (DALL·E's and many compatible providers' default; OpenAI's are valid 60 minutes). */
  url(url: string): JsonReply {
    return { status: 200, json: { created: 1_763_900_000, data: [{ url, revised_prompt: null }] } };
  },
  /** A reply without an image (e.g. a compatible provider that filtered its output silently). */
  empty(): JsonReply {
    return { status: 200, json: { created: 1_763_900_000, data: [] } };
  },
  error(
    status: number,
    error: { message: string; type: string; param?: string | null; code: string | null },
    headers?: Record<string, string>,
  ): JsonReply {
    return { status, headers, json: { error: { param: null, ...error } } };
  },
  moderationBlocked(): JsonReply {
    return openAiReply.error(400, {
      message: 'Your request was rejected by the safety system. request_id=req_internal_123',
      type: 'image_generation_user_error',
      code: 'moderation_blocked',
    });
  },
};
