#!/usr/bin/python3
"""CTranslate2's side of peer_compare.py: the same timeline and JSON as glossa-peer-run.

    peer_ct2_run.py --model CT2_DIR --input FILE [--compute_type int8] [--beam_size 1]
        [--batch_size 32] [--inter_threads 1] [--threads 1] [--max_output_tokens 256]
        [--min_output_tokens 0] [--output FILE]

Run with the peer's environment (../shared/peer/ctranslate2/env.sh: PYTHONPATH, LD_LIBRARY_PATH).
Tokenizes like the peer's run.py (source.spm, </s> appended; <pad> suppressed when the model
starts the decoder from it), then:
  1. load: ctranslate2.Translator(...) and the first input line alone (greedy, at most
     --first_max_output_tokens tokens); first_translation_s is the time from before the
     Translator is made to that line's result ("file to first translation"); import_s (the
     Python module) is reported apart;
  2. warm-up: the first --warmup lines (at most --warmup_max_output_tokens tokens each), untimed;
  3. the timed run: one translate_batch over every line, max_batch_size = --batch_size examples
     (CTranslate2 sorts them by length and spreads the batches over its --inter_threads workers).
target_tokens: hypothesis tokens without end of sentence and without the --target_prefix token.
--min_output_tokens = min_decoding_length (end of sentence banned before it; may equal
--max_output_tokens = max_decoding_length, for outputs of exactly that length).
--decoder_rows: after the timed run, translate every line again (untimed) asking for all
--beam_size hypotheses, and report decoder_rows, the decoder rows the timed run computed, as
glossa-peer-run reports its own (one per active beam per step). With a length penalty
CTranslate2's beam search ends a sentence when --beam_size hypotheses are finished (its patience
1; Hugging Face's early_stopping=True, where Glossa follows the model's generation config), and
it runs the first step on one row: a sentence whose longest finished hypothesis has L tokens
without end of sentence took 1 + beam_size * L rows (greedy: 1 + L), beam_size rows fewer where
the length limit cut it. Not with --target_prefix (its forced steps are counted differently),
nor with length_penalty 0 (CTranslate2 then stops on its top beam and --beam_size hypotheses
would change when).
Prints one JSON line on stderr.
"""
import argparse
import json
import os
import resource
import sys
import time

T_IMPORT = time.perf_counter()
sys.modules["torch"] = None  # ctranslate2.specs imports torch if it can; not needed here

import ctranslate2  # noqa: E402
import sentencepiece as spm  # noqa: E402

IMPORT_S = time.perf_counter() - T_IMPORT


def find_spm(model_dir, names):
    for name in names:
        path = os.path.join(model_dir, name)
        if os.path.exists(path):
            return spm.SentencePieceProcessor(model_file=path)
    sys.exit("no %s in %s" % (" or ".join(names), model_dir))


def rss_mb(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return round(int(line.split()[1]) / 1024.0, 1)
    return -1


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--input", required=True)
    ap.add_argument("--output")
    ap.add_argument("--compute_type", default="default")
    ap.add_argument("--beam_size", type=int, default=1)
    ap.add_argument("--batch_size", type=int, default=32)
    ap.add_argument("--threads", type=int, default=1, help="intra_threads per worker")
    ap.add_argument("--inter_threads", type=int, default=1, help="workers")
    ap.add_argument("--max_output_tokens", type=int, default=256)
    ap.add_argument("--min_output_tokens", type=int, default=0)
    ap.add_argument("--warmup", type=int, default=8)
    ap.add_argument("--warmup_max_output_tokens", type=int, default=0,
                    help="warm-up: at most this many tokens per line, no minimum (0: as the run)")
    ap.add_argument("--first_max_output_tokens", type=int, default=16,
                    help="the first translation: line 1, greedy, at most this many tokens (0: as the run)")
    ap.add_argument("--hold", action="store_true",
                    help="after the first translation print the JSON line and wait until stdin "
                    "closes (load_bench.py measures the process meanwhile); no timed run")
    ap.add_argument("--source_prefix")
    ap.add_argument("--target_prefix")
    ap.add_argument("--decoder_rows", action="store_true",
                    help="also report the decoder rows of the timed run (an untimed second pass)")
    args = ap.parse_args()
    if args.decoder_rows and args.target_prefix:
        ap.error("--decoder_rows does not count the forced steps of --target_prefix")

    with open(os.path.join(args.model, "config.json"), encoding="utf-8") as f:
        model_config = json.load(f)
    sp_source = find_spm(args.model, ["source.spm", "sentencepiece.bpe.model"])
    sp_target = find_spm(args.model, ["target.spm", "sentencepiece.bpe.model"])
    eos = model_config.get("eos_token", "</s>")
    with open(args.input, encoding="utf-8") as f:
        lines = [line.rstrip("\n").rstrip("\r") for line in f]
    head = [args.source_prefix] if args.source_prefix else []
    sources = [head + sp_source.encode(line, out_type=str) + [eos] for line in lines]
    prefix = [args.target_prefix] if args.target_prefix else []

    options = dict(beam_size=args.beam_size, max_decoding_length=args.max_output_tokens,
                   min_decoding_length=args.min_output_tokens)
    suppress = model_config.get("decoder_start_token") == "<pad>"
    if suppress:
        options["suppress_sequences"] = [["<pad>"]]

    def translate(batch, **override):
        target_prefix = [prefix] * len(batch) if prefix else None
        results = translator.translate_batch(batch, target_prefix=target_prefix,
                                             max_batch_size=args.batch_size, batch_type="examples",
                                             **dict(options, **override))
        return [r.hypotheses[0][len(prefix):] for r in results]

    t0 = time.perf_counter()
    translator = ctranslate2.Translator(args.model, device="cpu", compute_type=args.compute_type,
                                       intra_threads=args.threads, inter_threads=args.inter_threads)
    load_s = time.perf_counter() - t0
    first = dict(beam_size=1, min_decoding_length=0)
    if args.first_max_output_tokens > 0:
        first["max_decoding_length"] = args.first_max_output_tokens + len(prefix)
    translate(sources[:1], **first)
    first_translation_s = time.perf_counter() - t0
    rss_after_load = rss_mb("VmRSS")
    peak_rss_after_load = rss_mb("VmHWM")  # the process's peak so far: imports and the load
    if args.hold:
        print(json.dumps({"engine": "ctranslate2", "compute_type": translator.compute_type,
                          "import_s": round(IMPORT_S, 4), "load_s": round(load_s, 4),
                          "first_translation_s": round(first_translation_s, 4),
                          "rss_after_load_mb": rss_after_load}), file=sys.stderr, flush=True)
        sys.stdin.read()
        return
    if args.warmup:
        warm = {}
        if args.warmup_max_output_tokens > 0:
            warm = dict(max_decoding_length=args.warmup_max_output_tokens + len(prefix),
                        min_decoding_length=0)
        translate(sources[: args.warmup], **warm)

    start = time.perf_counter()
    outputs = translate(sources)
    wall = time.perf_counter() - start

    if args.output:
        with open(args.output, "w", encoding="utf-8") as out:
            for tokens in outputs:
                out.write(sp_target.decode_pieces(tokens) + "\n")
    target_tokens = sum(len(t) for t in outputs)
    report = {
        "engine": "ctranslate2", "ct2_version": ctranslate2.__version__, "model": args.model,
        "compute_type": translator.compute_type, "beam_size": args.beam_size,
        "batch_size": args.batch_size, "workers": args.inter_threads, "threads": args.threads,
        "sentences": len(sources), "source_tokens": sum(len(s) - 1 for s in sources),
        "target_tokens": target_tokens,
        "length_limited": sum(1 for t in outputs if len(t) >= args.max_output_tokens),
        "import_s": round(IMPORT_S, 4), "load_s": round(load_s, 4),
        "first_translation_s": round(first_translation_s, 4), "rss_after_load_mb": rss_after_load,
        "peak_rss_after_load_mb": peak_rss_after_load,
        "wall_s": round(wall, 4), "target_tokens_per_s": round(target_tokens / wall, 1) if wall else None,
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, 1),
        "suppress_pad": suppress,
    }
    if args.decoder_rows:
        report["decoder_rows"] = count_decoder_rows(translator, sources, options, args)
    print(json.dumps(report), file=sys.stderr, flush=True)


def count_decoder_rows(translator, sources, options, args):
    """The timed run's decoder rows, from the lengths of every finished hypothesis."""
    beam = args.beam_size
    results = translator.translate_batch(sources, max_batch_size=args.batch_size,
                                         batch_type="examples", num_hypotheses=beam, **options)
    # Step 0 decodes one row per sentence; every later step, one per beam, until the step that
    # finished the last (longest) of the sentence's hypotheses.
    return sum(1 + beam * max(len(h) for h in r.hypotheses) for r in results)


if __name__ == "__main__":
    main()
