#!/usr/bin/python3
"""glossa-convert on the multilingual families (M2M100, NLLB-200, mBART-50): the header it writes
for the shared models, the position tables, and the refusals that name the key.

    GLOSSA_SHARED=../shared /usr/bin/python3 -m unittest -v tests/python/test_convert_families.py
"""

import json
import math
import os
import shutil
import sys
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_convert import SHARED, ConvertTestCase, run_convert  # noqa: E402
import glossa_model  # noqa: E402  (test_convert put model_tools on the path)

MODELS = os.path.join(SHARED, "models")


def shared_model(name):
    return os.path.join(MODELS, name)


@unittest.skipUnless(os.path.isdir(shared_model("opus-bible-nllb-es-en")), f"needs {MODELS}")
class FamiliesConvertTest(ConvertTestCase):
    def convert(self, input_dir, *flags):
        output = os.path.join(self.tmp, "out.glossa")
        result = run_convert("--input", input_dir, "--output", output, *flags)
        return result, output

    def editable_copy(self, name, **edits):
        """A copy of a shared model (weights linked) with JSON files edited: edits maps a file name
        to a function that changes its parsed content."""
        out = os.path.join(self.tmp, name)
        os.makedirs(out)
        for entry in os.listdir(shared_model(name)):
            source = os.path.join(shared_model(name), entry)
            if entry.endswith(".bin"):
                os.symlink(source, os.path.join(out, entry))
            else:
                shutil.copyfile(source, os.path.join(out, entry))
        for file_name, change in edits.items():
            path = os.path.join(out, file_name.replace("__", "."))
            with open(path, encoding="utf-8") as f:
                value = json.load(f)
            change(value)
            with open(path, "w", encoding="utf-8") as f:
                json.dump(value, f)
        return out

    def test_nllb_header(self):
        result, output = self.convert(shared_model("opus-bible-nllb-es-en"))
        self.assertEqual(result.returncode, 0, result.stderr)
        header, tensors = glossa_model.read_model(output)
        config, tokenizer = header["config"], header["tokenizer"]
        self.assertEqual(config["architecture"], "m2m_100")
        self.assertEqual((config["normalize_before"], config["final_layer_norm"], config["layernorm_embedding"]),
                         (True, True, False))
        self.assertEqual((config["position_offset"], config["positions_from_pad"]), (2, True))
        self.assertEqual(tokenizer["type"], "nllb")
        self.assertEqual(tokenizer["source_language_position"], "prefix")
        languages = {lang["code"]: lang for lang in tokenizer["languages"]}
        self.assertEqual(len(languages), 202)
        self.assertEqual(languages["eng_Latn"], {"code": "eng_Latn", "token": "eng_Latn", "id": 16047,
                                                 "iso639_1": "en", "iso639_3": "eng"})
        self.assertEqual(languages["arb_Arab"]["iso639_1"], "ar")
        vocab = tokenizer["source_vocab"]
        self.assertEqual(vocab[:5], ["<s>", "<pad>", "</s>", "<unk>", vocab[4]])
        self.assertEqual(vocab[16203], "<mask>")
        self.assertIn(16203, tokenizer["special_ids"])
        self.assertEqual((header["source_language"], header["target_language"]), ("", ""))
        # fairseq sinusoids: sin | cos halves, row padding_idx zero, position t at row t + 2.
        positions = tensors["encoder.embed_positions.weight"]
        self.assertEqual(list(positions.shape), [512 + 2, 256])
        self.assertFalse(positions[1].any())
        half = 128
        frequencies = np.exp(np.arange(half) * -(math.log(10000) / (half - 1)))
        for row in (2, 3, 100, 513):
            expected = np.concatenate([np.sin(row * frequencies), np.cos(row * frequencies)])
            np.testing.assert_allclose(positions[row], expected, atol=2e-4)

    def test_mbart_learned_positions_and_m2m100_vocab(self):
        result, output = self.convert(shared_model("opus-bible-mbart50-es-en"))
        self.assertEqual(result.returncode, 0, result.stderr)
        header, tensors = glossa_model.read_model(output)
        self.assertEqual(header["config"]["architecture"], "mbart")
        self.assertTrue(header["config"]["layernorm_embedding"])
        self.assertEqual(list(tensors["decoder.embed_positions.weight"].shape), [514, 256])
        self.assertEqual(header["generation"]["forced_eos_token_id"], 2)
        self.assertTrue(header["generation"]["early_stopping"])
        result, output = self.convert(shared_model("opus-bible-m2m100-es-en"))
        self.assertEqual(result.returncode, 0, result.stderr)
        header, _ = glossa_model.read_model(output)
        tokenizer = header["tokenizer"]
        languages = {lang["code"]: lang for lang in tokenizer["languages"]}
        self.assertEqual((languages["es"]["token"], languages["es"]["id"]), ("__es__", 16020))
        self.assertEqual(languages["ns"]["iso639_3"], "nso")
        self.assertEqual(len(tokenizer["source_vocab"]), 16109)  # the 8 made-up words: special
        self.assertTrue(set(range(16101, 16109)) <= set(tokenizer["special_ids"]))

    def test_nllb_legacy_behaviour_puts_the_code_after_eos(self):
        legacy = self.editable_copy("opus-bible-nllb-es-en",
                                    tokenizer_config__json=lambda c: c.update(legacy_behaviour=True))
        result, output = self.convert(legacy)
        self.assertEqual(result.returncode, 0, result.stderr)
        header, _ = glossa_model.read_model(output, verify=False)
        self.assertEqual(header["tokenizer"]["source_language_position"], "suffix")

    def test_refusals_name_the_key(self):
        cases = [
            ("opus-bible-nllb-es-en", {"tokenizer_config__json": lambda c: c.update(tokenizer_class="XLMRobertaTokenizer")},
             ["tokenizer_class", "XLMRobertaTokenizer", "NllbTokenizer"]),
            ("opus-bible-mbart50-es-en", {"tokenizer_config__json": lambda c: c.update(tokenizer_class="NllbTokenizer")},
             ["tokenizer_class", "MBart50Tokenizer"]),
            ("opus-bible-nllb-es-en", {"config__json": lambda c: c.update(pad_token_id=0)},
             ["pad_token_id"]),
            ("opus-bible-nllb-es-en", {"config__json": lambda c: c.update(activation_function="tanh")},
             ["activation_function", "tanh"]),
            ("opus-bible-m2m100-es-en", {"config__json": lambda c: c.update(vocab_size=16050)},
             ["vocab_size"]),
            ("opus-bible-nllb-es-en",
             {"tokenizer_config__json": lambda c: c["additional_special_tokens"].reverse()},
             ["added_tokens_decoder"]),
            ("opus-bible-mbart50-es-en", {"generation_config__json": lambda c: c.update(early_stopping="never")},
             ["early_stopping"]),
            ("opus-bible-m2m100-es-en",
             {"tokenizer_config__json": lambda c: c.update(sp_model_kwargs={"enable_sampling": True})},
             ["sp_model_kwargs", "enable_sampling"]),
        ]
        for index, (name, edits, fragments) in enumerate(cases):
            with self.subTest(case=index, fragments=fragments):
                directory = self.editable_copy(name, **edits)
                result, _ = self.convert(directory)
                self.assertRefused(result, *fragments)
                shutil.rmtree(directory)


if __name__ == "__main__":
    unittest.main()
