// Ground truth for lorescan.js.regex: records what V8 does for each case.
//   node generate.mjs                  -> writes v8_cases.json next to this script
//   node generate.mjs --eval IN OUT    -> evaluates [[pattern, flags, [texts]], ...] from IN
// Every expected value in v8_cases.json comes from running this script; none is hand-written.
import { readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

function evaluate(pattern, flags, texts) {
  let re;
  try {
    re = new RegExp(pattern, flags);
  } catch (e) {
    return { pattern, flags, throws: true, message: String(e.message), texts: [], results: [] };
  }
  // A fresh regex per test (SPEC 5.1): 'g' and 'y' start at lastIndex 0.
  const results = texts.map((t) => new RegExp(re.source, re.flags).test(t));
  return { pattern, flags, throws: false, texts, results };
}

// SillyTavern's key parsing, as SPEC 5.1 states it; the compile step is V8's.
function parseKey(key) {
  const m = key.match(/^\/([\w\W]+?)\/([gimsuy]*)$/);
  if (!m) return null;
  const body = m[1];
  for (let i = 0; i < body.length; i++) {
    if (body[i] === "/" && (i === 0 || body[i - 1] !== "\\")) return null;
  }
  const pattern = body.replace("\\/", "/");
  try { new RegExp(pattern, m[2]); } catch { return null; }
  return [pattern, m[2]];
}

if (process.argv[2] === "--eval") {
  const input = JSON.parse(readFileSync(process.argv[3], "utf8"));
  writeFileSync(process.argv[4], JSON.stringify(input.map(([p, f, t]) => evaluate(p, f, t))));
  process.exit(0);
}

// Texts every accepted pattern is also tested on.
const COMMON = [
  "", "a", "A", "abc", "ABC", "aaa", "b", "ab", "ba", "aab", "x", "foo", "foo bar", "FOO", "a/b", "a\\/b",
  "\x01msg1\n\x01msg2", "\x01Bob: hi", "\x01dragon", "dragon\n\x01knight", "DRAAGON",
  "line1\r\nline2", "a\u2028b", "a\u2029b", "\t \u00a0\ufeff", "\x1c\x85",
  "日本語のテキスト", "огонь огонька", "Ёлка ёлка", "😀", "a😀b", "😀😀", "\ud83d", "\ude00x",
  "ſ", "s", "S", "k", "K", "\u212a", "\u017f", "ß", "ẞ", "SS", "ı", "i", "I", "İ", "σ", "ς", "Σ", "µ", "μ", "Μ",
  "_", "0", "9", "123", "a1_", "$", "^", "{", "}", "]", "[", "(", ")", "\\", "-", "\x00", "\x08", "\x0b", "\x11",
  "u", "uu", "x{1", "a{", "a{1}", "{1}", "k<a>", "é", "É", "café", "naïve",
];

const C = [];
const add = (p, f, ...texts) => C.push([p, f, texts]);

// --- literals, classes, quantifiers, alternation
for (const f of ["", "i", "u", "iu", "m", "s", "g", "y", "gimsuy"]) {
  add("a", f); add("abc", f); add("a|b", f); add("^a", f); add("a$", f); add("^$", f); add(".", f);
  add("[a-c]", f); add("[^a-c]", f); add("\\w", f); add("\\W", f); add("\\d", f); add("\\D", f);
  add("\\s", f); add("\\S", f); add("\\bfoo\\b", f); add("\\Bo\\B", f); add("^.$", f); add("^..$", f);
  add("[^]", f); add("[]", f); add("k", f); add("s", f); add("ſ", f); add("\\u212a", f); add("ß", f);
  add("ẞ", f); add("σ", f); add("ς", f); add("µ", f); add("ı", f); add("İ", f); add("i", f); add("é", f); add("Ё", f);
  add("\\x01", f); add("^\\x01", f); add("\\x01msg", f); add("msg\\d$", f); add("^msg", f);
}
add("a*", ""); add("a+", ""); add("a?", ""); add("a{2}", ""); add("a{2,}", ""); add("a{1,2}", ""); add("a{0}", "");
add("^a{2}$", "", "aa", "aaa"); add("^a{2,3}$", "", "aa", "aaaa"); add("^a{2,}?$", ""); add("a+?b", ""); add("a*?$", "");
add("^(?:ab)+$", "", "abab", "aba"); add("a|", ""); add("|a", ""); add("(|a)b", ""); add("a||b", "");
add("a{", ""); add("a{", "u"); add("x{1", ""); add("x{1", "u"); add("a{1", ""); add("a{,5}", "", "a{,5}"); add("a{,5}", "u");
add("{", ""); add("}", ""); add("]", ""); add("{", "u"); add("}", "u"); add("]", "u"); add("{1}", ""); add("{1,}", "");
add("a{1}{2}", ""); add("a{1}?", ""); add("a{1}??", ""); add("a{2,1}", ""); add("a{1,1}", ""); add("a{0,0}b", "");
add("a{99999999999}", "", "a"); add("a{0,99999999999}b", "", "aab"); add("a{1}}", "", "a}"); add("a{x}", "", "a{x}");
add("a**", ""); add("a+*", ""); add("a??", ""); add("a?+", ""); add("*", ""); add("+a", ""); add("?", ""); add("a|*", "");
add("(*)", ""); add("^*", ""); add("$+", ""); add("\\b*", ""); add("\\B+", ""); add("(?=a)*", ""); add("(?=a)+a", "");
add("(?!a)?b", ""); add("(?=a)*", "u"); add("(?<=a)*", ""); add("(?<!a)+", ""); add("(?=a){2}a", "");
add("(", ""); add(")", ""); add("(a", ""); add("a)", ""); add("((a)", ""); add("(a))", ""); add("[", ""); add("[a", "");
add("[]a]", "", "]a", "a"); add("[]]", ""); add("[^]]", ""); add("a]", ""); add("[[]", "", "["); add("[[]]", "", "[]");
add("[z-a]", ""); add("[a-a]", ""); add("[a-]", "", "-"); add("[-a]", "", "-"); add("[--/]", "", "-", ".", "/", ","); add("[a-z-0]", "", "-", "0", "5");
add("[\\d-z]", "", "-", "5", "y", "z"); add("[\\d-z]", "u"); add("[a-\\d]", "", "-", "5", "b"); add("[\\w-\\d]", "");
add("[\\s-\\d]", "u"); add("[a-\\s]", "u"); add("[\\-]", "u", "-"); add("[\\-]", "", "-"); add("\\-", "", "-"); add("\\-", "u");
add("[\\b]", "", "\x08", "b"); add("[\\B]", "", "B"); add("[\\B]", "u"); add("\\b", "", "a", " "); add("[\\]]", "", "]");
add("[^\\]]", "", "]", "a"); add("[\\^]", "", "^"); add("[^^]", "", "^", "a"); add("[$]", "", "$"); add("[.]", "", ".", "a");
add("[\\d\\s]", "", "1", " ", "a"); add("[^\\d\\s]", "", "1", " ", "a"); add("[\\D]", "", "1"); add("[\\W]", "i", "s", "!");
add("[^\\W]", "iu", "ſ", "K", "s"); add("[\\W]", "iu", "ſ", "s", "\u212a"); add("[^\\w]", "iu", "ſ"); add("\\W", "iu", "ſ", "K");
add("[\\u017f]", "iu", "s", "S"); add("[k]", "iu", "\u212a"); add("[k]", "i", "\u212a"); add("[^k]", "i", "K", "\u212a");
add("[^k]", "iu", "K", "\u212a"); add("[a-z]", "i", "K", "\u212a", "ſ"); add("[a-z]", "iu", "\u212a", "ſ"); add("[^a-z]", "iu", "\u212a", "ſ");
add("\\bſ\\b", "iu", "ſ", "s"); add("a\\b", "iu", "aſ", "a\u212a", "a!"); add("a\\B", "iu", "aſ"); add("a\\b", "i", "aſ", "a\u212a");
// --- case insensitivity details
add("straße", "i", "STRASSE", "STRAẞE", "straße"); add("straße", "iu", "STRAẞE"); add("ǅ", "i", "ǆ", "Ǆ"); add("ǅ", "iu", "ǆ", "Ǆ");
add("ᾳ", "i", "ᾼ"); add("ᾳ", "iu", "ᾼ"); add("ΐ", "i", "ΐ"); add("ΐ", "iu", "ΐ"); add("Ω", "i", "ω", "\u2126"); add("\u2126", "i", "ω", "Ω");
add("\u2126", "iu", "ω", "Ω"); add("[\u00e0-\u00ff]", "i", "À", "Ÿ", "ÿ"); add("[À-Þ]", "i", "à", "ÿ"); add("[^À-Þ]", "i", "à");
add("Ꭰ", "i", "ꭰ"); add("Ꭰ", "iu", "ꭰ"); add("ꭰ", "iu", "Ꭰ"); add("\u{10400}", "iu", "\u{10428}"); add("\u{10400}", "i", "\u{10428}");
add("[\u{10400}]", "iu", "\u{10428}"); add("\\u{10428}", "iu", "\u{10400}"); add("DRA+GON", "i", "dragon", "draagon");
add("dra+gon", "i", "DRAAGON"); add("dra+gon", "", "DRAAGON"); add("ω", "i", "Ω", "\u2126");
// --- letters whose case class is not the two ASCII cases, in the shapes RE2 merges (an
// alternation of single characters or of strings sharing a prefix): RE2 reads a class of an
// ASCII letter's two cases as a case-folded literal and, merging it, adds U+017F or U+212A.
for (const f of ["", "i", "u", "iu"]) {
  for (const c of ["s", "S", "k", "K", "i", "I", "\u017f", "\u212a", "\u0130", "\u0131", "\u00df", "\u1e9e", "\u03a9",
                   "\u2126", "\u00b5", "\u03bc", "\u03c3", "\u03c2", "\u03a3", "\u1c82"]) {
    add(`(?:${c}|x)`, f, "\u1c82", "\u043e", "\u03c9", "\u039c", "xx");
    add(`[${c}]|x`, f, "\u1c82", "\u043e", "\u03c9", "\u039c");
  }
  add("(?:I|S)", f); add("S|I", f); add("[Ss]|x", f); add("[Kk]|[Ss]", f); add("(?:k|s)+", f, "k\u212a\u017f");
  add("Sa|Sk", f, "s\u212a", "sa", "SK", "\u017fk"); add("(?:a|b)(?:S|K)", f, "a\u017f", "b\u212a", "ak", "BS");
  add("(?<!q)(?:S|x)", f); add("(?:S|x)(?=)", f, "\u017fa");
}
// --- backreferences
add("(a)\\1", "", "aa", "ab"); add("(a)|\\1b", "", "b", "ab"); add("\\1(a)", "", "a"); add("(a\\1)", "", "a", "aa");
add("(a\\1)+", "", "aa", "a"); add("^(?:(a)|b)+\\1$", "", "ab", "aba", "abb", "a"); add("^(?:(a)|b)*\\1$", "", "ab", "b");
add("^(a)?\\1$", "", "", "aa", "a"); add("^(a)?b\\1$", "", "b", "aba", "ab"); add("(?:(a)|(b))\\1\\2", "", "a", "b", "aa", "bb");
add("(?<n>x)\\k<n>", "", "xx", "x"); add("\\k<n>(?<n>x)", "", "x"); add("(?<n>x)|\\k<n>y", "", "y"); add("(?<n>.)\\k<n>", "u", "😀😀", "😀");
add("(?<n>x)\\k<m>", ""); add("(?<n>x)\\k", ""); add("(?<n>x)\\k<n", ""); add("\\k<n>", "", "k<n>"); add("\\k", "", "k");
add("\\k<n>", "u"); add("\\k", "u"); add("(?<n>a)[\\k]", ""); add("[\\k]", "", "k"); add("(?<a>)(?<a>)", ""); add("(?<a>x)|(?<a>y)", "");
add("(?<a1>x)", "", "x"); add("(?<$_>x)", "", "x"); add("(?<1a>x)", ""); add("(?<>x)", ""); add("(?<a-b>x)", ""); add("(?<日本>x)\\k<日本>", "", "xx");
add("(?<\\u0061>x)\\k<a>", "", "xx"); add("(?<\\u{61}>x)\\k<a>", "", "xx"); add("(?<a>x)\\k<\\u0061>", "", "xx");
add("(a)\\1", "i", "aA", "Ab"); add("(ſ)\\1", "i", "ſS", "ſſ"); add("(k)\\1", "iu", "k\u212a", "kK"); add("(a)(b)\\2\\1", "", "abba");
add("(a)\\2", "", "a\x02", "a"); add("(a)\\2", "u"); add("\\1", "", "\x01", "1"); add("\\1", "u"); add("\\8", "", "8"); add("\\8", "u");
add("\\9(a)", "", "9a"); add("(a)\\10", "", "a\x08", "aa0"); add("(a)(b)(c)(d)(e)(f)(g)(h)(i)(j)\\10", "", "abcdefghijj", "abcdefghija0");
add("(a)\\18", "", "a\x018", "aa8"); add("(?:(a)|b)\\1+c", "", "bc", "aac"); add("(a)?(?:b\\1)+", "", "bb", "ab");
add("(?=(a))\\1", "", "a"); add("(?!(a))\\1b", "", "b"); add("(?<=(a))b\\1", "", "aba", "ab"); add("(?<=\\1(a))b", "", "ab");
add("(a)|b\\1", "i", "b"); add("((a)|b)+\\2", "", "ab", "aba"); add("(.)\\1", "", "😀😀", "\ud83d\ud83d");
// --- escapes
add("\\0", "", "\x00"); add("\\0", "u", "\x00"); add("\\00", "", "\x00"); add("\\00", "u"); add("\\01", "", "\x01");
add("\\012", "", "\n"); add("\\0123", "", "\n3"); add("\\377", "", "\xff"); add("\\400", "", "\x200", " 0"); add("\\08", "", "\x008");
add("\\7", "", "\x07"); add("[\\1]", "", "\x01", "1"); add("[\\1]", "u"); add("[\\8]", "", "8"); add("[\\0]", "u", "\x00"); add("[\\01]", "u");
add("\\cA", "", "\x01"); add("\\ca", "", "\x01"); add("\\cJ", "u", "\n"); add("\\c1", "", "\\c1", "\x11"); add("\\c", "", "\\c");
add("\\c", "u"); add("\\c1", "u"); add("[\\c1]", "", "\x11", "1"); add("[\\c_]", "", "\x1f"); add("[\\c]", "", "\\", "c"); add("[\\c*]", "", "*");
add("[\\c]", "u"); add("\\c*", "", "\\c", "\\cc"); add("\\x41", "", "A"); add("\\x4", "", "x4"); add("\\x4", "u"); add("\\xG1", "", "xG1");
add("\\u0041", "", "A"); add("\\u004", "", "u004"); add("\\u004", "u"); add("\\u{41}", "", "A", "u".repeat(41)); add("\\u{41}", "u", "A");
add("\\u{2}", "", "uu", "u"); add("\\u{}", "u"); add("\\u{110000}", "u"); add("\\u{10FFFF}", "u", "\u{10ffff}"); add("\\u{0000000041}", "u", "A");
add("\\u{1F600}", "u", "😀"); add("\\uD83D\\uDE00", "", "😀"); add("\\uD83D\\uDE00", "u", "😀"); add("^\\uD83D\\uDE00$", "u", "😀");
add("^[\\uD83D\\uDE00]$", "u", "😀", "\ud83d"); add("^[\\uD83D\\uDE00]$", "", "😀", "\ud83d"); add("\\uD83D", "", "😀", "\ud83d");
add("\\uD83D", "u", "😀", "\ud83d", "\ud83dx"); add("\\uDE00", "u", "😀", "\ude00"); add("^.\\uDE00", "", "😀"); add("^.\\uDE00", "u", "😀");
add("\\a", "", "a"); add("\\a", "u"); add("\\z", "", "z"); add("\\/", "", "/"); add("\\/", "u", "/"); add("\\.", "u", ".", "a");
add("\\$", "u", "$"); add("\\^\\[\\]\\{\\}\\(\\)\\|\\*\\+\\?\\\\", "u", "^[]{}()|*+?\\"); add("\\e", "", "e"); add("\\_", "", "_"); add("\\_", "u");
add("\\ ", "", " "); add("\\ ", "u"); add("\\é", "", "é"); add("\\p", "", "p"); add("\\P", "", "P"); add("\\p{L}", "", "p{L}", "é", "pL");
add("\\p{L}", "u", "é", "1", "日"); add("\\P{L}", "u", "é", "1"); add("\\p{Lu}", "u", "A", "a"); add("\\p{Lu}", "iu", "a", "1");
add("\\P{Lu}", "iu", "a", "A", "1"); add("[^\\p{Lu}]", "iu", "a", "1"); add("\\p{Ll}", "iu", "A", "Σ"); add("\\p{L", "u"); add("\\p", "u");
add("\\p{}", "u"); add("\\p{Foo}", "u"); add("\\p{lu}", "u"); add("\\p{Letter}", "u", "a"); add("\\p{gc=Lu}", "u", "A", "a");
add("\\p{General_Category=Letter}", "u", "a"); add("\\p{Script=Greek}", "u", "α", "a"); add("\\p{sc=Grek}", "u", "α");
add("\\p{scx=Hira}", "u", "あ", "ー"); add("\\p{Script=Han}", "u", "日", "a"); add("\\p{Script=Cyrillic}", "iu", "Ж", "ж");
add("\\p{Script=greek}", "u"); add("\\p{Script=GREEK}", "u"); add("\\p{Script}", "u"); add("\\p{sc=Latin}", "u", "a");
add("\\p{Script=Katakana_Or_Hiragana}", "u", "ー", "a"); add("\\p{sc=SignWriting}", "u", "a"); add("\\p{ASCII}", "u", "a", "é");
add("\\P{ASCII}", "u", "a", "é"); add("\\p{Any}", "u", "😀", ""); add("\\p{Assigned}", "u", "a", "\u0378"); add("\\p{Alphabetic}", "u", "é", "1");
add("\\p{Emoji}", "u", "😀", "a", "1"); add("\\p{Emoji_Presentation}", "u", "😀", "1"); add("\\p{Extended_Pictographic}", "u", "😀", "a");
add("\\p{RGI_Emoji}", "u"); add("\\p{White_Space}", "u", " ", "\x85", "\u180e"); add("\\p{L}+", "u", "Привет", "日本"); add("\\p{N}", "u", "٣");
add("\\p{Nd}", "u", "٣", "²"); add("\\p{ID_Start}", "u", "a", "1"); add("\\p{Lowercase}", "iu", "A"); add("\\p{Uppercase}", "iu", "a", "1");
add("\\p{punct}", "u", "!", "a"); add("\\p{digit}", "u", "1"); add("\\p{cntrl}", "u", "\x01"); add("\\p{LC}", "u", "a", "1");
add("\\p{Combining_Mark}", "u", "\u0301"); add("\\p{CWKCF}", "u", "A", "a", "\u00ad"); add("\\p{Changes_When_NFKC_Casefolded}", "u", "A", "a");
add("\\p{L}", "v"); add("[\\p{L}&&\\p{Lu}]", "u", "&", "A"); add("\\p{Lu}", "i", "p{Lu}", "P{LU}");
// --- anchors, multiline, dotAll, line terminators
add("^b", "m", "a\nb", "a\rb", "a\u2028b", "a\u2029b", "a\x85b"); add("a$", "m", "a\nb", "a\rb", "a\u2028b", "a\u2029b", "a\x85b", "a\r\n");
add("a$", "", "a\n", "a"); add("^$", "m", "\n", "a\n\nb", "a"); add("a.b", "", "a\nb", "a\rb", "a\u2028b", "a\x85b", "a\u0085b");
add("a.b", "s", "a\nb", "a\rb", "a\u2028b"); add("a.b", "su", "a\nb"); add("a[^]b", "", "a\nb"); add("^\\x01dragon", "", "\x01dragon");
add("^dragon", "", "\x01dragon"); add("dragon", "y", "\x01dragon", "dragon"); add("\\x01dragon", "y", "\x01dragon");
add("^\\x01", "my", "\x01a"); add("b", "y", "ab", "b"); add("b", "gy", "ab", "b"); add("^foo", "m", "\x01foo\nfoo"); add("^\\x01foo", "m", "x\n\x01foo");
add("\\x01Bob:", "", "\x01Bob: hi"); add("$\\n", "", "\n"); add("^^", "", ""); add("$$", "", "a"); add("a^", "", "a"); add("$a", "m", "\na");
// --- lookaround
add("a(?=b)", "", "ab", "ac"); add("a(?!b)", "", "ab", "ac"); add("(?<=a)b", "", "ab", "cb"); add("(?<!a)b", "", "ab", "cb");
add("(?<=a+)b", "", "aab"); add("(?<=^a*)b", "", "aab", "cab"); add("(?<=\\d{2,3})x", "", "12x", "1x"); add("(?<=(?<!a)b)c", "", "abc", "bc");
add("(?=(?<=a)b)", "", "ab", "b"); add("(?=", ""); add("(?<=", ""); add("(?<a", ""); add("(?x)", ""); add("(?i)a", ""); add("(?i:a)", "");
add("(?:", ""); add("(?:a)", "", "a"); add("(?<=😀)x", "", "😀x"); add("(?<=.)x", "u", "😀x"); add("(?<=^.)x", "u", "😀x"); add("(?<=^.)x", "", "😀x");
// --- emoji / astral / CJK / Cyrillic
add("😀", "", "😀", "a😀b", "\ud83d"); add("😀", "u", "😀"); add("^😀$", "", "😀"); add("😀+", "", "😀😀", "😀\ude00"); add("😀+", "u", "😀😀");
add("^😀{2}$", "u", "😀😀"); add("^😀{2}$", "", "😀😀", "😀\ude00"); add("[😀]", "", "\ud83d", "\ude00", "😀"); add("[😀]", "u", "😀", "\ud83d");
add("^[😀]$", "u", "😀"); add("^[😀]$", "", "😀"); add("[😀-😂]", "u", "😁", "😃"); add("[😀-😂]", ""); add("[^😀]", "u", "😀"); add("^[^😀]$", "u", "😁", "😀");
add("^[^a]$", "", "😀"); add("^[^a]$", "u", "😀"); add("a.b", "", "a😀b"); add("a..b", "", "a😀b"); add("a.b", "u", "a😀b"); add("\\S", "", "😀");
add("^\\S$", "", "😀"); add("^\\S$", "u", "😀"); add("^\\W\\W$", "", "😀"); add("日本", "", "日本語"); add("^日本$", "", "日本");
add("[一-龯]+", "", "漢字", "kana"); add("огонь", "i", "ОГОНЬ", "огонька"); add("огонь\\b", "", "огонька", "огонь!"); add("\\bогонь", "", "огонь");
add("ё", "i", "Ё"); add("[а-я]+", "i", "ЖЁЛТЫЙ", "жёлтый"); add("[а-яё]+", "i", "ЖЁЛТЫЙ"); add("\\w+", "", "огонь"); add("\\w", "u", "é");
add("\\d", "u", "٣"); add("\\s", "u", "\u3000"); add("café", "i", "CAFÉ"); add("É", "i", "é"); add("ÿ", "i", "Ÿ"); add("ǰ", "i", "J̌");
// --- SPEC 17.11 and haystack shapes
add("\\x01Bob:", "", "\x01Bob: hi"); add("^dragon", "", "\x01dragon"); add("^\\x01dragon", "", "\x01dragon"); add("dragon", "y", "\x01dragon");
add("dra+gon", "i", "\x01DRAAGON"); add("dra+gon", "", "\x01DRAAGON"); add("a\\/b", "", "a/b", "a\\/b"); add("a/b", "", "a/b");
add("\\x01msg2$", "", "\x01msg1\n\x01msg2"); add("^\\x01msg2", "m", "\x01msg1\n\x01msg2"); add("msg1$", "m", "\x01msg1\n\x01msg2");
add("msg1$", "", "\x01msg1\n\x01msg2"); add("\\nmsg", "", "\x01msg1\n\x01msg2"); add("\\n\\x01", "", "\x01msg1\n\x01msg2");
// --- flags
add("a", "gg"); add("a", "ii"); add("a", "x"); add("a", "v"); add("a", "d", "a"); add("a", "uu"); add("a", "G"); add("a", "gimsuyd", "A");
// --- performance-shaped but fast cases
add("(a+)+b", "", "aaab"); add("(x+x+)+y", "", "xxy"); add("(\\w+\\s?)+$", "", "hello world"); add("(.*a){3}", "", "aaa");
// --- disagreements found by the differential fuzzer (tests/data/jsregex/differential.py)
const FUZZ = [];
for (const c of FUZZ) add(...c);

const KEYS = [
  "/a/b/", "/[/", "/a\\\\/b/", "/x/v", "/x/gg", "//", "/a/", "/a/Z", "/a/i", "/a/gimsuy", "/a/gimsuyd", "/a\\/b/",
  "/a\\/b\\/c/", "/\\/a/", "/a//", "/a/ /", "a/", "/a", "/", "///", "/a/g/", "/a/g/i", "/(/", "/)/", "/a\\/", "/\\//",
  "/ a /", "/a/\n", "/a\nb/", "/dra+gon/i", "/^dragon/", "/^\\x01dragon/", "/dragon/y", "/\\x01Bob:/", "/a{/", "/a{/u",
  "/a\\\\/", "/\\\\/", "/(?<n>a)\\k<n>/", "/[/]/", "/[\\/]/", "/a/ii", "/a/mm", "/a/yu", "/😀/u", "/😀/", "/a/b/c/", "/a\\\\\\/b/",
];
const KEY_TEXTS = ["a", "A", "a/b", "a\\/b", "/[/", "x", "\x01dragon", "\x01DRAAGON", "\x01Bob: hi", "a{", "\\", "a\\/b\\/c", "a/b/c", "😀", " a ", "/"];
const keys = KEYS.map((key) => {
  const parsed = parseKey(key);
  const results = KEY_TEXTS.map((t) => (parsed ? new RegExp(parsed[0], parsed[1]).test(t) : t.includes(key)));
  return { key, parsed, texts: KEY_TEXTS, results };
});

// Each case is tested on its own texts followed by COMMON (stored once as common_texts).
const cases = C.map(([p, f, texts]) => {
  const result = evaluate(p, f, [...texts, ...COMMON]);
  result.texts = texts;
  return result;
});
const out = {
  generator: "tests/data/jsregex/generate.mjs", node: process.version, v8: process.versions.v8,
  common_texts: COMMON, cases, keys,
};
const here = dirname(fileURLToPath(import.meta.url));
writeFileSync(join(here, "v8_cases.json"), JSON.stringify(out, null, 0).replace(/\},\{/g, "},\n{") + "\n");
console.log(`${cases.length} regex cases (${cases.filter((c) => c.throws).length} throw), ${keys.length} keys`);
