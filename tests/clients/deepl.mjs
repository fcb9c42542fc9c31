// Runs calls of DeepL's official Node.js client (deepl-node's Translator, its serverUrl set to
// glossa-server) and prints what each returned, for tests/python/test_deepl_node.py.
//
//   node deepl.mjs BASE_URL < calls.json
//
// calls.json: [{"call": NAME, "key": AUTH_KEY, ...arguments}, ...], NAME one of
//   translate {texts, source (null: detect), target, options}, sourceLanguages, targetLanguages,
//   usage, glossaryPairs, createGlossary {name, source, target, entries: {term: translation}},
//   getGlossary {id}, listGlossaries, glossaryEntries {id}, deleteGlossary {id}.
// An id or a translate option "glossary" of "$last" is the glossary the last createGlossary
// made. Prints one JSON array, in order: {"result": ...} or {"error": class name, "message"}.
// The client retries nothing (maxRetries 0), so an error answer shows as it came.
import { readFileSync } from "node:fs";
import deepl from "deepl-node";  // CommonJS: its module.exports

const [baseUrl] = process.argv.slice(2);
const translators = new Map();

function translator(key) {
  if (!translators.has(key)) {
    translators.set(key, new deepl.Translator(key, { serverUrl: baseUrl, maxRetries: 0 }));
  }
  return translators.get(key);
}

const glossaryInfo = (g) => ({
  glossaryId: g.glossaryId,
  name: g.name,
  ready: g.ready,
  sourceLang: g.sourceLang,
  targetLang: g.targetLang,
  entryCount: g.entryCount,
  creationTime: g.creationTime instanceof Date && !isNaN(g.creationTime),
});

let lastGlossary = null;
const resolve = (id) => (id === "$last" ? lastGlossary : id);

async function run(c) {
  const t = translator(c.key);
  switch (c.call) {
    case "translate": {
      const options = { ...(c.options || {}) };
      if (options.glossary !== undefined) options.glossary = resolve(options.glossary);
      const r = await t.translateText(c.texts, c.source, c.target, options);
      const list = Array.isArray(r) ? r : [r];
      return {
        single: !Array.isArray(r),
        texts: list.map((x) => x.text),
        detected: list.map((x) => x.detectedSourceLang),
        billed: list.map((x) => x.billedCharacters),
      };
    }
    case "sourceLanguages":
      return await t.getSourceLanguages();
    case "targetLanguages":
      return await t.getTargetLanguages();
    case "usage": {
      const u = await t.getUsage();
      return { count: u.character.count, limit: u.character.limit };
    }
    case "glossaryPairs":
      return await t.getGlossaryLanguagePairs();
    case "createGlossary": {
      const entries = new deepl.GlossaryEntries({ entries: c.entries });
      const g = await t.createGlossary(c.name, c.source, c.target, entries);
      lastGlossary = g.glossaryId;
      return glossaryInfo(g);
    }
    case "getGlossary":
      return glossaryInfo(await t.getGlossary(resolve(c.id)));
    case "listGlossaries":
      return (await t.listGlossaries()).map(glossaryInfo);
    case "glossaryEntries":
      return (await t.getGlossaryEntries(resolve(c.id))).entries();
    case "deleteGlossary":
      await t.deleteGlossary(resolve(c.id));
      return null;
    default:
      throw new Error(`unknown call ${c.call}`);
  }
}

const calls = JSON.parse(readFileSync(0, "utf8"));
const answers = [];
for (const c of calls) {
  try {
    answers.push({ result: await run(c) });
  } catch (e) {
    answers.push({ error: e && e.constructor ? e.constructor.name : "Error",
                   message: String(e && e.message ? e.message : e) });
  }
}
process.stdout.write(JSON.stringify(answers) + "\n");
