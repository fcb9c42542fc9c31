#!/usr/bin/python3
"""Routing by language, pivot translation and source_language "auto", over gRPC and HTTP.

Run from the repository root (ctest does this as the test `python_routing`):
    GLOSSA_SERVER=build/glossa-server /usr/bin/python3 -m unittest -v tests/python/test_routing.py

One server (multi_model.py) holds the demo model (Spanish -> English) under two names, one with
priority=5, and copies of its weights relabelled as other pairs (en-fr, en-de, fr-en). A request
that names no model must get exactly what the model it is routed to gives when named; a pivoted
one exactly what the two hops give called one after the other.
"""

import json
import os
import re
import sys
import unittest
import urllib.request

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_server as ts  # noqa: E402
from test_server import setUpModule, tearDownModule  # noqa: E402,F401

import multi_model  # noqa: E402

ENGLISH = "And the king said unto his servants, go and bring me the book of the law."
FRENCH = "Et le roi dit à ses serviteurs : allez et apportez-moi le livre de la loi."


class RoutingTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        multi_model.start_server(cls)
        cls.translator = ts.pb_grpc.TranslatorStub(cls.server.channel)

    def translate(self, texts, source="", target="", model="", split=False, **options):
        request = ts.pb.TranslateRequest(model=model, texts=texts, source_language=source,
                                         target_language=target, split_sentences=split,
                                         options=ts.pb.DecodingOptions(**options))
        return self.translator.Translate(request, timeout=ts.RPC_TIMEOUT_S)

    def texts(self, response):
        return [t.hypotheses[0].text for t in response.translations]

    def assertCode(self, call, code, *mentions):
        with self.assertRaises(grpc.RpcError) as caught:
            call()
        self.assertEqual(caught.exception.code(), code, caught.exception.details())
        for word in mentions:
            self.assertIn(word, caught.exception.details())
        return caught.exception.details()

    def post(self, path, body):
        return multi_model.post_json(self.http_port, path, body)

    def test_a_pair_goes_to_the_model_of_highest_priority(self):
        routed = self.translate([ts.SHORT], "es", "en")
        self.assertEqual(routed.model, "b-es-en")
        named = self.translate([ts.SHORT], model="b-es-en")
        self.assertEqual(self.texts(routed), self.texts(named))
        # ISO 639-3 codes route too.
        self.assertEqual(self.translate([ts.SHORT], "spa", "eng").model, "b-es-en")

    def pivoted(self):
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics",
                                    timeout=ts.RPC_TIMEOUT_S) as response:
            text = response.read().decode()
        return float(re.search(r'^glossa_pivot_requests_total\{model="b-es-en"\} (\S+)$', text,
                               re.M).group(1))

    def test_a_pair_without_a_model_goes_through_the_pivot(self):
        before = self.pivoted()
        texts = [ts.SHORT, ts.LONG, ""]
        for options in ({}, {"beam_size": 1}, {"beam_size": 2, "num_hypotheses": 2,
                                               "return_scores": True}):
            with self.subTest(options=options):
                routed = self.translate(texts, "es", "fr", **options)
                self.assertEqual(routed.model, "b-es-en+en-fr")
                first = self.translate(texts, model="b-es-en",
                                       beam_size=1 if options.get("beam_size") == 1 else 4)
                second = self.translate(self.texts(first), "en", "fr", model="en-fr", **options)
                self.assertEqual(routed.translations, second.translations)
        self.assertEqual(self.pivoted(), before + 3)

    def test_a_named_model_is_never_pivoted(self):
        self.assertCode(lambda: self.translate([ts.SHORT], "es", "fr", model="b-es-en"),
                        grpc.StatusCode.INVALID_ARGUMENT, "fr")

    def test_a_pair_no_route_covers_is_not_found(self):
        details = self.assertCode(lambda: self.translate([ts.SHORT], "es", "ja"),
                                  grpc.StatusCode.NOT_FOUND, "'ja'", "through 'en'")
        self.assertIn("es", details)

    def test_auto_detects_each_text_and_routes_it(self):
        texts = [ts.LONG, ENGLISH, "", FRENCH, ts.SHORT]
        routed = self.translate(texts, "auto", "de")
        self.assertEqual([t.detected_language for t in routed.translations],
                         ["es", "en", "", "fr", "es"])
        for t, text in zip(routed.translations, texts):
            if text:
                self.assertGreater(t.detected_confidence, 50)
        self.assertEqual(routed.model, "b-es-en+en-de,en-de,fr-en+en-de")
        for i, language in ((0, "es"), (1, "en"), (3, "fr"), (4, "es")):
            alone = self.translate([texts[i]], language, "de")
            self.assertEqual(routed.translations[i].hypotheses, alone.translations[0].hypotheses)
        self.assertEqual(self.texts(routed)[2], "")

    def test_auto_with_a_named_model_detects_among_its_languages(self):
        routed = self.translate([ts.LONG], "auto", "", model="a-es-en")
        self.assertEqual(routed.translations[0].detected_language, "es")
        self.assertEqual(routed.model, "a-es-en")

    def test_auto_with_an_unknown_model_names_the_loaded_ones(self):
        self.assertCode(lambda: self.translate([ts.LONG], "auto", "en", model="nope"),
                        grpc.StatusCode.NOT_FOUND, "nope", "b-es-en")

    def test_auto_refuses_a_text_too_short_to_tell(self):
        self.assertCode(lambda: self.translate(["abc"], "auto", "en"),
                        grpc.StatusCode.INVALID_ARGUMENT, "auto", "too few", "es")

    def test_a_glossary_needs_a_direct_model(self):
        request = ts.pb.TranslateRequest(texts=[ts.SHORT], source_language="es",
                                         target_language="fr",
                                         glossary=[ts.pb.GlossaryEntry(source="luz",
                                                                       targets=["lumière"])])
        self.assertCode(lambda: self.translator.Translate(request, timeout=ts.RPC_TIMEOUT_S),
                        grpc.StatusCode.INVALID_ARGUMENT, "glossary")

    def test_stream_routes_detects_and_streams_the_second_hop(self):
        def stream(source, target):
            request = ts.pb.TranslateRequest(texts=[ts.LONG], source_language=source,
                                             target_language=target)
            return list(self.translator.TranslateStream(request, timeout=ts.RPC_TIMEOUT_S))
        messages = stream("auto", "en")
        self.assertTrue(messages[-1].done)
        self.assertEqual(messages[-1].result.detected_language, "es")
        self.assertEqual(messages[-1].result.hypotheses[0].text,
                         self.texts(self.translate([ts.LONG], "es", "en"))[0])
        messages = stream("es", "fr")
        self.assertTrue(messages[-1].done)
        self.assertEqual("".join(m.text_piece for m in messages),
                         self.texts(self.translate([ts.LONG], "es", "fr"))[0])
        self.assertEqual(messages[-1].result.hypotheses,
                         self.translate([ts.LONG], "es", "fr").translations[0].hypotheses)

    def test_libretranslate_auto_reports_each_item(self):
        status, answer = self.post("/translate", {"q": [ts.SHORT, ENGLISH], "source": "auto",
                                                  "target": "de"})
        self.assertEqual(status, 200, answer)
        self.assertEqual([d["language"] for d in answer["detectedLanguage"]], ["es", "en"])
        expected = [self.texts(self.translate([t], s, "de", split=True))[0]
                    for t, s in ((ts.SHORT, "es"), (ENGLISH, "en"))]
        self.assertEqual(answer["translatedText"], expected)
        status, answer = self.post("/translate", {"q": ts.SHORT, "source": "es", "target": "fr"})
        self.assertEqual(status, 200, answer)
        status, answer = self.post("/translate", {"q": ts.SHORT, "source": "es", "target": "ja"})
        self.assertEqual((status, answer), (400, {"error": "'ja' is not supported"}))

    def test_libretranslate_languages_include_pivot_pairs(self):
        with urllib.request.urlopen(f"http://127.0.0.1:{self.http_port}/languages",
                                    timeout=ts.RPC_TIMEOUT_S) as response:
            languages = {entry["code"]: entry["targets"] for entry in json.loads(response.read())}
        self.assertEqual(languages["es"], ["de", "en", "fr"])
        self.assertEqual(languages["fr"], ["de", "en"])
        self.assertEqual(languages["de"], [])

    def test_list_models_names_the_pivot_pairs(self):
        response = self.translator.ListModels(ts.pb.ListModelsRequest(), timeout=ts.RPC_TIMEOUT_S)
        self.assertEqual(sorted(m.name for m in response.models),
                         ["a-es-en", "b-es-en", "en-de", "en-fr", "fr-en"])
        self.assertEqual(sorted((p.source_language, p.target_language, p.models)
                                for p in response.pivot_pairs),
                         [("es", "de", "b-es-en+en-de"), ("es", "fr", "b-es-en+en-fr"),
                          ("fr", "de", "fr-en+en-de")])

    def test_v1_translate_routes(self):
        status, answer = self.post("/v1/translate", {"texts": [ts.SHORT],
                                                     "source_language": "es",
                                                     "target_language": "fr"})
        self.assertEqual(status, 200, answer)
        self.assertEqual(answer["model"], "b-es-en+en-fr")


if __name__ == "__main__":
    unittest.main()
