#!/usr/bin/python3
"""Corpus BLEU exactly as sacreBLEU 2.x computes it by default.

    bleu.py HYP REF [REF ...]        # prints e.g. "BLEU = 48.53 77.8/... (BP = ...)"
    bleu.py --score_only HYP REF     # prints just the score, e.g. "48.53"

The defaults are sacreBLEU's `BLEU()` / `sacrebleu REF < HYP`: the 13a tokenizer
(mteval-v13a.pl), case-sensitive, 'exp' smoothing (NIST's geometric halving of
zero precisions), maximum n-gram order 4, no effective order, and an exact 0.0 when
no n-gram matches at all. The other knobs (tokenize 'none', lowercase, smoothing
'none' / 'floor' / 'add-k', effective order, max n-gram order, several references)
are there so that sacreBLEU's own test cases can be checked; see
tests/python/test_bleu.py.

Written from sacreBLEU's algorithm description and source (Apache-2.0,
github.com/mjpost/sacrebleu, metrics/bleu.py and tokenizers/tokenizer_13a.py);
only the standard library is used.
"""

import argparse
import math
import re
import sys
from collections import Counter

MAX_NGRAM_ORDER = 4

# Smoothing method -> its default value (None: takes none).
SMOOTH_DEFAULTS = {"none": None, "floor": 0.1, "add-k": 1, "exp": None}

# mteval-v13a's language-dependent tokenization (after the XML entities are unescaped):
_13A_RULES = [
    # Punctuation and symbols become tokens: { | } ~ [ \ ] ^ _ ` space ! " # $ % & ( ) * + : ; < = > ? @ /
    (re.compile(r"([\{-\~\[-\` -\&\(-\+\:-\@\/])"), r" \1 "),
    # Period and comma unless preceded by a digit,
    (re.compile(r"([^0-9])([\.,])"), r"\1 \2 "),
    # unless followed by a digit,
    (re.compile(r"([\.,])([^0-9])"), r" \1 \2"),
    # and a dash after a digit.
    (re.compile(r"([0-9])(-)"), r"\1 \2 "),
]


def tokenize_13a(line):
    """sacreBLEU's Tokenizer13a: returns the tokens joined by single spaces."""
    line = line.replace("<skipped>", "").replace("-\n", "").replace("\n", " ")
    if "&" in line:
        line = (line.replace("&quot;", '"').replace("&amp;", "&")
                .replace("&lt;", "<").replace("&gt;", ">"))
    line = f" {line} "
    for pattern, replacement in _13A_RULES:
        line = pattern.sub(replacement, line)
    return " ".join(line.split())


def tokenize_none(line):
    return line


TOKENIZERS = {"13a": tokenize_13a, "none": tokenize_none}


class BleuScore:
    """A BLEU score (0..100) and its sufficient statistics."""

    def __init__(self, score, counts, totals, precisions, bp, sys_len, ref_len):
        self.score = score
        self.counts = counts        # matched n-grams per order
        self.totals = totals        # hypothesis n-grams per order
        self.precisions = precisions
        self.bp = bp
        self.sys_len = sys_len
        self.ref_len = ref_len

    def __str__(self):
        ratio = self.sys_len / self.ref_len if self.ref_len else 0
        precisions = "/".join(f"{p:.1f}" for p in self.precisions)
        return (f"BLEU = {self.score:.2f} {precisions} (BP = {self.bp:.3f} ratio = {ratio:.3f} "
                f"hyp_len = {self.sys_len:d} ref_len = {self.ref_len:d})")


def _log(value):
    """sacreBLEU's my_log: log, with log(0) floored to -9999999999."""
    return -9999999999 if value == 0.0 else math.log(value)


def ngram_counts(tokens, max_order):
    counts = Counter()
    for n in range(1, max_order + 1):
        for i in range(len(tokens) - n + 1):
            counts[tuple(tokens[i:i + n])] += 1
    return counts


def compute_bleu(correct, total, sys_len, ref_len, smooth_method="none", smooth_value=None,
                 effective_order=False, max_ngram_order=MAX_NGRAM_ORDER):
    """BLEU from sufficient statistics (sacreBLEU's BLEU.compute_bleu, same argument order)."""
    if smooth_method not in SMOOTH_DEFAULTS:
        raise ValueError(f"unknown smooth_method {smooth_method!r}; known: {', '.join(SMOOTH_DEFAULTS)}")
    if smooth_value is None:
        smooth_value = SMOOTH_DEFAULTS[smooth_method]
    correct, total = list(correct), list(total)

    if sys_len < ref_len:
        bp = math.exp(1 - ref_len / sys_len) if sys_len > 0 else 0.0
    else:
        bp = 1.0
    precisions = [0.0] * max_ngram_order
    if not any(correct):  # no match at all: 0, whatever the smoothing (sacreBLEU #141)
        return BleuScore(0.0, correct, total, precisions, bp, sys_len, ref_len)

    smooth_mteval = 1.0
    order = max_ngram_order
    for n in range(1, max_ngram_order + 1):
        if smooth_method == "add-k" and n > 1:
            correct[n - 1] += smooth_value
            total[n - 1] += smooth_value
        if total[n - 1] == 0:
            break
        if effective_order:
            order = n
        if correct[n - 1] == 0:
            if smooth_method == "exp":
                smooth_mteval *= 2
                precisions[n - 1] = 100.0 / (smooth_mteval * total[n - 1])
            elif smooth_method == "floor":
                precisions[n - 1] = 100.0 * smooth_value / total[n - 1]
        else:
            precisions[n - 1] = 100.0 * correct[n - 1] / total[n - 1]

    score = bp * math.exp(sum(_log(p) for p in precisions[:order]) / order)
    return BleuScore(score, correct, total, precisions, bp, sys_len, ref_len)


def _closest_ref_len(hyp_len, ref_lens):
    """The reference length closest to the hypothesis length; the shorter one on a tie."""
    return min(ref_lens, key=lambda n: (abs(hyp_len - n), n))


def corpus_bleu(hypotheses, references, tokenize="13a", lowercase=False, smooth_method="exp",
                smooth_value=None, effective_order=False, max_ngram_order=MAX_NGRAM_ORDER):
    """sacreBLEU's BLEU(...).corpus_score(hypotheses, references).

    hypotheses: a sequence of strings.
    references: a sequence of reference streams, each a sequence of strings as long as
                hypotheses (one stream for a single reference). An empty or None reference
                segment is left out for that sentence; a sentence needs at least one.
    """
    hypotheses = list(hypotheses)
    references = [list(stream) for stream in references]
    if not references:
        raise ValueError("no reference streams")
    for i, stream in enumerate(references):
        if len(stream) != len(hypotheses):
            raise ValueError(f"reference stream {i + 1} has {len(stream)} segments, "
                             f"the hypotheses {len(hypotheses)}")
    tokenizer = TOKENIZERS[tokenize]

    def preprocess(segment):
        if lowercase:
            segment = segment.lower()
        return tokenizer(segment.rstrip()).split()

    sys_len = ref_len = 0
    correct = [0] * max_ngram_order
    total = [0] * max_ngram_order
    for index, (hypothesis, *refs) in enumerate(zip(hypotheses, *references)):
        if hypothesis is None:
            raise ValueError(f"hypothesis {index + 1} is undefined")
        refs = [preprocess(ref) for ref in refs if ref is not None and ref != ""]
        if not refs:
            raise ValueError(f"segment {index + 1} has no non-empty reference")
        ref_ngrams = Counter()
        for ref in refs:  # clip by the largest count in any one reference
            for ngram, count in ngram_counts(ref, max_ngram_order).items():
                ref_ngrams[ngram] = max(ref_ngrams[ngram], count)
        tokens = preprocess(hypothesis)
        sys_len += len(tokens)
        ref_len += _closest_ref_len(len(tokens), [len(ref) for ref in refs])
        for ngram, count in ngram_counts(tokens, max_ngram_order).items():
            total[len(ngram) - 1] += count
            correct[len(ngram) - 1] += min(count, ref_ngrams.get(ngram, 0))
    return compute_bleu(correct, total, sys_len, ref_len, smooth_method, smooth_value,
                        effective_order, max_ngram_order)


def sentence_bleu(hypothesis, references, **options):
    """sacreBLEU's sentence_score: one hypothesis against a list of reference strings.
    Effective order is on by default, as sacreBLEU recommends for single sentences."""
    options.setdefault("effective_order", True)
    return corpus_bleu([hypothesis], [[ref] for ref in references], **options)


def read_lines(path):
    """A file's lines without their line ends (sacreBLEU reads text files the same way)."""
    with open(path, encoding="utf-8", newline="\n") as f:
        return [line.rstrip("\n") for line in f]


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="bleu.py",
        description="Corpus BLEU as sacreBLEU 2.x computes it by default "
                    "(BLEU|nrefs:N|case:mixed|eff:no|tok:13a|smooth:exp).")
    parser.add_argument("hypotheses", metavar="HYP", help="system output, one segment per line")
    parser.add_argument("references", metavar="REF", nargs="+", help="reference file(s), line-aligned with HYP")
    parser.add_argument("-b", "--score_only", action="store_true", help="print only the score")
    parser.add_argument("--tokenize", choices=sorted(TOKENIZERS), default="13a")
    parser.add_argument("--lowercase", action="store_true")
    parser.add_argument("--smooth_method", choices=list(SMOOTH_DEFAULTS), default="exp")
    parser.add_argument("--smooth_value", type=float)
    parser.add_argument("--max_ngram_order", type=int, default=MAX_NGRAM_ORDER)
    parser.add_argument("--effective_order", action="store_true")
    args = parser.parse_args(argv)
    try:
        hypotheses = read_lines(args.hypotheses)
        references = [read_lines(path) for path in args.references]
        result = corpus_bleu(hypotheses, references, tokenize=args.tokenize, lowercase=args.lowercase,
                             smooth_method=args.smooth_method, smooth_value=args.smooth_value,
                             effective_order=args.effective_order, max_ngram_order=args.max_ngram_order)
    except (OSError, UnicodeDecodeError, ValueError) as e:
        print(f"bleu.py: error: {e}", file=sys.stderr)
        return 2
    print(f"{result.score:.2f}" if args.score_only else result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
