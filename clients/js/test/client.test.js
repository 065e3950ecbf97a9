// Runs the client against a live `lorescan serve` that this test starts on a free loopback
// port (python from $LORESCAN_PYTHON, default "python"; lorescan must be importable).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { LorescanClient, LorescanError } from "../lorescan.js";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "..");
const HOST = "127.0.0.1";
const TOKEN = "node-test-token";
let server;
let dir;
let client;

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

async function waitHealthy(url, proc, log) {
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    if (proc.exitCode !== null) throw new Error(`lorescan serve exited (${proc.exitCode}):\n${log.join("")}`);
    try {
      const res = await fetch(url + "/healthz");
      if (res.ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`lorescan serve did not answer /healthz:\n${log.join("")}`);
}

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "lorescan-js-"));
  const tokenFile = join(dir, "token");
  writeFileSync(tokenFile, TOKEN + "\n");
  const port = await freePort();
  const python = process.env.LORESCAN_PYTHON || "python";
  const log = [];
  server = spawn(python, ["-m", "lorescan.app.cli", "serve", "--host", HOST, "--port", String(port),
    "--books-dir", join(dir, "books"), "--token-file", tokenFile], { stdio: ["ignore", "pipe", "pipe"] });
  server.stdout.on("data", (d) => log.push(String(d)));
  server.stderr.on("data", (d) => log.push(String(d)));
  const url = `http://${HOST}:${port}`;
  await waitHealthy(url, server, log);
  client = new LorescanClient(url, { token: TOKEN });
});

after(async () => {
  if (server && server.exitCode === null) {
    const done = new Promise((r) => server.once("exit", r));
    server.kill("SIGTERM");
    await done;
  }
  if (dir) rmSync(dir, { recursive: true, force: true });
});

test("a SillyTavern-shaped turn: upload, scan, carry the timed effects", async () => {
  const book = await client.uploadBook(readFileSync(join(ROOT, "examples", "saltmere.json")),
    { filename: "saltmere.json" });
  assert.match(book.id, /^[0-9a-f]{32}$/);
  assert.equal(book.name, "Saltmere");
  assert.ok(book.entries > 0);
  assert.deepEqual((await client.getBook(book.id)).id, book.id);

  const chat = [
    { name: "Narrator", is_user: false, mes: "The fog rolls in over Saltmere." },
    { name: "Rowan", is_user: true, mes: "Who keeps the lighthouse?" },
  ];
  const result = await client.stScan({
    books: [{ id: book.id, roles: ["global"] }], messages: chat, max_context: 8192,
    settings: { scan_depth: 4, recursive: true }, timed_effects: null, chat_id: "node-chat-1", explain: true,
  });
  assert.ok(result.activated.length > 0);
  assert.ok(result.activated.every((e) => e.world === "Saltmere"));
  assert.equal(typeof result.world_info_before, "string");
  assert.deepEqual(Object.keys(result.timed_effects).sort(), ["cooldown", "sticky"]);
  assert.equal(result.diagnostics.length, book.entries);

  const next = await client.stScan({
    books: [{ id: book.id }], messages: [...chat, { name: "Narrator", mes: "The lamp turns." }],
    max_context: 8192, settings: { scan_depth: 4, recursive: true }, timed_effects: result.timed_effects,
    chat_id: "node-chat-1",
  });
  assert.ok(Array.isArray(next.activated));
});

test("a book as a JS object, then a lorebook-slot request", async () => {
  const book = await client.uploadBook({
    entries: { 1: { uid: 1, key: ["lighthouse"], content: "@@role assistant\nThe keeper waves." } },
  }, { name: "coast" });
  const out = await client.slotRun({
    books: [{ id: book.id }], turn_id: "node-1", tokenizer: "words",
    messages: [{ role: "assistant", content: "Hello." }, { role: "user", content: "A lighthouse!" }],
  });
  assert.deepEqual(out.messages, [{ role: "assistant", content: "The keeper waves." }]);
  assert.deepEqual(out.state.first_matched_turn, { coast: { 1: 2 } });
  assert.equal(out.log[0].outcome, "inserted");
});

test("errors carry the status, the message and the field path", async () => {
  await assert.rejects(client.stScan({ books: [], messages: [{ mes: 5 }], max_context: 10 }),
    (err) => err instanceof LorescanError && err.status === 422 && err.path === "$.messages[0].mes");
  await assert.rejects(client.stScan({ books: [{ id: "f".repeat(32) }], messages: [], max_context: 10 }),
    (err) => err.status === 404 && err.path === "$.books[0].id");
  await assert.rejects(client.uploadBook("{\"entries\": {\"0\": {\"uid\": 0, \"key\": 7}}}", { filename: "bad.json" }),
    (err) => err.status === 400 && err.message.includes("bad.json, entry 0, field 'key'"));
  const anonymous = new LorescanClient(client.baseUrl);
  await assert.rejects(anonymous.listBooks(), (err) => err.status === 401);
  assert.deepEqual(await anonymous.health(), { status: "ok" });
});

test("delete, then the id is gone", async () => {
  const book = await client.uploadBook({ entries: { 0: { uid: 0, key: ["x"], content: "y" } } }, { name: "gone" });
  await client.deleteBook(book.id);
  await assert.rejects(client.getBook(book.id), (err) => err.status === 404);
  assert.match(await client.metrics(), /lorescan_requests_total\{/);
});

test("JanitorAI script runs replay conformance vectors", async () => {
  const folder = join(ROOT, "tests", "conformance", "janitor");
  let turns = 0;
  for (const file of readdirSync(folder).filter((f) => f.endsWith(".json")).sort()) {
    // the first three cases of every vector file, every turn of each
    for (const c of JSON.parse(readFileSync(join(folder, file), "utf8")).cases.slice(0, 3)) {
      for (const t of c.turns) {
        const got = await client.janitorRun({
          book: c.book, context: t.context, settings: t.settings, random: t.random,
        });
        const want = t.expected;
        const where = `${file} ${c.name}`;
        assert.equal(got.personality, want.personality, where);
        assert.equal(got.scenario, want.scenario, where);
        assert.equal(got.random_calls, want.random_calls, where);
        assert.equal(got.error && got.error.name, want.error && want.error.name, where);
        assert.deepEqual(got.trace, want.trace, where);
        turns += 1;
      }
    }
  }
  assert.ok(turns >= 20, `${turns} turns`);
});

test("JanitorAI explain, the improved profile and a located 422", async () => {
  const book = [{ keywords: ["дракон"], personality: "P" }];
  const context = { character: { name: "Mira" }, chat: { last_messages: [{ message: "Дракон!" }] } };
  const plain = await client.janitorRun({ book, context, random: [0.5] });
  const improved = await client.janitorRun({ book, context, random: [0.5], profile: "improved", explain: true });
  assert.equal(improved.personality, "\n\nP");
  assert.ok(improved.explain[0].startsWith("entry[0] applied"), improved.explain[0]);
  assert.notEqual(plain.personality, improved.personality);     // the script's ASCII words miss the Cyrillic keyword
  await assert.rejects(client.janitorRun({ book: [{}], context, random: [] }),
    (err) => err instanceof LorescanError && err.status === 422 && err.path === "$.random");
});
