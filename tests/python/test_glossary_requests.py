#!/usr/bin/python3
"""Glossaries in translation requests, through glossa-server: TranslateRequest.glossary over
gRPC, /v1/translate and LibreTranslate's /translate.

Run by ctest (python_glossary_requests) with the environment of test_server.py. The golden cases
(../shared/golden/constraints, Hugging Face's generate(num_beams=4, force_words_ids=...)) are
sent as glossaries whose source terms are words of the line, so that the server must find them,
encode the targets and decode as Hugging Face does.
"""
import json
import os
import re
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_server as ts  # noqa: E402  (stubs, server process, constants)
import test_http as th  # noqa: E402  (the server with HTTP, requests)

grpc = ts.grpc
GOLDEN = os.path.join(ts.SHARED, "golden", "constraints", "opus-mt-es-en-bible", "constraints.jsonl")
GOLDEN_CASES = 40  # the first cases (8 dev lines): enough for every kind, quick on 2 cores
INVALID = grpc.StatusCode.INVALID_ARGUMENT if grpc else None


def setUpModule():
    ts.setUpModule()


def tearDownModule():
    ts.tearDownModule()


def words(text):
    """Words of text a glossary can name: runs of 3 letters or more, in order, once each."""
    seen = []
    for word in re.findall(r"[^\W\d_]{3,}", text):
        if word not in seen:
            seen.append(word)
    return seen


def golden_glossary(case):
    """The case's terms as glossary entries whose sources are words of its line."""
    sources = words(case["src"])
    entries = []
    for k, term in enumerate(case["terms"]):
        targets = term if isinstance(term, list) else [term]
        entries.append(ts.pb.GlossaryEntry(source=sources[k], targets=targets))
    return entries


class GlossaryRequestsTest(th.HttpTestCase):
    def glossary_request(self, texts, glossary, split_sentences=False, **options):
        return ts.pb.TranslateRequest(model=ts.MODEL_NAME, texts=texts, glossary=glossary,
                                      split_sentences=split_sentences,
                                      options=ts.pb.DecodingOptions(**options))

    def best(self, texts, glossary, split_sentences=False, **options):
        request = self.glossary_request(texts, glossary, split_sentences, **options)
        response = self.translator.Translate(request, timeout=ts.RPC_TIMEOUT_S)
        return [t.hypotheses[0] for t in response.translations]

    def test_golden_cases_as_hugging_face(self):
        if not os.path.exists(GOLDEN):
            self.skipTest(f"needs the shared golden data at {GOLDEN}")
        with open(GOLDEN, encoding="utf-8") as f:
            cases = [json.loads(line) for line in f][:GOLDEN_CASES]
        identical = 0
        for case in cases:
            best, = self.best([case["src"]], golden_glossary(case), beam_size=4,
                              max_output_tokens=128, return_scores=True)
            label = f"line {case['i']} {case['case']}"
            if list(best.token_ids) == case["out_ids"][1:]:
                identical += 1
                self.assertAlmostEqual(best.score, case["score"], delta=1e-4, msg=label)
            for term in case["terms"]:
                alternatives = term if isinstance(term, list) else [term]
                self.assertTrue(any(t in best.text for t in alternatives), f"{label}: {best.text}")
        print(f"{identical} of {len(cases)} glossary requests identical to Hugging Face")
        self.assertGreaterEqual(identical, len(cases) - 1)  # the goldens' 99.5%, on 40 cases

    def test_every_front_end_applies_it(self):
        text = "Y dijo Dios: Sea la luz: y fué la luz. Y vió Dios que la luz era buena."
        glossary = [ts.pb.GlossaryEntry(source="Dios", targets=["the Lord"])]
        plain, = self.best([text], [], split_sentences=True)
        forced = self.best([text], glossary, split_sentences=True)[0].text
        self.assertNotIn("the Lord", plain.text)
        self.assertEqual(forced.count("the Lord"), 2, forced)  # in each sentence
        status, answer = self.post_json("/translate", {
            "q": text, "source": "es", "target": "en", "glossary": {"Dios": "the Lord"}})
        self.assertEqual(status, 200, answer)
        self.assertEqual(answer["translatedText"], forced)
        status, answer = self.post_form("/translate", {
            "q": text, "source": "es", "target": "en", "glossary": '{"Dios": ["the Lord"]}'})
        self.assertEqual(status, 200, answer)
        self.assertEqual(answer["translatedText"], forced)
        status, answer = self.post_json("/v1/translate", {
            "texts": [text], "splitSentences": True,
            "glossary": [{"source": "Dios", "targets": ["the Lord"]}]})
        self.assertEqual(status, 200, answer)
        self.assertEqual(answer["translations"][0]["hypotheses"][0]["text"], forced)

    def test_streaming_ends_with_the_same_translation(self):
        text = "Y vió Dios que la luz era buena."
        glossary = [ts.pb.GlossaryEntry(source="luz", targets=["brightness"])]
        best, = self.best([text], glossary)
        self.assertIn("brightness", best.text)
        pieces, result = [], None
        for message in self.translator.TranslateStream(self.glossary_request([text], glossary),
                                                       timeout=ts.RPC_TIMEOUT_S):
            pieces.append(message.text_piece)
            if message.done:
                result = message.result
        self.assertEqual(result.hypotheses[0].text, best.text)
        self.assertEqual(list(result.hypotheses[0].token_ids), list(best.token_ids))

    def test_terms_that_do_not_occur_change_nothing(self):
        texts = ["Y dijo Dios: Sea la luz.", "En el principio creó Dios los cielos y la tierra."]
        glossary = [ts.pb.GlossaryEntry(source="mar", targets=["ocean"]),
                    ts.pb.GlossaryEntry(source="luces", targets=["lamps"])]
        self.assertEqual([h.token_ids for h in self.best(texts, glossary, beam_size=4)],
                         [h.token_ids for h in self.best(texts, [], beam_size=4)])

    def test_each_text_gets_its_own_terms_and_the_cache_keeps_them_apart(self):
        texts = ["Sea la luz.", "Y la tierra."]
        glossary = [ts.pb.GlossaryEntry(source="luz", targets=["brightness"]),
                    ts.pb.GlossaryEntry(source="tierra", targets=["ground"])]
        plain = [h.text for h in self.best(texts, [])]  # now in the result cache
        forced = [h.text for h in self.best(texts, glossary)]
        self.assertIn("brightness", forced[0])
        self.assertNotIn("ground", forced[0])
        self.assertIn("ground", forced[1])
        self.assertNotIn("brightness", forced[1])
        self.assertEqual([h.text for h in self.best(texts, [])], plain)
        self.assertNotEqual(plain, forced)

    def test_refusals_say_what_to_change(self):
        text = ["Sea la luz."]
        glossary = [ts.pb.GlossaryEntry(source="luz", targets=["light"])]
        self.assertRpcError(lambda: self.best(text, glossary, beam_size=1), INVALID,
                            "beam search", "beam_size")
        self.assertRpcError(lambda: self.best(text, glossary, sampling_temperature=0.7), INVALID,
                            "sampling")
        self.assertRpcError(
            lambda: self.best(text, [ts.pb.GlossaryEntry(source="luz", targets=[])]), INVALID,
            "glossary entry 0", "no target")
        self.assertRpcError(
            lambda: self.best(text, [ts.pb.GlossaryEntry(source=" ", targets=["x"])]), INVALID,
            "glossary entry 0", "empty")
        self.assertRpcError(
            lambda: self.best(text, [ts.pb.GlossaryEntry(source="luz",
                                                         targets=["light", "light of day"])]),
            INVALID, "glossary entry 0", "target 0 starts target 1")
        many = [ts.pb.GlossaryEntry(source=f"t{i}", targets=["x"]) for i in range(10001)]
        self.assertRpcError(lambda: self.best(text, many), INVALID, "10001 entries", "10000")
        long_term = [ts.pb.GlossaryEntry(source="luz", targets=["x" * 300])]
        self.assertRpcError(lambda: self.best(text, long_term), INVALID, "300 bytes")
        status, answer = self.post_json("/translate", {
            "q": "Sea la luz.", "source": "es", "target": "en", "glossary": ["luz"]})
        self.assertError(status, answer, 400, "glossary must be an object")

    def test_a_stored_glossary_by_its_id(self):
        glossaries = ts.pb_grpc.GlossaryServiceStub(self.server.channel)
        info = glossaries.CreateGlossary(ts.pb.CreateGlossaryRequest(
            name="bible", source_language="es", target_language="en",
            entries_text="luz\tbrightness\n", entries_format="tsv"), timeout=ts.RPC_TIMEOUT_S)
        text = ["Y vió Dios que la luz era buena."]
        by_id = self.translator.Translate(ts.pb.TranslateRequest(
            model=ts.MODEL_NAME, texts=text, glossary_id=info.glossary_id),
            timeout=ts.RPC_TIMEOUT_S).translations[0].hypotheses[0]
        inline, = self.best(text, [ts.pb.GlossaryEntry(source="luz", targets=["brightness"])])
        self.assertIn("brightness", by_id.text)
        self.assertEqual(list(by_id.token_ids), list(inline.token_ids))
        status, answer = self.post_json("/translate", {
            "q": text[0], "source": "es", "target": "en", "glossary_id": info.glossary_id})
        self.assertEqual(status, 200, answer)
        self.assertIn("brightness", answer["translatedText"])
        glossaries.DeleteGlossary(ts.pb.DeleteGlossaryRequest(glossary_id=info.glossary_id),
                                  timeout=ts.RPC_TIMEOUT_S)
        self.assertRpcError(lambda: self.translator.Translate(ts.pb.TranslateRequest(
            model=ts.MODEL_NAME, texts=text, glossary_id=info.glossary_id),
            timeout=ts.RPC_TIMEOUT_S), grpc.StatusCode.NOT_FOUND, info.glossary_id)

    def test_a_stored_glossary_with_entries_of_the_request(self):
        # The stored entries come first, then the request's: the same translation as all of them
        # given in the request, every time the glossary is named; errors number them so too.
        glossaries = ts.pb_grpc.GlossaryServiceStub(self.server.channel)
        info = glossaries.CreateGlossary(ts.pb.CreateGlossaryRequest(
            name="bible", source_language="es", target_language="en",
            entries_text="luz\tbrightness\nDios\tthe Lord\n", entries_format="tsv"),
            timeout=ts.RPC_TIMEOUT_S)
        text = ["Y vió Dios que la luz era buena.", "Y llamó Dios a la luz Día."]
        own = [ts.pb.GlossaryEntry(source="Día", targets=["daytime"])]
        stored = [ts.pb.GlossaryEntry(source="luz", targets=["brightness"]),
                  ts.pb.GlossaryEntry(source="Dios", targets=["the Lord"])]
        inline = self.best(text, stored + own)
        for _ in range(3):
            request = self.glossary_request(text, own)
            request.glossary_id = info.glossary_id
            response = self.translator.Translate(request, timeout=ts.RPC_TIMEOUT_S)
            by_id = [t.hypotheses[0] for t in response.translations]
            self.assertEqual([list(h.token_ids) for h in by_id],
                             [list(h.token_ids) for h in inline])
        self.assertIn("daytime", by_id[1].text)
        self.assertIn("brightness", by_id[0].text)
        request = self.glossary_request(text, [ts.pb.GlossaryEntry(source="Día", targets=[""])])
        request.glossary_id = info.glossary_id
        self.assertRpcError(lambda: self.translator.Translate(request, timeout=ts.RPC_TIMEOUT_S),
                            INVALID, "glossary entry 2, target 0: the term is empty")
        glossaries.DeleteGlossary(ts.pb.DeleteGlossaryRequest(glossary_id=info.glossary_id),
                                  timeout=ts.RPC_TIMEOUT_S)

    def test_terms_that_are_not_utf8_get_a_clear_error(self):
        def field(number, payload):
            return bytes([number << 3 | 2, len(payload)]) + payload
        call = self.server.channel.unary_unary(
            "/glossa.v1.Translator/Translate", request_serializer=lambda b: b,
            response_deserializer=lambda b: b)
        for entry in (field(1, b"luz") + field(2, b"lig\xffht"), field(1, b"l\xffz") + field(2, b"x")):
            request = ts.raw_translate_request(ts.MODEL_NAME, [b"Sea la luz."]) + field(8, entry)
            self.assertRpcError(lambda: call(request, timeout=ts.RPC_TIMEOUT_S), INVALID, "UTF-8")


if __name__ == "__main__":
    unittest.main(verbosity=2)
