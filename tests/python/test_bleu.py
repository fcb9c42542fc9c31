#!/usr/bin/python3
"""Tests for model_tools/bleu.py against the expected values of sacreBLEU's own test suite.

    /usr/bin/python3 -m unittest tests/python/test_bleu.py

The cases and numbers are copied from github.com/mjpost/sacrebleu (2.x):
  test/test_bleu.py           test_corpus_bleu_cases, test_raw_bleu_cases, test_case_effective_order,
                              test_case_statistics, test_case_scoring, test_case_offset,
                              test_case_degenerate_stats, test_bleu_max_order
  test/test_sentence_bleu.py  test_cases (smoothing and tokenizer variants; the 'intl' and 'char'
                              tokenizers and lowercase-with-char are not implemented here) and
                              test_cases_zero_bleu
sacreBLEU's `raw_corpus_bleu(hyps, refs, v)` is corpus BLEU with tokenize='none', smooth_method='floor',
smooth_value=v and effective order on; its `compute_bleu` defaults to smooth_method='none'.
"""

import os
import subprocess
import sys
import tempfile
import unittest

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(REPO, "model_tools"))
import bleu  # noqa: E402

EPSILON = 1e-8

# sacreBLEU test/test_bleu.py: the README example, two reference streams.
REFS = [
    ["The dog bit the man.", "It was not unexpected.", "The man bit him first."],
    ["The dog had bit the man.", "No one was surprised.", "The man had bitten the dog."],
]
HYPS = ["The dog bit the man.", "It wasn't surprising.", "The man had just bitten him."]


def raw_corpus_bleu(hyps, refs, smooth_value=0.1):
    return bleu.corpus_bleu(hyps, refs, tokenize="none", smooth_method="floor", smooth_value=smooth_value,
                            effective_order=True)


class CorpusBleuTest(unittest.TestCase):
    def test_corpus_bleu_cases(self):
        for hyps, options, expected in (
            (HYPS, {}, 48.530827),                          # default settings
            (("", "", ""), {}, 0.0),                        # empty hypotheses are kept
            (HYPS, {"tokenize": "none"}, 49.1919566),
            (HYPS, {"tokenize": "13a"}, 48.530827),
            (HYPS, {"smooth_method": "none"}, 48.530827),
        ):
            with self.subTest(hyps=hyps, options=options):
                self.assertAlmostEqual(bleu.corpus_bleu(hyps, REFS, **options).score, expected, delta=EPSILON)

    def test_max_ngram_order(self):
        for order, expected in ((1, "77.65"), (2, "60.50"), (3, "53.93"), (4, "48.53"), (5, "46.14"),
                                (6, "43.28")):
            with self.subTest(order=order):
                self.assertEqual(f"{bleu.corpus_bleu(HYPS, REFS, max_ngram_order=order).score:.2f}", expected)

    def test_raw_bleu(self):
        for hyps, refs, expected in (
            (["this is a test", "another test"], [["ref1", "ref2"]], 0.0),  # no match at all: 0 (sacreBLEU #141)
            (["this is a test"], [["this is a test"]], 1.0),
            (["this is a fest"], [["this is a test"]], 0.223606797749979),
        ):
            with self.subTest(hyps=hyps):
                self.assertAlmostEqual(raw_corpus_bleu(hyps, refs, 0.01).score / 100, expected, delta=EPSILON)

    def test_effective_order(self):
        for hyps, refs, expected in (
            (["test"], [["a test"]], 0.3678794411714425),
            (["a test"], [["a test"]], 1.0),
            (["a little test"], [["a test"]], 0.03218297948685433),
        ):
            with self.subTest(hyps=hyps):
                self.assertAlmostEqual(raw_corpus_bleu(hyps, refs, 0.01).score / 100, expected, delta=EPSILON)

    def test_statistics(self):
        result = raw_corpus_bleu(["am I am a character sequence"], [["I am a symbol string sequence a a"]], 0.01)
        self.assertEqual((result.counts, result.totals), ([4, 2, 1, 0], [6, 5, 4, 3]))

    def test_offset(self):
        hyps, refs = ["am I am a character sequence"], [["I am a symbol string sequence a a"]]
        self.assertAlmostEqual(raw_corpus_bleu(hyps, refs, 0.0).score / 100, 0, delta=EPSILON)
        self.assertAlmostEqual(raw_corpus_bleu(hyps, refs, None).score / 100, 0.1555722182, delta=EPSILON)
        self.assertAlmostEqual(raw_corpus_bleu(hyps, refs).score / 100, 0.1555722182, delta=EPSILON)

    def test_scoring(self):
        score = bleu.compute_bleu([9, 7, 5, 3], [10, 8, 6, 4], 11, 11).score / 100
        self.assertAlmostEqual(score, 0.8375922397, delta=EPSILON)

    def test_degenerate_statistics(self):
        for (correct, total, sys_len, ref_len), offset in (
            (([0, 0, 0, 0], [4, 4, 2, 1], 0, 1), 0.0),
            (([0, 0, 0, 0], [10, 11, 12, 0], 14, 10), 0.0),
            (([0, 0, 0, 0], [0, 0, 0, 0], 0, 0), 0.0),
            (([6, 5, 4, 0], [6, 5, 4, 3], 6, 6), 0.0),
            (([0, 0, 0, 0], [0, 0, 0, 0], 0, 0), 0.1),
            (([0, 0, 0, 0], [0, 0, 0, 0], 1, 5), 0.01),
        ):
            with self.subTest(correct=correct, total=total, offset=offset):
                score = bleu.compute_bleu(correct, total, sys_len, ref_len, smooth_method="floor",
                                          smooth_value=offset).score / 100
                self.assertEqual(score, 0.0)

    def test_mismatched_lengths_are_refused(self):
        with self.assertRaises(ValueError):
            bleu.corpus_bleu(HYPS, [REFS[0][:2]])
        with self.assertRaises(ValueError):
            bleu.corpus_bleu(["a"], [[""]])


class SentenceBleuTest(unittest.TestCase):
    # sacreBLEU test/test_sentence_bleu.py, example from sacreBLEU issue #98 (tolerance 1e-3 there too).
    REF = "producţia de zahăr brut se exprimă în zahăr alb;"
    SYS = "Producția de zahăr primă va fi exprimată în ceea ce privește zahărul alb;"

    def test_smoothing_and_tokenizers(self):
        for method, value, tokenize, expected in (
            ("exp", None, "13a", 8.493),
            ("none", None, "13a", 0.0),
            ("floor", None, "13a", 4.51688),
            ("floor", 0.1, "13a", 4.51688),
            ("floor", 0.5, "13a", 10.10),
            ("add-k", None, "13a", 14.882),
            ("add-k", 1, "13a", 14.882),
            ("add-k", 2, "13a", 21.389),
            ("exp", None, "none", 7.347),
        ):
            with self.subTest(method=method, value=value, tokenize=tokenize):
                score = bleu.sentence_bleu(self.SYS, [self.REF], smooth_method=method, smooth_value=value,
                                           tokenize=tokenize).score
                self.assertAlmostEqual(score, expected, delta=1e-3)

    def test_zero_bleu(self):
        for method, value in (("exp", None), ("none", None), ("floor", None), ("floor", 0.1), ("add-k", None),
                              ("add-k", 1)):
            with self.subTest(method=method, value=value):
                score = bleu.sentence_bleu("this is a cat", ["okay thanks"], smooth_method=method,
                                           smooth_value=value).score
                self.assertEqual(score, 0.0)


class Tokenizer13aTest(unittest.TestCase):
    """Behaviour of mteval-v13a's tokenization (the rules in sacreBLEU's tokenizer_re.py)."""

    def test_tokenization(self):
        for text, expected in (
            ("The dog bit the man.", "The dog bit the man ."),
            ("It wasn't surprising.", "It wasn't surprising ."),  # ' is not split
            ("1,000.50 and 3.5, then a.b", "1,000.50 and 3.5 , then a . b"),
            ("2-3 well-known", "2 - 3 well-known"),
            ("&quot;Hi&quot; &amp; &lt;b&gt;", '" Hi " & < b >'),
            ("  (x)  [y]{z}  ", "( x ) [ y ] { z }"),
            ("a<skipped>b", "ab"),
            ("“Let there be light,” said God.", "“Let there be light , ” said God ."),
        ):
            with self.subTest(text=text):
                self.assertEqual(bleu.tokenize_13a(text), expected)


class CommandLineTest(unittest.TestCase):
    def test_cli(self):
        with tempfile.TemporaryDirectory() as tmp:
            paths = []
            for name, lines in (("hyp", HYPS), ("ref1", REFS[0]), ("ref2", REFS[1])):
                paths.append(os.path.join(tmp, name))
                with open(paths[-1], "w", encoding="utf-8") as f:
                    f.write("\n".join(lines) + "\n")
            script = os.path.join(REPO, "model_tools", "bleu.py")
            result = subprocess.run([sys.executable, script, *paths], capture_output=True, text=True)
            self.assertEqual(result.returncode, 0, result.stderr)
            self.assertTrue(result.stdout.startswith("BLEU = 48.53 "), result.stdout)
            result = subprocess.run([sys.executable, script, "--score_only", *paths], capture_output=True, text=True)
            self.assertEqual(result.stdout, "48.53\n")
            result = subprocess.run([sys.executable, script, paths[0], os.path.join(tmp, "missing")],
                                    capture_output=True, text=True)
            self.assertEqual(result.returncode, 2)
            self.assertIn("missing", result.stderr)


if __name__ == "__main__":
    unittest.main()
