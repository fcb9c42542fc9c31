#!/usr/bin/python3
"""The multilingual families (M2M100, NLLB-200, mBART-50) through glossa-server, with the
languages given per request: the golden outputs of Hugging Face on the 417 dev lines, greedy and
beam 4; n-best, sampling and streaming; the language errors; ListModels.

Run from the repository root (ctest does this as the test `python_families`, after the fixture
`family_models` converted the shared models):
    GLOSSA_SERVER=build/glossa-server GLOSSA_FAMILY_MODELS=build/family_models \\
        /usr/bin/python3 -m unittest -v tests/python/test_families.py

Environment: as test_server.py, plus GLOSSA_FAMILY_MODELS, the directory holding m2m100.glossa,
nllb.glossa and mbart50.glossa (every test skips without them).
"""

import json
import os
import sys
import threading
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_server  # noqa: E402  (the server harness and the generated stubs)
from test_server import RPC_TIMEOUT_S, SHORT, ServerTestCase  # noqa: E402

FAMILY_MODELS = os.environ.get("GLOSSA_FAMILY_MODELS", "")
GOLDEN = os.path.join(test_server.SHARED, "golden")

# name -> (golden folder, source language, target language, as a request may give them)
FAMILIES = {
    "m2m100": ("opus-bible-m2m100-es-en", "es", "en"),
    "nllb": ("opus-bible-nllb-es-en", "spa_Latn", "eng_Latn"),
    "mbart50": ("opus-bible-mbart50-es-en", "es_XX", "en_XX"),
}
MAX_TEXTS = 256  # the server's default --max_texts_per_request


def setUpModule():
    test_server.setUpModule()
    missing = [f for f in FAMILIES if not os.path.isfile(os.path.join(FAMILY_MODELS, f + ".glossa"))]
    if not FAMILY_MODELS or missing:
        raise unittest.SkipTest(f"needs GLOSSA_FAMILY_MODELS with {', '.join(missing or FAMILIES)}.glossa "
                                "(ctest's fixture family_models converts them from ../shared)")
    if not os.path.isdir(GOLDEN):
        raise unittest.SkipTest(f"needs {GOLDEN}")


def tearDownModule():
    test_server.tearDownModule()


def golden(family, mode):
    with open(os.path.join(GOLDEN, FAMILIES[family][0], mode + ".jsonl"), encoding="utf-8") as f:
        return [json.loads(line) for line in f]


class FamiliesServerTest(ServerTestCase):
    """One server with the demo (Marian, bilingual) model and the three families."""

    @classmethod
    def setUpClass(cls):
        cls.SERVER_FLAGS = tuple(f"--model={name}={os.path.join(FAMILY_MODELS, name + '.glossa')}"
                                 for name in FAMILIES)
        super().setUpClass()

    def request(self, family, texts, source=None, target=None, **options):
        _, src, tgt = FAMILIES[family]
        return test_server.pb.TranslateRequest(
            model=family, texts=texts, options=test_server.pb.DecodingOptions(**options),
            source_language=src if source is None else source,
            target_language=tgt if target is None else target)

    def check_golden(self, family, mode, beam_size):
        lines = golden(family, mode)
        identical_ids = identical_text = 0
        for start in range(0, len(lines), MAX_TEXTS):
            chunk = lines[start:start + MAX_TEXTS]
            response = self.translator.Translate(
                self.request(family, [g["src"] for g in chunk], beam_size=beam_size),
                timeout=RPC_TIMEOUT_S * 4)
            for g, t in zip(chunk, response.translations):
                best = t.hypotheses[0]
                identical_ids += list(best.token_ids) == g["out_ids"][1:]  # without the decoder start
                identical_text += best.text == g["hyp"]
        print(f"{family} {mode} through the server: ids {identical_ids}/{len(lines)}, "
              f"text {identical_text}/{len(lines)}")
        self.assertEqual(identical_ids, len(lines))
        self.assertEqual(identical_text, len(lines))

    def test_golden_greedy(self):
        for family in FAMILIES:
            with self.subTest(family=family):
                self.check_golden(family, "greedy", 1)

    def test_golden_beam4(self):
        for family in FAMILIES:
            with self.subTest(family=family):
                self.check_golden(family, "beam4", 4)

    def test_language_pairs_in_flight_together(self):
        # es->en and es->fr requests at once on one model: each gets its own forced language.
        lines = golden("nllb", "greedy")[:24]
        results = {}

        def run(target):
            results[target] = self.translator.Translate(
                self.request("nllb", [g["src"] for g in lines], target=target, beam_size=1),
                timeout=RPC_TIMEOUT_S)
        threads = [threading.Thread(target=run, args=(t,)) for t in ("eng_Latn", "fra_Latn", "deu")]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        for g, t in zip(lines, results["eng_Latn"].translations):
            self.assertEqual(list(t.hypotheses[0].token_ids), g["out_ids"][1:])
        with open(os.path.join(test_server.SHARED, "models", "opus-bible-nllb-es-en", "added_tokens.json"),
                  encoding="utf-8") as f:
            ids = json.load(f)
        first = {target: {t.hypotheses[0].token_ids[0] for t in r.translations}
                 for target, r in results.items()}
        self.assertEqual(first, {"eng_Latn": {ids["eng_Latn"]}, "fra_Latn": {ids["fra_Latn"]},
                                 "deu": {ids["deu_Latn"]}})

    def test_nbest_sampling_and_stream_never_show_the_language_token(self):
        for family, (_, _, target) in FAMILIES.items():
            with self.subTest(family=family):
                nbest = self.translator.Translate(
                    self.request(family, [SHORT], beam_size=4, num_hypotheses=4, return_scores=True),
                    timeout=RPC_TIMEOUT_S).translations[0].hypotheses
                self.assertEqual(len(nbest), 4)
                scores = [h.score for h in nbest]
                self.assertEqual(scores, sorted(scores, reverse=True))
                sampled = self.translator.Translate(
                    self.request(family, [SHORT] * 3, sampling_temperature=1.0, seed=7),
                    timeout=RPC_TIMEOUT_S).translations
                stream = list(self.translator.TranslateStream(self.request(family, [SHORT], beam_size=4),
                                                              timeout=RPC_TIMEOUT_S))
                pieces = "".join(m.text_piece for m in stream)
                self.assertTrue(stream[-1].done)
                self.assertEqual(pieces, stream[-1].result.hypotheses[0].text)
                code = target if family != "m2m100" else "__en__"
                for text in [h.text for h in nbest] + [t.hypotheses[0].text for t in sampled] + [pieces]:
                    self.assertTrue(text)
                    self.assertNotIn(code, text)

    def test_languages_by_iso_code(self):
        expected = self.translator.Translate(self.request("nllb", [SHORT], beam_size=1),
                                             timeout=RPC_TIMEOUT_S)
        for source, target in (("es", "en"), ("spa", "eng"), ("SPA_LATN", "eng_latn")):
            with self.subTest(source=source, target=target):
                got = self.translator.Translate(self.request("nllb", [SHORT], source, target, beam_size=1),
                                                timeout=RPC_TIMEOUT_S)
                self.assertEqual(got, expected)
        m2m = self.translator.Translate(self.request("m2m100", [SHORT], "__es__", "eng", beam_size=1),
                                        timeout=RPC_TIMEOUT_S)
        self.assertTrue(m2m.translations[0].hypotheses[0].text)

    def test_language_errors(self):
        invalid = test_server.grpc.StatusCode.INVALID_ARGUMENT
        for family, source, target, mentions in (
                ("nllb", "", "", ["multilingual", "source_language", "spa_Latn", "eng_Latn"]),
                ("nllb", "spa_Latn", "", ["target_language is missing", "zul_Latn"]),
                ("nllb", "xx", "en", ["source_language 'xx' is not a language", "spa_Latn"]),
                ("nllb", "es", "zh", ["ambiguous", "zho_Hans", "zho_Hant", "yue_Hant"]),
                ("nllb", "es", "fa", ["ambiguous", "pes_Arab", "prs_Arab"]),
                ("mbart50", "es_XX", "en_US", ["'en_US' is not a language", "en_XX"]),
                ("m2m100", "es", "klingon", ["'klingon' is not a language", "en, es"]),
                ("demo", "", "fr", ["bilingual", "'en'"]),
                ("demo", "de", "", ["bilingual", "'es'"]),
                ("nllb", "es" * 100, "en", ["at most 64"]),
                ("nllb", "es\n", "en", ["control character"])):
            with self.subTest(family=family, source=source, target=target):
                request = test_server.pb.TranslateRequest(model=family, texts=[SHORT],
                                                          source_language=source, target_language=target)
                self.assertRpcError(lambda: self.translator.Translate(request, timeout=RPC_TIMEOUT_S),
                                    invalid, *mentions)
                self.assertRpcError(lambda: list(self.translator.TranslateStream(request, timeout=RPC_TIMEOUT_S)),
                                    invalid, *mentions)

    def test_language_not_utf8(self):
        # Built by hand: the Python stubs only send valid UTF-8 strings.
        body = test_server.pb.TranslateRequest(model="nllb", texts=[SHORT],
                                               target_language="en").SerializeToString()
        body += b"\x22\x02\xff\xfe"  # field 4 (source_language), 2 bytes
        call = self.server.channel.unary_unary(
            "/glossa.v1.Translator/Translate", request_serializer=lambda b: b,
            response_deserializer=test_server.pb.TranslateResponse.FromString)
        self.assertRpcError(lambda: call(body, timeout=RPC_TIMEOUT_S),
                            test_server.grpc.StatusCode.INVALID_ARGUMENT, "source_language is not valid UTF-8")

    def test_bilingual_model_accepts_its_languages(self):
        plain = self.translate([SHORT], beam_size=1)
        for source, target in (("es", "en"), ("spa", "eng"), ("", "en"), ("ES", "")):
            request = test_server.pb.TranslateRequest(
                model=test_server.MODEL_NAME, texts=[SHORT], source_language=source,
                target_language=target, options=test_server.pb.DecodingOptions(beam_size=1))
            self.assertEqual(self.translator.Translate(request, timeout=RPC_TIMEOUT_S), plain)

    def test_list_models(self):
        response = self.translator.ListModels(test_server.pb.ListModelsRequest(), timeout=RPC_TIMEOUT_S)
        models = {m.name: m for m in response.models}
        self.assertEqual(set(models), {"demo", *FAMILIES})
        for name, count, code in (("nllb", 202, "spa_Latn"), ("m2m100", 100, "es"), ("mbart50", 52, "es_XX")):
            m = models[name]
            self.assertEqual(len(m.source_languages), count, name)
            self.assertEqual(list(m.source_languages), list(m.target_languages))
            self.assertIn(code, m.source_languages)
            self.assertEqual(m.path, "")
            self.assertEqual((m.source_language, m.target_language), ("", ""))
        self.assertEqual(models["nllb"].architecture, "m2m_100")
        self.assertEqual(models["mbart50"].architecture, "mbart")


if __name__ == "__main__":
    unittest.main()
