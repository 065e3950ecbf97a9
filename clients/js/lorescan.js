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

export class LorescanClient {
  /**
   * @param {string} baseUrl e.g. "http://127.0.0.1:8000"
   * @param {{token?: string, fetch?: typeof fetch, timeoutMs?: number}} [options]
   */
  constructor(baseUrl, options = {}) {
    this.baseUrl = baseUrl.replace(/\/+$/, "");
    this.token = options.token;
    this.fetch = options.fetch || globalThis.fetch;
    this.timeoutMs = options.timeoutMs;
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

  /** One SillyTavern-mode generation. @param {import("./lorescan").STScanRequest} request */
  stScan(request) {
    return this._call("POST", "/v1/st/scan", JSON.stringify(request), "application/json");
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
