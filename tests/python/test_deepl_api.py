#!/usr/bin/python3
"""DeepL's API v2 (/v2/*) over HTTP: translations equal to gRPC's, and bad input per endpoint.

Run from the repository root (ctest does this as the test `python_http_deepl`):
    GLOSSA_SERVER=build/glossa-server /usr/bin/python3 -m unittest -v tests/python/test_deepl_api.py

The server serves the demo model (es -> en). Every refusal must be DeepL's shape, {"message":
...} with DeepL's status code, and leave the server translating.
"""

import json
import os
import sys
import unittest
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_server as ts  # noqa: E402
import test_http as th  # noqa: E402
from test_http import setUpModule, tearDownModule  # noqa: E402,F401

KEY = "deepl-test-key"
AUTH = {"Authorization": f"DeepL-Auth-Key {KEY}"}


class DeeplTestCase(th.HttpTestCase):
    HEADERS = {}

    def deepl(self, method, path, body=None, content_type="application/x-www-form-urlencoded",
              headers=None):
        """(status, decoded JSON or the raw bytes) of a request with the class's key."""
        if isinstance(body, dict):
            body = (json.dumps(body) if content_type == "application/json"
                    else urllib.parse.urlencode(body, doseq=True))
        all_headers = dict(self.HEADERS, **(headers or {}))
        if body is not None:
            all_headers.setdefault("Content-Type", content_type)
        status, answer_headers, data = self.request(method, path, body, all_headers)
        if answer_headers.get("Content-Type", "").startswith("application/json") and data:
            return status, json.loads(data)
        return status, data

    def translate(self, fields, content_type="application/x-www-form-urlencoded", **headers):
        return self.deepl("POST", "/v2/translate", fields, content_type, headers)

    def grpc(self, texts, source="es", split=True, tags=False, **fields):
        request = ts.pb.TranslateRequest(model=ts.MODEL_NAME, texts=texts, source_language=source,
                                         target_language="en", split_sentences=split,
                                         inline_tags=tags, **fields)
        metadata = [("authorization", f"Bearer {KEY}")] if self.HEADERS else None
        response = self.translator.Translate(request, timeout=ts.RPC_TIMEOUT_S, metadata=metadata)
        return [t.hypotheses[0].text for t in response.translations]

    def assertDeeplError(self, answer, want_status, *mentions):
        status, body = answer
        self.assertEqual(status, want_status, body)
        self.assertIsInstance(body, dict, body)
        self.assertEqual(set(body), {"message"}, body)
        self.assertTrue(body["message"].strip())
        for word in mentions:
            self.assertIn(word, body["message"])
        self.assertServerAlive()
        status, body = self.translate({"text": ts.SHORT, "target_lang": "EN-GB"})
        self.assertEqual(status, 200, body)


class DeeplTranslateTest(DeeplTestCase):
    """Shapes and content: each translation what gRPC's Translate gives."""

    def test_form_and_json_bodies(self):
        texts = [ts.SHORT, ts.LONG, ""]
        expected = self.grpc(texts)
        form = self.translate({"text": texts, "target_lang": "EN-GB", "source_lang": "ES"})
        json_body = self.translate({"text": texts, "target_lang": "en-us", "source_lang": "es"},
                                   "application/json")
        for status, answer in (form, json_body):
            self.assertEqual(status, 200, answer)
            self.assertEqual(answer, {"translations": [
                {"detected_source_language": "ES", "text": t} for t in expected]})

    def test_source_detected_and_billed_characters(self):
        status, answer = self.translate({"text": ["¿Qué es la luz?  " + ts.LONG],
                                         "target_lang": "EN-GB",
                                         "show_billed_characters": "1"})
        self.assertEqual(status, 200, answer)
        [t] = answer["translations"]
        self.assertEqual(t["detected_source_language"], "ES")
        self.assertEqual(t["billed_characters"], len("¿Qué es la luz?  " + ts.LONG))
        self.assertEqual(t["text"], self.grpc(["¿Qué es la luz?  " + ts.LONG], "auto")[0])

    def test_split_sentences_values(self):
        text = "Y dijo Dios: Sea la luz.\nY fué la luz."
        for value, split in (("0", False), ("1", True), ("nonewlines", True)):
            with self.subTest(split_sentences=value):
                status, answer = self.translate({"text": text, "target_lang": "EN-GB",
                                                 "source_lang": "ES", "split_sentences": value})
                self.assertEqual(status, 200, answer)
                self.assertEqual(answer["translations"][0]["text"],
                                 self.grpc([text], split=split)[0])

    def test_xml_runs_and_markup(self):
        xml = "<d>\n<p>Y dijo <b>Dios</b>: Sea la luz.</p>\n<p>Y fué la luz.</p>\n</d>"
        status, answer = self.translate({"text": xml, "target_lang": "EN-GB", "source_lang": "ES",
                                         "tag_handling": "xml"})
        self.assertEqual(status, 200, answer)
        runs = self.grpc(["Y dijo <g0>Dios</g0>: Sea la luz.", "Y fué la luz."], tags=True)
        expected = ("<d>\n<p>" + runs[0].replace("<g0>", "<b>").replace("</g0>", "</b>") +
                    "</p>\n<p>" + runs[1] + "</p>\n</d>")
        self.assertEqual(answer["translations"][0]["text"], expected)

    def test_html_as_libretranslate_format_html(self):
        html = "<ul><li>Y dijo <i>Dios</i>.</li><li>Sea la luz.</li></ul>"
        status, answer = self.translate({"text": html, "target_lang": "EN-GB", "source_lang": "ES",
                                         "tag_handling": "html"})
        self.assertEqual(status, 200, answer)
        status, libre = self.post_json("/translate", {"q": html, "source": "es", "target": "en",
                                                      "format": "html"})
        self.assertEqual(status, 200, libre)
        self.assertEqual(answer["translations"][0]["text"], libre["translatedText"])

    def test_unknown_parameters_and_accepted_options_are_ignored(self):
        plain = self.translate({"text": ts.SHORT, "target_lang": "EN-GB", "source_lang": "ES"})
        for extra in ({"no_such_parameter": "x"}, {"context": "La Biblia."},
                      {"formality": "prefer_more"}, {"preserve_formatting": "1"},
                      {"model_type": "quality_optimized"}):
            with self.subTest(extra=extra):
                got = self.translate(dict({"text": ts.SHORT, "target_lang": "EN-GB",
                                           "source_lang": "ES"}, **extra))
                self.assertEqual(got, plain)

    def test_requests_are_counted_in_metrics(self):
        before = self.metric("glossa_requests_total", method="/v2/translate", code="OK")
        self.translate({"text": ts.SHORT, "target_lang": "EN-GB"})
        self.assertEqual(self.metric("glossa_requests_total", method="/v2/translate", code="OK"),
                         before + 1)

    def test_languages_usage_and_pairs(self):
        status, answer = self.deepl("GET", "/v2/languages")
        self.assertEqual((status, answer), (200, [{"language": "ES", "name": "Spanish"}]))
        status, answer = self.deepl("POST", "/v2/languages", {"type": "target"})
        self.assertEqual(status, 200, answer)
        self.assertEqual([a["language"] for a in answer], ["EN-GB", "EN-US"])
        self.assertTrue(all(a["supports_formality"] is False for a in answer))
        status, answer = self.deepl("GET", "/v2/glossary-language-pairs")
        self.assertEqual((status, answer), (200, {"supported_languages": [
            {"source_lang": "es", "target_lang": "en"}]}))
        status, before = self.deepl("GET", "/v2/usage")
        status, _ = self.translate({"text": ["ñandú", "luz"], "target_lang": "EN-US",
                                    "source_lang": "ES"})
        self.assertEqual(status, 200)
        status, after = self.deepl("GET", "/v2/usage")
        self.assertEqual(after["character_count"] - before["character_count"], 8)
        self.assertGreaterEqual(after["character_limit"], 10 ** 12)

    def test_documents_are_not_implemented(self):
        for method, path in (("POST", "/v2/document"), ("POST", "/v2/document/abc"),
                             ("POST", "/v2/document/abc/result")):
            with self.subTest(path=path):
                self.assertDeeplError(self.deepl(method, path, {"target_lang": "EN-GB"}), 501,
                                      "not part of")

    def test_a_form_glossary_needs_the_authorization_header(self):
        fields = {"name": "g", "source_lang": "es", "target_lang": "en", "entries": "luz\tlamp"}
        self.assertDeeplError(self.deepl("POST", "/v2/glossaries", fields), 403, "DeepL-Auth-Key")
        status, answer = self.deepl("POST", "/v2/glossaries", fields,
                                    headers={"Authorization": "DeepL-Auth-Key anything"})
        self.assertEqual(status, 201, answer)

    def test_the_browser_policy_applies(self):
        # A web page of another site: refused before the body is read, as on every route.
        own = f"127.0.0.1:{self.server.http_port}"
        glossaries = self.deepl("GET", "/v2/glossaries")[1]
        for method, path in (("POST", "/v2/translate"), ("POST", "/v2/glossaries"),
                             ("GET", "/v2/usage")):
            with self.subTest(path=path):
                status, _ = self.deepl(method, path, {"text": "Hola", "target_lang": "EN-GB"},
                                       headers={"Origin": "https://evil.example", "Host": own})
                self.assertEqual(status, 403)
        self.assertEqual(self.deepl("GET", "/v2/glossaries")[1], glossaries)  # none made


class DeeplBadInputTest(DeeplTestCase):
    """With a token: each bad request gets DeepL's status and {"message"}, the server unharmed."""

    HEADERS = AUTH

    @classmethod
    def setUpClass(cls):
        cls.SERVER_FLAGS = ("--auth_token_file", th.token_file(cls, KEY),
                            "--max_message_bytes", "262144")
        super().setUpClass()

    def test_the_key(self):
        fields = {"text": ts.SHORT, "target_lang": "EN-GB"}
        for headers in ({"Authorization": ""}, {"Authorization": "DeepL-Auth-Key wrong"},
                        {"Authorization": f"Bearer {KEY}"}, {"Authorization": KEY}):
            with self.subTest(headers=headers):
                self.assertDeeplError(self.translate(fields, **headers), 403, "DeepL-Auth-Key")
                self.assertDeeplError(self.deepl("GET", "/v2/usage", headers=headers), 403)
                self.assertDeeplError(self.deepl("GET", "/v2/glossaries", headers=headers), 403)

    def test_translate_parameters(self):
        base = {"text": ts.SHORT, "target_lang": "EN-GB"}
        cases = [
            ({"target_lang": "EN-GB"}, 400, "Parameter 'text' not specified."),
            ({"text": ts.SHORT}, 400, "Parameter 'target_lang' not specified."),
            (dict(base, target_lang="JA"), 400, "Value for 'target_lang' not supported."),
            (dict(base, source_lang="xx"), 400, "Value for 'source_lang' not supported."),
            (dict(base, split_sentences="2"), 400, "split_sentences"),
            (dict(base, tag_handling="markdown"), 400, "tag_handling"),
            (dict(base, outline_detection="maybe"), 400, "outline_detection"),
            (dict(base, formality="more"), 400,
             "'formality' is not supported for given 'target_lang'."),
            (dict(base, formality="very"), 400, "formality"),
            (dict(base, glossary_id="abc"), 400, "source_lang"),
            (dict(base, source_lang="ES", glossary_id="no-such-glossary"), 404, "no-such"),
            (dict(base, text=[ts.SHORT] * 51), 413, "50"),
            (dict(base, text="a" * 10001, source_lang="ES"), 400, "10000"),
        ]
        for fields, status, mention in cases:
            with self.subTest(fields={k: str(v)[:40] for k, v in fields.items()}):
                self.assertDeeplError(self.translate(fields), status, mention)

    def test_wrong_types_and_bodies(self):
        cases = [
            ('{"text": {"a": 1}, "target_lang": "DE"}', 400, "text"),
            ('{"text": [["nested"]], "target_lang": "DE"}', 400, "text"),
            ('{"text": ["a"], "target_lang": {"x": 1}}', 400, "target_lang"),
            ('{"text": ["a"], "target_lang": 7}', 400, "target_lang"),
            ('["text", "a"]', 400, "JSON object"),
            ('{"text": ', 400, "JSON"),
            (b'{"text": ["\xff\xfe"], "target_lang": "EN-GB"}', 400, "JSON"),
        ]
        for body, status, mention in cases:
            with self.subTest(body=body):
                self.assertDeeplError(self.translate(body, "application/json"), status, mention)
        self.assertDeeplError(self.translate("text=%FF%FE&target_lang=EN-GB"), 400, "UTF-8")
        self.assertDeeplError(self.translate("--x\r\n", "multipart/form-data; boundary=x"), 400,
                              "multipart")
        self.assertDeeplError(self.deepl("GET", "/v2/translate"), 405, "POST")

    def test_too_large_a_body(self):
        status, _ = self.translate({"text": "a" * 300000, "target_lang": "EN-GB"})
        self.assertEqual(status, 413)
        self.assertServerAlive()

    def test_deep_and_broken_markup(self):
        deep = "<a>" * 1000 + "Sea la luz." + "</a>" * 1000
        for outline in ("1", "0"):
            with self.subTest(outline_detection=outline):
                status, answer = self.translate({"text": deep, "target_lang": "EN-GB",
                                                 "source_lang": "ES", "tag_handling": "xml",
                                                 "outline_detection": outline})
                self.assertEqual(status, 200, answer)
                text = answer["translations"][0]["text"]
                self.assertTrue(text.startswith("<a>" * 1000) and text.endswith("</a>" * 1000))
                self.assertEqual(text[3000:-4000], self.grpc(["Sea la luz."])[0])
        for tags, body, mention in (("xml", "<a>" * 10001, "10000"),
                                    ("xml", "Sea <b la luz", "not closed"),
                                    ("xml", "Sea <!-- la luz", "not closed"),
                                    ("html", "<b>" * 10001, "10000")):
            with self.subTest(body=body[:20]):
                self.assertDeeplError(self.translate({"text": body, "target_lang": "EN-GB",
                                                      "source_lang": "ES",
                                                      "tag_handling": tags}), 400, mention)

    def test_an_ignored_element_comes_back_byte_for_byte(self):
        kept = "<n a='&lt;'>Dios  y <b>luz</b> &#233;</n>"
        for tags, text in (("xml", f"<p>Y dijo {kept}: sea la luz.</p>"),
                           ("html", f"<p>Y dijo {kept}: sea la luz.</p>")):
            with self.subTest(tag_handling=tags):
                status, answer = self.translate({"text": text, "target_lang": "EN-GB",
                                                 "source_lang": "ES", "tag_handling": tags,
                                                 "ignore_tags": "x,n"})
                self.assertEqual(status, 200, answer)
                got = answer["translations"][0]["text"]
                self.assertEqual(got.count(kept), 1, got)
                self.assertNotIn("Dios", got.replace(kept, ""))

    def test_other_endpoints(self):
        self.assertDeeplError(self.deepl("GET", "/v2/languages?type=both"), 400, "'type'")
        self.assertDeeplError(self.deepl("PUT", "/v2/usage", "x"), 405)
        self.assertDeeplError(self.deepl("POST", "/v2/glossary-language-pairs", "x"), 405)
        self.assertDeeplError(self.deepl("GET", "/v2/nothing"), 404, "/v2/translate")
        good = {"name": "g", "source_lang": "es", "target_lang": "en", "entries": "luz\tlamp\n"}
        for fields, status, mention in (
                (dict(good, entries=""), 400, "entries"),
                ({k: v for k, v in good.items() if k != "name"}, 400, "name"),
                (dict(good, entries_format="json"), 400, "entries_format"),
                (dict(good, target_lang="ja"), 400, "language pair"),
                (dict(good, entries="luz\tlamp\textra\n"), 400, "line 1"),
                (dict(good, entries=b"luz\t\xff"), 400, "UTF-8")):
            with self.subTest(fields=fields):
                self.assertDeeplError(self.deepl("POST", "/v2/glossaries", fields), status,
                                      mention)
        self.assertDeeplError(self.deepl("GET", "/v2/glossaries/no-such-id"), 404, "no-such-id")
        self.assertDeeplError(self.deepl("GET", "/v2/glossaries/a/b/c"), 404)
        self.assertDeeplError(self.deepl("PUT", "/v2/glossaries", "x"), 405)

    def test_glossary_lifecycle_in_json_and_its_translation(self):
        status, info = self.deepl("POST", "/v2/glossaries",
                                  {"name": "luz", "source_lang": "ES", "target_lang": "EN",
                                   "entries": "luz,lamp\n", "entries_format": "csv"},
                                  "application/json")
        self.assertEqual(status, 201, info)
        gid = info["glossary_id"]
        self.assertEqual({k: v for k, v in info.items() if k not in ("glossary_id",
                                                                      "creation_time")},
                         {"name": "luz", "ready": True, "source_lang": "es", "target_lang": "en",
                          "entry_count": 1})
        self.assertEqual(self.deepl("GET", f"/v2/glossaries/{gid}"), (200, info))
        self.assertIn(info, self.deepl("GET", "/v2/glossaries")[1]["glossaries"])
        self.assertEqual(self.deepl("GET", f"/v2/glossaries/{gid}/entries"), (200, b"luz\tlamp\n"))
        status, answer = self.translate({"text": ts.SHORT, "target_lang": "EN-GB",
                                         "source_lang": "ES", "glossary_id": gid})
        self.assertEqual(status, 200, answer)
        self.assertEqual(answer["translations"][0]["text"],
                         self.grpc([ts.SHORT], glossary_id=gid)[0])
        self.assertEqual(self.deepl("DELETE", f"/v2/glossaries/{gid}")[0], 204)
        self.assertDeeplError(self.deepl("GET", f"/v2/glossaries/{gid}"), 404)


class DeeplRateLimitTest(DeeplTestCase):
    """--req_limit: DeepL's 429, shared with LibreTranslate's routes."""

    SERVER_FLAGS = ("--req_limit", "2")

    def test_past_the_limit(self):
        fields = {"text": ts.SHORT, "target_lang": "EN-GB"}
        self.assertEqual(self.translate(fields)[0], 200)
        self.assertEqual(self.post_json("/translate", {"q": "Hola.", "source": "es",
                                                       "target": "en"})[0], 200)
        status, answer = self.translate(fields)
        self.assertEqual((status, set(answer)), (429, {"message"}), answer)
        self.assertIn("Slowdown", answer["message"])
        self.assertServerAlive()


if __name__ == "__main__":
    unittest.main(verbosity=2)
