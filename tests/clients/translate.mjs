// Sends LibreTranslate /translate requests through one npm client library and prints what the
// library returns, for tests/python/test_npm_clients.py.
//
//   node translate.mjs CLIENT BASE_URL < requests.json
//
// requests.json: [{"q": text, "source": code, "target": code}, ...]; a request without "source"
// leaves it to the library's default. Prints one JSON array, in order: {"translatedText": ...}
// for what the library returned, or {"error": message} for what it threw or reported.
// CLIENT: libretranslate-ts | libretranslate | translate.
import { readFileSync } from "node:fs";

const [client, baseUrl] = process.argv.slice(2);

async function makeClient(name) {
  switch (name) {
    case "libretranslate-ts": {
      // A shared instance; translate(text, source, target) posts q, source, target,
      // format "text" and api_key; it reports failures as {status: 500, error} instead of
      // throwing.
      const { libreTranslate } = await import("libretranslate-ts");
      libreTranslate.setApiEndpoint(baseUrl);
      return async ({ q, source, target }) => {
        const r = await libreTranslate.translate(q, source, target);
        if (r.status !== 200 || r.error) throw new Error(`status ${r.status}: ${r.error}`);
        return r.translatedText;
      };
    }
    case "libretranslate": {
      // translate({query, source, target, apiurl}): source defaults to "auto"; it first reads
      // GET /languages and refuses a source or target that is not a code listed there.
      const { translate } = await import("libretranslate");
      return async ({ q, source, target }) => {
        const options = { query: q, target, apiurl: baseUrl };
        if (source !== undefined) options.source = source;
        const text = await translate(options);
        if (typeof text !== "string") throw new Error(`no translatedText: ${text}`);
        return text;
      };
    }
    case "translate": {
      // franciscop's translate, engine "libre": url is the full /translate address; from and
      // to must be ISO 639-1 codes ("auto" is refused before any request), from defaults to
      // "en".
      const { Translate } = await import("translate");
      const translate = Translate({ engine: "libre", url: `${baseUrl}/translate` });
      return ({ q, source, target }) =>
        translate(q, source === undefined ? { to: target } : { from: source, to: target });
    }
    default:
      throw new Error(`unknown client ${name}`);
  }
}

const requests = JSON.parse(readFileSync(0, "utf8"));
const translate = await makeClient(client);
const answers = [];
for (const request of requests) {
  try {
    answers.push({ translatedText: await translate(request) });
  } catch (e) {
    answers.push({ error: String(e && e.message ? e.message : e) });
  }
}
process.stdout.write(JSON.stringify(answers) + "\n");
