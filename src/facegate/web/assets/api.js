// The API client: the key lives in sessionStorage and travels only in the Authorization
// header. Every failure becomes an ApiError whose message is the problem+json `detail`.

const KEY_NAME = "facegate.apiKey";

export const credentials = {
  get: () => sessionStorage.getItem(KEY_NAME),
  set: (key) => sessionStorage.setItem(KEY_NAME, key),
  clear: () => sessionStorage.removeItem(KEY_NAME),
};

/** An API error: `message` is what a person should read (the problem's detail). */
export class ApiError extends Error {
  constructor(status, problem) {
    super(describeProblem(status, problem));
    this.status = status;
    this.problem = problem || {};
  }
}

function describeProblem(status, problem) {
  if (problem && typeof problem.detail === "string" && problem.detail) return problem.detail;
  if (problem && typeof problem.title === "string" && problem.title) return problem.title;
  if (status === 0) return "The server cannot be reached. Check your connection and try again.";
  return `The server answered ${status} without an explanation.`;
}

function parseProblem(text) {
  try {
    const body = JSON.parse(text);
    return body && typeof body === "object" ? body : null;
  } catch {
    return null;
  }
}

function authHeaders(extra = {}) {
  const key = credentials.get();
  return key ? { Authorization: `Bearer ${key}`, ...extra } : extra;
}

async function errorOf(response) {
  return new ApiError(response.status, parseProblem(await response.text()));
}

// A GET that meets a 503 (the server's "retry shortly", e.g. SQLite busy with another
// write) is retried a couple of times after a short pause; other methods are not
// idempotent, so their 503 is shown as it is.
const GET_RETRIES = 2;
const sleep = (ms) => new Promise((resolve) => { setTimeout(resolve, ms); });

function retryDelay(response, attempt) {
  const advised = Number(response.headers.get("Retry-After"));
  const seconds = Number.isFinite(advised) && advised > 0 ? Math.min(advised, 1) : 0.5;
  return seconds * 1000 * (attempt + 1);
}

async function send(path, options = {}) {
  for (let attempt = 0; ; attempt += 1) {
    const response = await sendOnce(path, options);
    if (response.ok) return response;
    const method = options.method || "GET";
    if (response.status === 503 && method === "GET" && attempt < GET_RETRIES) {
      await sleep(retryDelay(response, attempt));
      continue;
    }
    throw await errorOf(response);
  }
}

async function sendOnce(path, { method = "GET", json, body, signal, key } = {}) {
  const headers = key ? { Authorization: `Bearer ${key}` } : authHeaders();
  if (json !== undefined) {
    headers["Content-Type"] = "application/json";
    body = JSON.stringify(json);
  }
  let response;
  try {
    response = await fetch(path, { method, headers, body, signal, cache: "no-store" });
  } catch (error) {
    if (error.name === "AbortError") throw error;
    throw new ApiError(0, null);
  }
  return response;
}

/** JSON of a call (null for 204). */
export async function api(path, options) {
  const response = await send(path, options);
  if (response.status === 204) return null;
  return response.json();
}

/** The bytes of a call, as a Blob with the response's content type. */
export async function apiBlob(path, options) {
  const response = await send(path, options);
  return response.blob();
}

/** POST a FormData with upload progress (fetch cannot report it; XMLHttpRequest can). */
export function upload(path, formData, onProgress) {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open("POST", path);
    for (const [name, value] of Object.entries(authHeaders())) xhr.setRequestHeader(name, value);
    xhr.upload.addEventListener("progress", (event) => {
      if (event.lengthComputable) onProgress(event.loaded / event.total);
    });
    xhr.addEventListener("load", () => {
      const body = parseProblem(xhr.responseText);
      if (xhr.status >= 200 && xhr.status < 300) resolve(body);
      else reject(new ApiError(xhr.status, body));
    });
    xhr.addEventListener("error", () => reject(new ApiError(0, null)));
    xhr.addEventListener("abort", () => reject(new ApiError(0, { detail: "Upload aborted." })));
    xhr.send(formData);
  });
}

/**
 * Server-Sent Events read with fetch(), so the key goes in a header (EventSource cannot
 * send one, and a key in a URL ends up in logs). Calls onEvent(name, data) per event and
 * resolves when the stream ends.
 */
export async function streamEvents(path, onEvent, signal) {
  const response = await send(path, { signal });
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value.replace(/\r\n?/g, "\n");
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const event = parseEventBlock(block);
      if (event) onEvent(event.name, event.data);
    }
  }
}

function parseEventBlock(block) {
  let name = "message";
  const data = [];
  for (const line of block.split("\n")) {
    if (!line || line.startsWith(":")) continue; // comment (keep-alive)
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
    if (field === "event") name = value;
    else if (field === "data") data.push(value);
  }
  if (!data.length) return null;
  return { name, data: parseProblem(data.join("\n")) };
}
