#!/usr/bin/python3
"""Random-weight models of released shapes (model_tools/glossa-make-shape) convert, load and
translate; prints the load time of each.

    shapes_test.py --translate build/glossa-translate --shapes nllb-600m,m2m100-418m,mbart50-large
    shapes_test.py --translate build/glossa-translate --tiny     # every family, d_model 64: seconds

Per shape: glossa-make-shape writes the Hugging Face directory, glossa-convert makes the Glossa
file (the Hugging Face directory is then removed), glossa-translate loads it twice with no input
(load time: the faster of the two, so that the page cache is warm for both) and translates two
sentences (at most 16 tokens each); the output must have one line per sentence and the
multilingual models must refuse a missing target language.

Exit status: 0 passed, 1 failed, 77 skipped (no shared models to take the tokenizers from).
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
MAKE_SHAPE = os.path.join(REPO, "model_tools", "glossa-make-shape")
CONVERT = os.path.join(REPO, "model_tools", "glossa-convert")
SKIPPED = 77
SENTENCES = "Y dijo Dios: Sea la luz.\nEn el principio creó Dios los cielos y la tierra.\n"

# Languages per tokenizer (None: a bilingual Marian model).
LANGUAGES = {"nllb": ("spa_Latn", "eng_Latn"), "m2m100": ("es", "en"), "mbart50": ("es_XX", "en_XX"),
             "marian": None}
TINY = {f"tiny-{tokenizer}": ["--shape", "custom", "--model_type", model_type, "--tokenizer", tokenizer,
                              "--d_model", "64", "--layers", "2", "--heads", "4", "--ffn", "128",
                              "--vocab_size", "20000"]
        for tokenizer, model_type in (("nllb", "m2m_100"), ("m2m100", "m2m_100"), ("mbart50", "mbart"),
                                      ("marian", "marian"))}
TINY["tiny-marian-multi-target"] = TINY["tiny-marian"]
RELEASED = {"nllb-600m": "nllb", "m2m100-418m": "m2m100", "mbart50-large": "mbart50",
            "opus-mt-base": "marian", "opus-mt-big": "marian"}


def run(command, timeout, stdin=""):
    start = time.monotonic()
    result = subprocess.run(command, input=stdin, capture_output=True, text=True, timeout=timeout)
    return result, time.monotonic() - start


def make_multi_target(hf_dir):
    """Turns a Marian directory into a multi-target one: two made-up pieces become >>fra<< and
    >>por<< (as in opus-mt-en-ROMANCE's vocabulary)."""
    path = os.path.join(hf_dir, "vocab.json")
    with open(path, encoding="utf-8") as f:
        vocab = json.load(f)
    pads = [piece for piece in vocab if "glossapad" in piece][:2]
    for piece, token in zip(pads, (">>fra<<", ">>por<<")):
        vocab[token] = vocab.pop(piece)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False)


def check_multi_target(translate, model, timeout):
    """Marian multi-target: target_language is required and names one of the >>xxx<< tokens."""
    for flags, code, mention in (([], 2, ">>fra<<, >>por<<"), (["--target_language", "fra"], 0, ""),
                                 (["--target_language", "pt"], 0, ""), (["--target_language", ">>por<<"], 0, ""),
                                 (["--target_language", "deu"], 2, "not a target language")):
        result, _ = run([translate, "--model", model, "--max_output_tokens", "4", *flags], timeout, SENTENCES)
        if result.returncode != code or mention not in result.stderr:
            return f"multi-target {flags}: exit {result.returncode}, {result.stderr.strip()!r}"
    return None


def check_shape(name, make_args, tokenizer, args, work):
    hf_dir, model = os.path.join(work, name), os.path.join(work, name + ".glossa")
    result, _ = run([sys.executable, MAKE_SHAPE, *make_args, "--templates", args.templates, "--output", hf_dir],
                    args.timeout)
    if result.returncode:
        return f"glossa-make-shape failed: {result.stderr.strip()}"
    print(result.stdout.strip())
    if name.endswith("multi-target"):
        make_multi_target(hf_dir)
    result, convert_s = run([sys.executable, CONVERT, "--input", hf_dir, "--output", model], args.timeout)
    shutil.rmtree(hf_dir)
    if result.returncode:
        return f"glossa-convert failed: {result.stderr.strip()}"
    languages = LANGUAGES[tokenizer]
    flags = ["--source_language", languages[0], "--target_language", languages[1]] if languages else []
    if name.endswith("multi-target"):
        flags = ["--target_language", "fra"]
        error = check_multi_target(args.translate, model, args.timeout)
        if error:
            return error
    base = [args.translate, "--model", model, "--max_output_tokens", "16", *flags]
    loads = []
    for _ in range(2):
        result, seconds = run(base, args.timeout)
        if result.returncode:
            return f"glossa-translate could not load it: {result.stderr.strip()}"
        loads.append(seconds)
    result, translate_s = run(base + ["--beam_size", "2"], args.timeout, SENTENCES)
    if result.returncode or len(result.stdout.split("\n")) != 3:
        return f"glossa-translate failed ({result.returncode}): {result.stderr.strip()} {result.stdout!r}"
    if languages:
        refused, _ = run([args.translate, "--model", model, "--source_language", languages[0]], args.timeout)
        if refused.returncode != 2 or "target_language is missing" not in refused.stderr:
            return f"a missing target language was not refused: {refused.returncode} {refused.stderr!r}"
    size = os.path.getsize(model)
    os.unlink(model)
    print(f"{name}: {size / 2**20:,.0f} MiB file, convert {convert_s:.1f} s, load {min(loads):.2f} s "
          f"(first {loads[0]:.2f} s), 2 sentences beam 2 in {translate_s:.1f} s (load included)")
    return None


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--translate", required=True, help="the glossa-translate binary")
    parser.add_argument("--templates", default=os.path.join(REPO, "..", "shared", "models"),
                        help="the shared models (glossa-make-shape --templates)")
    parser.add_argument("--shapes", default="", help=f"comma-separated, from {', '.join(RELEASED)}")
    parser.add_argument("--tiny", action="store_true", help="every family at d_model 64 (seconds)")
    parser.add_argument("--work_dir", help="where the files go (default: a temporary directory)")
    parser.add_argument("--timeout", type=int, default=1800, help="seconds per step")
    args = parser.parse_args(argv)
    if not os.path.isdir(os.path.join(args.templates, "opus-bible-nllb-es-en")):
        print(f"skipped: needs the shared models at {args.templates}")
        return SKIPPED
    todo = ({name: (make, name.split("-")[1]) for name, make in TINY.items()} if args.tiny else {})
    for name in filter(None, args.shapes.split(",")):
        if name not in RELEASED:
            parser.error(f"unknown shape {name}; known: {', '.join(RELEASED)}")
        todo[name] = (["--shape", name], RELEASED[name])
    work = tempfile.mkdtemp(prefix="glossa-shapes-", dir=args.work_dir)
    failures = []
    try:
        for name, (make_args, tokenizer) in todo.items():
            error = check_shape(name, make_args, tokenizer, args, work)
            if error:
                print(f"FAIL {name}: {error}")
                failures.append(name)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("PASS" if not failures else f"FAIL: {', '.join(failures)}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
