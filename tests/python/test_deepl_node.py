#!/usr/bin/python3
"""DeepL's official Node.js client (npm deepl-node) against glossa-server's DeepL API (/v2/).

Run from the repository root (ctest does this as the test `python_npm_deepl`):
    GLOSSA_SERVER=build/glossa-server /usr/bin/python3 tests/python/test_deepl_node.py

The server is multi_model.py's (the demo model es -> en and relabelled copies en-fr, en-de,
fr-en) with two named tokens. deepl-node's Translator, its serverUrl pointed at the server, is
driven by Node.js through tests/clients/deepl.mjs (installed by `npm ci --prefix tests/clients`,
which deploy/run.sh test runs). Each text it gets back must be what gRPC's Translate gives for
the same text and options (source language, target, split_sentences, inline_tags for markup,
glossary_id); markup is compared with the runs the server translates, written back by hand.

Skips (exit code 77 when everything skipped, which ctest reports as skipped) without node or
without the installed packages, saying which.
"""

import os
import subprocess
import sys
import tempfile
import unittest
import json

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_server as ts  # noqa: E402
from test_server import setUpModule, tearDownModule  # noqa: E402,F401

import multi_model  # noqa: E402
import test_npm_clients as npm  # noqa: E402

DRIVER = os.path.join(npm.CLIENTS_DIR, "deepl.mjs")
KEY, OTHER_KEY = "deepl-key-alice", "deepl-key-bob"
FRENCH = "Bonjour à tous, nous sommes très heureux de vous voir ici aujourd'hui avec vos amis."
TWO_SENTENCES = "Y dijo Dios: Sea la luz. Y fué la luz."


class DeeplNodeTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.check_node()
        directory = tempfile.TemporaryDirectory()
        cls.addClassCleanup(directory.cleanup)
        tokens = os.path.join(directory.name, "tokens")
        with open(tokens, "w", encoding="utf-8") as f:
            f.write(f"alice {KEY}\nbob {OTHER_KEY}\n")
        multi_model.start_server(cls, "--auth_token_file", tokens)
        cls.base_url = f"http://127.0.0.1:{cls.http_port}"
        cls.translator = ts.pb_grpc.TranslatorStub(cls.server.channel)

    @classmethod
    def check_node(cls):
        if not os.access(npm.NODE, os.X_OK):
            raise unittest.SkipTest("needs Node.js (node) to run deepl-node")
        version = subprocess.run([npm.NODE, "--version"], capture_output=True, text=True,
                                 timeout=npm.NODE_TIMEOUT_S).stdout.strip()
        if int(version.lstrip("v").split(".")[0]) < 18:
            raise unittest.SkipTest(f"needs Node.js 18 or later; {npm.NODE} is {version}")
        missing = npm.missing_packages()
        if missing:
            raise unittest.SkipTest("npm packages not installed in tests/clients: " +
                                    ", ".join(missing) + "; install them with `npm ci --prefix "
                                    "tests/clients` (deploy/run.sh test does, when npm and the "
                                    "registry are reachable)")

    def calls(self, *calls):
        """What deepl-node returns for each call: {"result": ...} or {"error", "message"}."""
        calls = [dict({"key": KEY}, **c) for c in calls]
        out = subprocess.run([npm.NODE, DRIVER, self.base_url], input=json.dumps(calls),
                             capture_output=True, text=True, encoding="utf-8",
                             cwd=npm.CLIENTS_DIR, timeout=npm.NODE_TIMEOUT_S)
        self.assertEqual(out.returncode, 0, f"node deepl.mjs: {out.stderr}")
        answers = json.loads(out.stdout)
        self.assertEqual(len(answers), len(calls), out.stdout)
        return answers

    def result(self, call):
        [answer] = self.calls(call)
        self.assertIn("result", answer, answer)
        return answer["result"]

    def grpc(self, texts, source, target, split=True, tags=False, glossary_id=""):
        """gRPC Translate's best hypotheses, with the token."""
        request = ts.pb.TranslateRequest(texts=texts, source_language=source,
                                         target_language=target, split_sentences=split,
                                         inline_tags=tags, glossary_id=glossary_id)
        response = self.translator.Translate(request, timeout=ts.RPC_TIMEOUT_S,
                                             metadata=[("authorization", f"Bearer {KEY}")])
        return [t.hypotheses[0].text for t in response.translations], response

    def translate(self, texts, source, target, **options):
        return self.result({"call": "translate", "texts": texts, "source": source,
                            "target": target, "options": options})

    def test_a_single_text_with_its_source(self):
        got = self.translate(ts.SHORT, "es", "en-GB")
        self.assertTrue(got["single"])
        self.assertEqual(got["texts"], self.grpc([ts.SHORT], "es", "en")[0])
        self.assertEqual(got["detected"], ["es"])  # deepl-node lower-cases "ES"
        self.assertEqual(got["billed"], [len(ts.SHORT)])

    def test_an_array_detected_per_text(self):
        # Spanish to the es-en model, French to the fr-en one: as gRPC's "auto" routes them.
        texts = [ts.LONG, FRENCH, ts.SHORT]
        got = self.translate(texts, None, "en-US")
        expected, response = self.grpc(texts, "auto", "en")
        self.assertEqual(got["texts"], expected)
        self.assertEqual(got["detected"], ["es", "fr", "es"])
        self.assertEqual([t.detected_language for t in response.translations], ["es", "fr", "es"])
        self.assertNotEqual(got["texts"][0], got["texts"][1])

    def test_split_sentences(self):
        for option, split in (("off", False), ("on", True), ("nonewlines", True)):
            with self.subTest(splitSentences=option):
                got = self.translate(TWO_SENTENCES, "es", "en-GB", splitSentences=option)
                self.assertEqual(got["texts"], self.grpc([TWO_SENTENCES], "es", "en", split)[0])

    def test_html_keeps_an_ignored_element_byte_for_byte(self):
        kept = '<span class="n" title="a &amp; b">Dios  dijo</span>'
        html = f"<p>Y dijo {kept}: <b>Sea la luz</b>.</p><p>Y fué la luz.</p>"
        got = self.translate(html, "es", "en-GB", tagHandling="html", ignoreTags=["span"])
        # The runs the server translates: each paragraph, the kept element a placeholder.
        runs, _ = self.grpc(["Y dijo <x0/>: <g1>Sea la luz</g1>.", "Y fué la luz."], "es", "en",
                            tags=True)
        expected = ("<p>" + runs[0].replace("<x0/>", kept).replace("<g1>", "<b>")
                    .replace("</g1>", "</b>") + "</p><p>" + runs[1] + "</p>")
        self.assertEqual(got["texts"], [expected])
        self.assertIn(kept, got["texts"][0])
        self.assertNotIn("Dios", got["texts"][0].replace(kept, ""))

    def test_xml_with_ignored_and_splitting_tags(self):
        kept = "<keep id='1'>Sea <b>la</b> luz &amp; más</keep>"
        xml = (f"<doc>\n <s>Y dijo Dios: {kept}.</s>\n <s>Y fué <i>la luz</i>.</s>\n</doc>")
        got = self.translate(xml, "es", "en-US", tagHandling="xml", ignoreTags=["keep"])
        runs, _ = self.grpc(["Y dijo Dios: <x0/>.", "Y fué <g0>la luz</g0>."], "es", "en",
                            tags=True)
        expected = ("<doc>\n <s>" + runs[0].replace("<x0/>", kept) + "</s>\n <s>" +
                    runs[1].replace("<g0>", "<i>").replace("</g0>", "</i>") + "</s>\n</doc>")
        self.assertEqual(got["texts"], [expected])
        # Without outline detection and with <s> splitting: the same runs.
        got = self.translate(xml, "es", "en-US", tagHandling="xml", ignoreTags=["keep"],
                             outlineDetection=False, splittingTags=["s", "doc"])
        self.assertEqual(got["texts"], [expected])

    def test_a_stored_glossary(self):
        created, translated, entries, listed = self.calls(
            {"call": "createGlossary", "name": "luz", "source": "es", "target": "en",
             "entries": {"luz": "lamp"}},
            {"call": "translate", "texts": ts.SHORT, "source": "es", "target": "en-GB",
             "options": {"glossary": "$last"}},
            {"call": "glossaryEntries", "id": "$last"},
            {"call": "listGlossaries"})
        info = created["result"]
        self.assertEqual({k: info[k] for k in ("name", "ready", "sourceLang", "targetLang",
                                               "entryCount", "creationTime")},
                         {"name": "luz", "ready": True, "sourceLang": "es", "targetLang": "en",
                          "entryCount": 1, "creationTime": True})
        expected, _ = self.grpc([ts.SHORT], "es", "en", glossary_id=info["glossaryId"])
        self.assertEqual(translated["result"]["texts"], expected)
        self.assertIn("lamp", expected[0])
        self.assertEqual(entries["result"], {"luz": "lamp"})
        self.assertIn(info["glossaryId"], [g["glossaryId"] for g in listed["result"]])
        deleted, gone = self.calls({"call": "deleteGlossary", "id": info["glossaryId"]},
                                   {"call": "getGlossary", "id": info["glossaryId"]})
        self.assertEqual(deleted, {"result": None})
        self.assertEqual(gone["error"], "GlossaryNotFoundError", gone)

    def test_languages(self):
        sources = self.result({"call": "sourceLanguages"})
        self.assertEqual(sorted(l["code"] for l in sources), ["en", "es", "fr"])
        self.assertIn({"code": "es", "name": "Spanish"}, sources)
        targets = self.result({"call": "targetLanguages"})
        self.assertEqual(sorted(l["code"] for l in targets), ["de", "en-GB", "en-US", "fr"])
        self.assertTrue(all(l["supportsFormality"] is False for l in targets), targets)
        pairs = self.result({"call": "glossaryPairs"})
        self.assertIn({"sourceLang": "es", "targetLang": "en"}, pairs)
        self.assertIn({"sourceLang": "es", "targetLang": "fr"}, pairs)  # through the pivot

    def test_usage_counts_each_key_s_characters(self):
        before, other_before, _, after, other_after = self.calls(
            {"call": "usage"}, {"call": "usage", "key": OTHER_KEY},
            {"call": "translate", "texts": [ts.SHORT, "ñandú"], "source": "es",
             "target": "en-GB"},
            {"call": "usage"}, {"call": "usage", "key": OTHER_KEY})
        self.assertEqual(after["result"]["count"] - before["result"]["count"],
                         len(ts.SHORT) + len("ñandú"))
        self.assertEqual(other_after, other_before)
        self.assertGreater(after["result"]["limit"], 10 ** 9)

    def test_errors_are_deepl_node_s_classes(self):
        bad_key, unknown, formality, kept_going = self.calls(
            {"call": "translate", "key": "not-a-key", "texts": ts.SHORT, "source": "es",
             "target": "en-GB"},
            {"call": "translate", "texts": ts.SHORT, "source": "es", "target": "ja"},
            {"call": "translate", "texts": ts.SHORT, "source": "es", "target": "de",
             "options": {"formality": "more"}},
            {"call": "translate", "texts": ts.SHORT, "source": "es", "target": "en-GB"})
        self.assertEqual(bad_key["error"], "AuthorizationError", bad_key)
        self.assertEqual(unknown["error"], "DeepLError", unknown)
        self.assertIn("Value for 'target_lang' not supported.", unknown["message"])
        self.assertIn("'formality' is not supported for given 'target_lang'.",
                      formality["message"])
        self.assertEqual(kept_going["result"]["texts"], self.grpc([ts.SHORT], "es", "en")[0])


if __name__ == "__main__":
    ts.main_or_skip()
