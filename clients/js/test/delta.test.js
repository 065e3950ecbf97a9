// The delta form of stScan (docs/service.md#chat-delta) against a live `lorescan serve` this test
// starts on a free loopback port (python from $LORESCAN_PYTHON, default "python").
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn, execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { LorescanClient, chatDigest } from "../lorescan.js";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "..");
const HOST = "127.0.0.1";
const PYTHON = process.env.LORESCAN_PYTHON || "python";
const LINES = ["The fog rolls in over Saltmere.", "Who keeps the lighthouse?", "Old Ida keeps it, and the toll bridge.",
  "Tell me about the market.", "A storm is coming.", "I walk to the tavern.", "The ferry is late.", "Is the beacon lit?"];
let dir;
let url;
let server;
let bookId;

function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen(0, HOST, () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

async function start() {
  const port = await freePort();
  const log = [];
  const proc = spawn(PYTHON, ["-m", "lorescan.app.cli", "serve", "--host", HOST, "--port", String(port),
    "--books-dir", join(dir, "books")], { stdio: ["ignore", "pipe", "pipe"] });
  proc.stdout.on("data", (d) => log.push(String(d)));
  proc.stderr.on("data", (d) => log.push(String(d)));
  const at = `http://${HOST}:${port}`;
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    if (proc.exitCode !== null) throw new Error(`lorescan serve exited (${proc.exitCode}):\n${log.join("")}`);
    try {
      if ((await fetch(at + "/healthz")).ok) return { proc, at };
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`lorescan serve did not answer /healthz:\n${log.join("")}`);
}

async function stop(proc) {
  if (proc && proc.exitCode === null) {
    const done = new Promise((r) => proc.once("exit", r));
    proc.kill("SIGTERM");
    await done;
  }
}

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "lorescan-js-delta-"));
  ({ proc: server, at: url } = await start());
  const book = await new LorescanClient(url).uploadBook(readFileSync(join(ROOT, "examples", "saltmere.json")),
    { filename: "saltmere.json" });
  bookId = book.id;
});

after(async () => {
  await stop(server);
  if (dir) rmSync(dir, { recursive: true, force: true });
});

function chat(n, edit = {}) {
  return Array.from({ length: n }, (_, i) => ({
    name: i % 2 ? "Rowan" : "Narrator", is_user: Boolean(i % 2), mes: edit[i] ?? `${LINES[i % LINES.length]} (${i})`,
  }));
}

function request(messages, extra = {}) {
  return { books: [{ id: bookId }], messages, max_context: 8192, seed: 3, macros: { user: "Rowan" },
    settings: { scan_depth: 3, recursive: true }, ...extra };
}

/** A client that records the bodies it sends. */
function recording(at = url) {
  const sent = [];
  const client = new LorescanClient(at, {
    fetch: (u, init) => {
      if (init.body) sent.push(JSON.parse(init.body));
      return fetch(u, init);
    },
  });
  return { client, sent };
}

test("chatDigest is the server's digest (python's chat_digest), surrogates and astral characters included", async () => {
  const messages = [{ mes: "Who keeps the lighthouse? \u{1F3EE}", name: "Rowan", is_user: true },
    { mes: "lone \ud800 half", name: "" }, { mes: "" }];
  const script = "import json, sys; from lorescan.serve.chats import chat_digest; from lorescan.serve import models as m;" +
    "print(chat_digest([m.MessageIn(**x) for x in json.loads(sys.argv[1])]))";
  const python = execFileSync(PYTHON, ["-c", script, JSON.stringify(messages)], { encoding: "utf8" }).trim();
  assert.equal(await chatDigest(messages), python);
  assert.notEqual(await chatDigest([{ mes: "\ufffd" }]), await chatDigest([{ mes: "\ud800" }]));
});

test("a growing chat goes as deltas and gets the answers of whole-chat requests", async () => {
  const { client, sent } = recording();
  const whole = new LorescanClient(url, { delta: false });
  let state = null;
  for (let n = 2; n <= 9; n += 1) {
    const messages = chat(n);
    const got = await client.stScan(request(messages, { chat_id: "js-steady", timed_effects: state }));
    assert.deepEqual(got, await whole.stScan(request(messages, { timed_effects: state })));
    state = got.timed_effects;
  }
  assert.deepEqual(client.deltaStats, { deltas: 7, resends: 0 });
  const last = sent[sent.length - 1];
  assert.equal(last.prefix.count, 8);
  assert.equal(last.prefix.digest, await chatDigest(chat(8)));
  assert.deepEqual(last.messages, chat(9).slice(8));
});

test("an edited message: the delta starts before it, and the answer is the whole chat's", async () => {
  const { client, sent } = recording();
  const whole = new LorescanClient(url, { delta: false });
  await client.stScan(request(chat(6), { chat_id: "js-edit" }));
  const edited = chat(7, { 4: "Is the beacon lit at the market?" });
  const got = await client.stScan(request(edited, { chat_id: "js-edit" }));
  assert.deepEqual(got, await whole.stScan(request(edited)));
  assert.equal(sent[sent.length - 1].prefix.count, 4);
  assert.equal(sent[sent.length - 1].messages.length, 3);
});

test("a server that holds another history answers 409 and the client resends the whole chat", async () => {
  const { client, sent } = recording();
  const other = new LorescanClient(url);
  const whole = new LorescanClient(url, { delta: false });
  await client.stScan(request(chat(5), { chat_id: "js-shared" }));
  await other.stScan(request(chat(5, { 2: "Another history." }), { chat_id: "js-shared" }));  // the server now holds this
  const messages = chat(6);
  const got = await client.stScan(request(messages, { chat_id: "js-shared" }));
  assert.deepEqual(got, await whole.stScan(request(messages)));
  assert.deepEqual(client.deltaStats, { deltas: 1, resends: 1 });
  assert.equal(sent.length, 3);
  assert.equal(sent[1].prefix.count, 5);
  assert.equal(sent[2].prefix, undefined);
  assert.equal(sent[2].messages.length, 6);
});

test("after a server restart the first delta is resent whole, and the next is a delta again", async () => {
  const restarted = await start();
  try {
    const { client, sent } = recording(restarted.at);
    const whole = new LorescanClient(restarted.at, { delta: false });
    await client.stScan(request(chat(4), { chat_id: "js-restart" }));
    await stop(restarted.proc);
    const again = await start();      // same books folder, a new process: it holds no chat
    restarted.proc = again.proc;
    client.baseUrl = whole.baseUrl = again.at;
    const got = await client.stScan(request(chat(5), { chat_id: "js-restart" }));
    assert.deepEqual(got, await whole.stScan(request(chat(5))));
    assert.deepEqual(client.deltaStats, { deltas: 1, resends: 1 });
    const next = await client.stScan(request(chat(6), { chat_id: "js-restart" }));
    assert.deepEqual(next, await whole.stScan(request(chat(6))));
    assert.deepEqual(client.deltaStats, { deltas: 2, resends: 1 });
    assert.equal(sent[sent.length - 1].prefix.count, 5);
  } finally {
    await stop(restarted.proc);
  }
});
