// Client for `lorescan serve` (the /v1 API, see docs/service.md). An ES module with no
// dependencies beyond `fetch`: Node 18+, Deno, Bun and browsers. Types: lorescan.d.ts.

/** An answer other than 2xx: `status`, the server's `error` text and, for 422, the field `path`. */
export class LorescanError extends Error {
  /**
   * @param {number} status
   * @param {{error?: string, path?: string, source?: string, entry?: number|string, field?: string}} body
   */
  constructor(status, body) {
    super(`lorescan: HTTP ${status}: ${body && body.error ? body.error : "no error text"}`);
    this.name = "LorescanError";
    this.status = status;
    this.body = body;
    this.path = body ? body.path : undefined;
  }
}

// -- the delta form of stScan (docs/service.md#chat-delta) -------------------------------------
// The digest of a chat's first n messages is a SHA-256 hash chain: d0 = SHA-256("lorescan chat v1"),
// d(i+1) = SHA-256(d(i) || u32le(name.length) || UTF-16LE(name) || u32le(mes.length) || UTF-16LE(mes)
// || is_user as one byte), with lengths in UTF-16 code units (a JS string's length).

const CHAIN_SEED_TEXT = "lorescan chat v1";
let subtle;

async function sha256(bytes) {
  if (!subtle) {
    subtle = globalThis.crypto && globalThis.crypto.subtle;
    if (!subtle) subtle = (await import("node:crypto")).webcrypto.subtle;   // Node 18 without the global
  }
  return new Uint8Array(await subtle.digest("SHA-256", bytes));
}

function normalized(m) {
  return { name: m.name === undefined ? "" : m.name, mes: m.mes, is_user: m.is_user === undefined ? false : m.is_user };
}

async function nextLink(prev, m) {
  const { name, mes } = m;
  const buf = new Uint8Array(32 + 4 + 2 * name.length + 4 + 2 * mes.length + 1);
  const view = new DataView(buf.buffer);
  buf.set(prev, 0);
  let at = 32;
  for (const text of [name, mes]) {
    view.setUint32(at, text.length, true);
    at += 4;
    for (let i = 0; i < text.length; i += 1, at += 2) view.setUint16(at, text.charCodeAt(i), true);
  }
  buf[at] = m.is_user ? 1 : 0;
  return sha256(buf);
}

function hex(bytes) {
  let out = "";
  for (const b of bytes) out += b.toString(16).padStart(2, "0");
  return out;
}

/**
 * The digest (64 hex digits) of these messages, as a delta request's `prefix.digest` names them.
 * @param {{mes: string, name?: string, is_user?: boolean}[]} messages
 */
export async function chatDigest(messages) {
  let d = await sha256(new TextEncoder().encode(CHAIN_SEED_TEXT));
  for (const m of messages) d = await nextLink(d, normalized(m));
  return hex(d);
}

function sameMessage(a, b) {
  return a.mes === b.mes && a.name === b.name && a.is_user === b.is_user;
}

/** What one chat's last answered request sent: its messages, and the chain's links computed so far. */
class SentChat {
  constructor(messages, links) {
    this.messages = messages;
    this.links = links;      // links[i]: the digest of the first i messages (a prefix of the chain)
  }

  async link(count) {
    if (this.links.length === 0) this.links.push(await sha256(new TextEncoder().encode(CHAIN_SEED_TEXT)));
    while (this.links.length <= count) {
      const i = this.links.length - 1;
      this.links.push(await nextLink(this.links[i], this.messages[i]));
    }
    return this.links[count];
  }
}

export class LorescanClient {
  /**
   * @param {string} baseUrl e.g. "http://127.0.0.1:8000"
   * @param {{token?: string, fetch?: typeof fetch, timeoutMs?: number, delta?: boolean, chats?: number}} [options]
   *   `delta` (default true): an stScan with a `chat_id` sends only the messages after the part of
   *   the chat this client last sent for it, and resends the whole chat when the server answers
   *   409 `prefix_unknown`; `chats` (default 1000): how many chats it remembers.
   */
  constructor(baseUrl, options = {}) {
    this.baseUrl = baseUrl.replace(/\/+$/, "");
    this.token = options.token;
    this.fetch = options.fetch || globalThis.fetch;
    this.timeoutMs = options.timeoutMs;
    this.delta = options.delta !== false;
    this.maxChats = options.chats === undefined ? 1000 : options.chats;
    /** @private @type {Map<string, SentChat>} */
    this._sent = new Map();
    /** Requests sent as a delta, and deltas the server answered 409 (then resent whole). */
    this.deltaStats = { deltas: 0, resends: 0 };
    if (typeof this.fetch !== "function") {
      throw new TypeError("lorescan: no fetch available; pass options.fetch");
    }
  }

  /** @private */
  async _call(method, path, body, contentType) {
    /** @type {Record<string, string>} */
    const headers = {};
    if (this.token) headers.Authorization = `Bearer ${this.token}`;
    if (contentType) headers["Content-Type"] = contentType;
    const init = { method, headers, body };
    if (this.timeoutMs && typeof AbortSignal !== "undefined" && AbortSignal.timeout) {
      init.signal = AbortSignal.timeout(this.timeoutMs);
    }
    const res = await this.fetch(this.baseUrl + path, init);
    const text = await res.text();
    const isJson = (res.headers.get("content-type") || "").startsWith("application/json");
    const data = isJson && text ? JSON.parse(text) : text;
    if (!res.ok) throw new LorescanError(res.status, isJson ? data : { error: text });
    return data;
  }

  /** @returns {Promise<{status: string}>} */
  health() {
    return this._call("GET", "/healthz");
  }

  /** Prometheus text. @returns {Promise<string>} */
  metrics() {
    return this._call("GET", "/metrics");
  }

  /**
   * Upload a book in any format lorescan reads (JSON object or text, or the bytes of a JSON,
   * PNG or CHARX file). The same upload always gets the same id.
   * @param {object|string|ArrayBuffer|Uint8Array|Blob} book
   * @param {{name?: string, filename?: string, fillDefaults?: boolean}} [options]
   */
  uploadBook(book, options = {}) {
    const q = new URLSearchParams();
    if (options.name !== undefined) q.set("name", options.name);
    if (options.filename !== undefined) q.set("filename", options.filename);
    if (options.fillDefaults !== undefined) q.set("fill_defaults", String(options.fillDefaults));
    const qs = q.toString();
    const isObject = book !== null && typeof book === "object" && !(book instanceof ArrayBuffer) &&
      !ArrayBuffer.isView(book) && !(typeof Blob !== "undefined" && book instanceof Blob);
    const body = isObject ? JSON.stringify(book) : book;
    const type = isObject || typeof book === "string" ? "application/json" : "application/octet-stream";
    return this._call("POST", "/v1/books" + (qs ? "?" + qs : ""), body, type);
  }

  /** @param {string} id */
  getBook(id) {
    return this._call("GET", `/v1/books/${encodeURIComponent(id)}`);
  }

  listBooks() {
    return this._call("GET", "/v1/books");
  }

  /** @param {string} id @returns {Promise<void>} */
  async deleteBook(id) {
    await this._call("DELETE", `/v1/books/${encodeURIComponent(id)}`);
  }

  /**
   * One SillyTavern-mode generation. With a `chat_id` (and `delta` on), only the messages after
   * what this client last sent for the chat go over the wire, with that prefix's digest; a
   * server that does not hold it answers 409 `prefix_unknown` and the whole chat is resent.
   * @param {import("./lorescan").STScanRequest} request
   */
  async stScan(request) {
    const post = (body) => this._call("POST", "/v1/st/scan", JSON.stringify(body), "application/json");
    const id = request.chat_id;
    if (!this.delta || id === undefined || id === null || request.prefix !== undefined ||
        !Array.isArray(request.messages)) {
      return post(request);
    }
    const messages = request.messages.map(normalized);      // a copy: later edits by the caller are seen
    const sent = this._sent.get(id);
    let count = 0;
    if (sent) {
      const n = Math.min(sent.messages.length, messages.length);
      while (count < n && sameMessage(sent.messages[count], messages[count])) count += 1;
    }
    if (count > 0) {
      const digest = hex(await sent.link(count));
      this.deltaStats.deltas += 1;
      try {
        const result = await post({ ...request, messages: request.messages.slice(count), prefix: { count, digest } });
        this._remember(id, new SentChat(messages, sent.links.slice(0, count + 1)));
        return result;
      } catch (err) {
        if (!(err instanceof LorescanError && err.status === 409 && err.body && err.body.code === "prefix_unknown")) {
          throw err;
        }
        this.deltaStats.resends += 1;
      }
    }
    const result = await post(request);
    this._remember(id, new SentChat(messages, []));
    return result;
  }

  /** @private */
  _remember(id, chat) {
    this._sent.delete(id);
    this._sent.set(id, chat);
    while (this._sent.size > this.maxChats) this._sent.delete(this._sent.keys().next().value);
  }

  /** One lorebook-slot request. @param {import("./lorescan").SlotRunRequest} request */
  slotRun(request) {
    return this._call("POST", "/v1/slot/run", JSON.stringify(request), "application/json");
  }

  /**
   * One run of the JanitorAI script (docs/janitor-mode.md): the raw `dynamicLore` value, the
   * context the script is given, its knobs, and the `Math.random` values (or a seed).
   * @param {import("./lorescan").JanitorRunRequest} request
   */
  janitorRun(request) {
    return this._call("POST", "/v1/janitor/run", JSON.stringify(request), "application/json");
  }
}
