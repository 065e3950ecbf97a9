// Records V8's JSON.stringify and Number#toString for sample values, and the cyrb53 hash of
// the serialisation (SPEC Appendix B, written from the spec), as ground truth for
// tests/test_sthash.py. Run: node generate.mjs > v8_cases.json
function cyrb53(str, seed = 0) {
  let h1 = 0xdeadbeef ^ seed, h2 = 0x41c6ce57 ^ seed;
  for (let i = 0; i < str.length; i++) {
    const ch = str.charCodeAt(i);
    h1 = Math.imul(h1 ^ ch, 2654435761);
    h2 = Math.imul(h2 ^ ch, 1597334677);
  }
  h1 = Math.imul(h1 ^ (h1 >>> 16), 2246822507) ^ Math.imul(h2 ^ (h2 >>> 13), 3266489909);
  h2 = Math.imul(h2 ^ (h2 >>> 16), 2246822507) ^ Math.imul(h1 ^ (h1 >>> 13), 3266489909);
  return 4294967296 * (2097151 & h2) + (h1 >>> 0);
}
let seed = 12345;
function rnd() { seed = (seed * 1103515245 + 12345) % 2147483648; return seed / 2147483648; }
const pieces = ["a", "Z", " ", "\n", "\t", "\u0001", "\u001f", "\"", "\\", "/", "é", "огонь", "東京", "😀",
  "\ud800", "\udc00", "\u2028", "\u2029", "\u007f", "\u0085", "\ufeff", "{{char}}", "Σ", "İ"];
function rstr() { let s = ""; const n = Math.floor(rnd() * 8); for (let i = 0; i < n; i++) s += pieces[Math.floor(rnd() * pieces.length)]; return s; }
const numbers = [0, -0, 1, -1, 100, 0.1, 0.5, 1e21, 1e20, 1e-7, 1e-6, 1.5e-10, 123.456, 0.30000000000000004,
  9007199254740992, 5e-324, 1.7976931348623157e308, 999999999999, 1e16, 12345678901234567890, 2.5, -3.75, 33.333333333333336];
for (let i = 0; i < 60; i++) numbers.push((rnd() - 0.5) * Math.pow(10, Math.floor(rnd() * 50) - 25));
const values = [];
for (const n of numbers) values.push(n);
for (let i = 0; i < 200; i++) {
  const obj = { uid: Math.floor(rnd() * 1000), world: rstr(), key: [rstr(), rstr()], content: rstr(),
    order: numbers[Math.floor(rnd() * numbers.length)], flag: rnd() < 0.5, none: null, nested: { s: rstr(), list: [1, 2.5, "x"] } };
  values.push(obj);
  values.push(rstr());
}
const cases = values.map(v => { const json = JSON.stringify(v); return { value: v, json, hash: cyrb53(json) }; });
// JSON cannot carry lone surrogates reliably through every parser, so also give each string value as code units.
function units(v) { if (typeof v === "string") return { $units: Array.from({ length: v.length }, (_, i) => v.charCodeAt(i)) };
  if (Array.isArray(v)) return v.map(units); if (v && typeof v === "object") { const o = {}; for (const k of Object.keys(v)) o[k] = units(v[k]); return o; }
  if (typeof v === "number" && Object.is(v, -0)) return { $negzero: true }; return v; }
process.stdout.write(JSON.stringify({ generated_by: "tests/data/sthash/generate.mjs", node: process.version,
  cases: cases.map(c => ({ value: units(c.value), json_units: units(c.json).$units, hash: c.hash })) }));
