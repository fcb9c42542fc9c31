#!/usr/bin/python3
"""Translation quality of bfloat16 and int8 weights against float32.

Translates ../shared/golden/dev.es (417 lines) with glossa-translate, greedy and beam 4, for:

  float32          the shared model converted by glossa-convert (the baseline)
  bfloat16         converted with --dtype bfloat16
  int8             converted with --dtype int8
  int8-f32out      converted with --dtype int8 --float32_output_layer
  bfloat16-load    the float32 file with --compute_type bfloat16 (quantised at load)
  int8-load        the float32 file with --compute_type int8
  int8_fast-load   the float32 file with --compute_type int8_fast (8-bit activations)

and checks, per variant and decoding mode:
  - at least 90% of the lines are identical to float32's (the target) for bfloat16 and
    int8; for int8_fast at least 80%, a regression floor only: with one u8 code per input value
    it reaches 84-88% on this model (int8 carries a second code for the rounding residual and
    agrees as often as weights quantized alone do), and the test prints its gap to 90% as a
    warning; for the family models (--model opus-bible-*), int8 at least 85% and int8_fast 75%
    (floors under what they measure, 86-91% and 78-87%; below 90% is a warning);
  - corpus BLEU (sacreBLEU's default: 13a, exp smoothing; model_tools/bleu.py) against
    ../shared/corpus/dev.en is within 0.5 of float32's;
  - the --dtype file and --compute_type of the float32 file give identical outputs (int8 and
    bfloat16: the same quantisation, in Python and in C++);
  - float32's BLEU is within 0.5 of the BLEU of Hugging Face's own outputs (golden/*.hyp), so that
    a broken baseline cannot make every variant agree; for the family models, float32's text
    equals Hugging Face's on every line (their parity through glossa-translate).
It prints a table (variant, mode, lines identical to float32, BLEU, difference, seconds).

    quality_test.py --translate build/glossa-translate [--variants float32,int8] [--modes greedy]
        [--model opus-bible-nllb-es-en]

--model picks the shared model (default: the Marian one); the multilingual families
(opus-bible-{m2m100,nllb,mbart50}-es-en) are translated es -> en with their language codes and
their own length limit, and compared with their own golden outputs (golden/<model>/*.hyp).

Exit status: 0 passed, 1 failed, 77 skipped (no shared data).
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(REPO, "model_tools"))
import bleu  # noqa: E402

SKIPPED = 77
MODEL_NAME = "opus-mt-es-en-bible"
# shared model -> (glossa-translate options, golden folder under golden/, --max_output_tokens)
MODELS = {
    MODEL_NAME: ([], "", 256),  # as the golden outputs (max_new_tokens=256)
    # generation_config max_length 200 (the decoder start counted): the model's own limit, 199
    "opus-bible-m2m100-es-en": (["--source_language", "es", "--target_language", "en"],
                                "opus-bible-m2m100-es-en", 0),
    "opus-bible-nllb-es-en": (["--source_language", "spa_Latn", "--target_language", "eng_Latn"],
                              "opus-bible-nllb-es-en", 0),
    "opus-bible-mbart50-es-en": (["--source_language", "es_XX", "--target_language", "en_XX"],
                                 "opus-bible-mbart50-es-en", 0),
}

# variant -> (model file made by glossa-convert with these options, glossa-translate options)
VARIANTS = {
    "float32": ([], []),
    "bfloat16": (["--dtype", "bfloat16"], []),
    "int8": (["--dtype", "int8"], []),
    "int8-f32out": (["--dtype", "int8", "--float32_output_layer"], []),
    "bfloat16-load": ([], ["--compute_type", "bfloat16"]),
    "int8-load": ([], ["--compute_type", "int8"]),
    "int8_fast-load": ([], ["--compute_type", "int8_fast"]),
}
# The same quantisation made by the converter and at load: outputs must be identical.
SAME_OUTPUTS = [("bfloat16", "bfloat16-load"), ("int8", "int8-load")]
MODES = {"greedy": 1, "beam4": 4}

TARGET_AGREEMENT = 0.90  # the share of lines identical to float32 aimed at


def min_agreement(variant, model=MODEL_NAME):
    """The share of lines identical to float32 the test insists on (see the docstring)."""
    if model != MODEL_NAME and variant.startswith("int8"):
        # The small family models (10 CPU-minutes of fine-tuning) are more sensitive to int8:
        # measured 86-91% for int8 and 78-87% for int8_fast (BLEU within 0.25 of float32). These
        # are regression floors; below the target's 90% the test warns.
        return 0.75 if variant.startswith("int8_fast") else 0.85
    return 0.80 if variant.startswith("int8_fast") else TARGET_AGREEMENT
MAX_BLEU_DIFFERENCE = 0.5


def read_lines(path):
    with open(path, encoding="utf-8", newline="\n") as f:
        return [line.rstrip("\n") for line in f]


def references_for(sources, corpus_sources, corpus_references):
    """The reference of each source line: the line at the same position when the files are the same,
    else the corpus line with the same source text (each corpus line used once, first come first)."""
    if sources == corpus_sources:
        return list(corpus_references), "line-aligned (golden/dev.es is corpus/dev.es)"
    unused = {}
    for index, line in enumerate(corpus_sources):
        unused.setdefault(line, []).append(index)
    references = []
    for number, line in enumerate(sources, 1):
        if not unused.get(line):
            raise ValueError(f"golden/dev.es line {number} is not in corpus/dev.es: {line[:60]!r}")
        references.append(corpus_references[unused[line].pop(0)])
    return references, f"{len(sources)} of {len(corpus_sources)} corpus lines, matched by source text"


class Failure(Exception):
    pass


def run(command, what, timeout):
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    if result.returncode != 0:
        raise Failure(f"{what} failed (exit {result.returncode}): {' '.join(command)}\n{result.stderr.strip()}")
    return result


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--translate", required=True, help="the glossa-translate binary")
    parser.add_argument("--convert", default=os.path.join(REPO, "model_tools", "glossa-convert"))
    parser.add_argument("--shared", default=os.path.join(REPO, "..", "shared"), help="the shared data directory")
    parser.add_argument("--variants", default=",".join(VARIANTS),
                        help=f"comma-separated, from {', '.join(VARIANTS)} (float32 is always run)")
    parser.add_argument("--modes", default=",".join(MODES), help=f"comma-separated, from {', '.join(MODES)}")
    parser.add_argument("--model", default=MODEL_NAME, choices=list(MODELS),
                        help="the shared model to evaluate (default: %(default)s)")
    parser.add_argument("--threads", type=int, default=1, help="glossa-translate --threads")
    parser.add_argument("--work_dir", help="keep the model files and outputs here (default: a temporary "
                                           "directory, removed)")
    parser.add_argument("--timeout", type=int, default=600, help="seconds per glossa-translate run")
    args = parser.parse_args(argv)

    variants = ["float32"] + [v for v in args.variants.split(",") if v and v != "float32"]
    modes = [m for m in args.modes.split(",") if m]
    for name, known in ((variants, VARIANTS), (modes, MODES)):
        unknown = [n for n in name if n not in known]
        if unknown:
            parser.error(f"unknown {', '.join(unknown)}; known: {', '.join(known)}")

    model_dir = os.path.join(args.shared, "models", args.model)
    golden_dir = os.path.join(args.shared, "golden", MODELS[args.model][1])
    paths = {"sources": os.path.join(args.shared, "golden", "dev.es"),
             "corpus sources": os.path.join(args.shared, "corpus", "dev.es"),
             "references": os.path.join(args.shared, "corpus", "dev.en")}
    paths.update({f"golden {mode}": os.path.join(golden_dir, f"{mode}.hyp") for mode in modes})
    missing = [p for p in [model_dir] + list(paths.values()) if not os.path.exists(p)]
    if missing:
        print(f"skipped: needs the shared data ({', '.join(missing)} not found; --shared or "
              "GLOSSA_SHARED_DIR points at it)")
        return SKIPPED
    if not os.access(args.translate, os.X_OK):
        print(f"FAIL: glossa-translate not found at {args.translate}")
        return 1

    sources = read_lines(paths["sources"])
    references, alignment = references_for(sources, read_lines(paths["corpus sources"]),
                                           read_lines(paths["references"]))
    print(f"{args.model}: {len(sources)} sentences; references: corpus/dev.en, {alignment}")

    work = args.work_dir or tempfile.mkdtemp(prefix="glossa-quality-")
    os.makedirs(work, exist_ok=True)
    try:
        return evaluate(args, variants, modes, model_dir, paths, sources, references, work)
    except (Failure, subprocess.TimeoutExpired, ValueError) as e:
        print(f"FAIL: {e}")
        return 1
    finally:
        if not args.work_dir:
            shutil.rmtree(work)


def evaluate(args, variants, modes, model_dir, paths, sources, references, work):
    models = {}
    for variant in variants:
        convert_options, _ = VARIANTS[variant]
        key = tuple(convert_options)
        if key not in models:
            models[key] = os.path.join(work, f"model{'-'.join([''] + [o.strip('-') for o in convert_options])}.glossa")
            run([args.convert, "--input", model_dir, "--output", models[key], *convert_options],
                f"glossa-convert {' '.join(convert_options)}", timeout=600)

    outputs, scores, seconds, errors, warnings = {}, {}, {}, [], []
    model_options, _, max_output_tokens = MODELS[args.model]
    for variant in variants:
        convert_options, translate_options = VARIANTS[variant]
        for mode in modes:
            output = os.path.join(work, f"{variant}.{mode}.en")
            command = [args.translate, "--model", models[tuple(convert_options)], "--beam_size", str(MODES[mode]),
                       "--max_output_tokens", str(max_output_tokens), "--threads", str(args.threads),
                       "--input", paths["sources"], "--output", output, *model_options, *translate_options]
            start = time.monotonic()
            try:
                run(command, f"{variant} {mode}", args.timeout)
            except Failure as e:
                if variant == "float32":
                    raise
                errors.append(str(e))
                continue
            seconds[variant, mode] = time.monotonic() - start
            outputs[variant, mode] = read_lines(output)
            if len(outputs[variant, mode]) != len(sources):
                raise Failure(f"{variant} {mode}: {len(outputs[variant, mode])} output lines for {len(sources)} inputs")
            scores[variant, mode] = bleu.corpus_bleu(outputs[variant, mode], [references]).score

    rows = [("variant", "mode", "identical to float32", "BLEU", "vs float32", "seconds")]
    for mode in modes:
        golden = read_lines(paths[f"golden {mode}"])
        golden_bleu = bleu.corpus_bleu(golden, [references]).score
        same = sum(a == b for a, b in zip(outputs["float32", mode], golden))
        rows.append(("Hugging Face", mode, f"float32 = HF on {same}/{len(golden)}", f"{golden_bleu:.2f}", "", ""))
        if args.model != MODEL_NAME and same != len(golden):
            # The families' parity through glossa-translate (the Marian model's is parity_test's).
            errors.append(f"float32 {mode}: glossa-translate's text equals Hugging Face's on {same} of "
                          f"{len(golden)} lines (the family models must match on every line)")
        if abs(scores["float32", mode] - golden_bleu) > MAX_BLEU_DIFFERENCE:
            errors.append(f"float32 {mode}: BLEU {scores['float32', mode]:.2f} is not within "
                          f"{MAX_BLEU_DIFFERENCE} of Hugging Face's {golden_bleu:.2f}")
    for variant in variants:
        for mode in modes:
            if (variant, mode) not in outputs:
                rows.append((variant, mode, "failed", "", "", ""))
                continue
            agree = sum(a == b for a, b in zip(outputs[variant, mode], outputs["float32", mode]))
            share = agree / len(sources)
            difference = scores[variant, mode] - scores["float32", mode]
            rows.append((variant, mode, f"{agree}/{len(sources)} = {100 * share:.1f}%",
                         f"{scores[variant, mode]:.2f}", f"{difference:+.2f}", f"{seconds[variant, mode]:.1f}"))
            if share < min_agreement(variant, args.model):
                errors.append(f"{variant} {mode}: {100 * share:.1f}% of lines identical to float32 "
                              f"(needs >= {100 * min_agreement(variant, args.model):.0f}%)")
            elif share < TARGET_AGREEMENT:
                warnings.append(f"{variant} {mode}: {100 * share:.1f}% of lines identical to "
                                f"float32, below the target of {100 * TARGET_AGREEMENT:.0f}%")
            if abs(difference) > MAX_BLEU_DIFFERENCE:
                errors.append(f"{variant} {mode}: BLEU {scores[variant, mode]:.2f} differs from float32's "
                              f"{scores['float32', mode]:.2f} by {difference:+.2f} (limit {MAX_BLEU_DIFFERENCE})")
    for converted, loaded in SAME_OUTPUTS:
        for mode in modes:
            if (converted, mode) in outputs and (loaded, mode) in outputs:
                different = [i + 1 for i, (a, b) in enumerate(zip(outputs[converted, mode], outputs[loaded, mode]))
                             if a != b]
                if different:
                    errors.append(f"{converted} and {loaded} {mode}: the same quantisation gives different "
                                  f"outputs on {len(different)} lines (first: line {different[0]})")

    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for index, row in enumerate(rows):
        print("| " + " | ".join(cell.ljust(width) for cell, width in zip(row, widths)) + " |")
        if index == 0:
            print("|" + "|".join("-" * (width + 2) for width in widths) + "|")
    print("BLEU: sacreBLEU 2.x default (nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp), model_tools/bleu.py, "
          "against corpus/dev.en")
    for warning in warnings:
        print(f"WARNING: {warning}")
    for error in errors:
        print(f"FAIL: {error}")
    if not errors:
        print("PASS")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
