/**
 * multipart/form-data bodies built by hand, so that tests can also send the malformed ones no
 * client library would produce.
 */

export const BOUNDARY = '----imagegen-test-7f3a9c';

export interface FormPart {
  name: string;
  /** Present = sent as a file part. */
  filename?: string;
  contentType?: string;
  data: Buffer | string;
}

export interface MultipartOptions {
  boundary?: string;
  /** false leaves out the closing delimiter, as if the body were cut short. */
  close?: boolean;
}

export function multipartBody(parts: FormPart[], options: MultipartOptions = {}): Buffer {
  const boundary = options.boundary ?? BOUNDARY;
  const chunks: Buffer[] = [];
  for (const part of parts) {
    const disposition = `form-data; name="${part.name}"${part.filename === undefined ? '' : `; filename="${part.filename}"`}`;
    const headers = [`--${boundary}`, `Content-Disposition: ${disposition}`];
    if (part.contentType) headers.push(`Content-Type: ${part.contentType}`);
    chunks.push(Buffer.from(`${headers.join('\r\n')}\r\n\r\n`, 'latin1'), Buffer.from(part.data), Buffer.from('\r\n'));
  }
  if (options.close !== false) chunks.push(Buffer.from(`--${boundary}--\r\n`));
  else if (chunks.length > 0) chunks.pop(); // a cut body also lacks the part's trailing CRLF
  return Buffer.concat(chunks);
}

/** Payload and headers for app.inject. */
export function multipartRequest(parts: FormPart[], options: MultipartOptions = {}) {
  return {
    payload: multipartBody(parts, options),
    headers: { 'content-type': `multipart/form-data; boundary=${options.boundary ?? BOUNDARY}` },
  };
}

/** The usual upload: one part named `file`. */
export function filePart(
  data: Buffer | string,
  options: { name?: string; filename?: string; contentType?: string } = {},
): FormPart {
  return {
    name: options.name ?? 'file',
    filename: options.filename ?? 'image.bin',
    contentType: options.contentType ?? 'application/octet-stream',
    data,
  };
}
