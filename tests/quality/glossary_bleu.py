#!/usr/bin/python3
"""BLEU with and without glossaries, through glossa-translate --glossary.

Uses the constraint goldens of ../shared/golden/constraints/opus-mt-es-en-bible (713 cases over
the first 150 lines of ../shared/corpus/dev.es; README.md there). Each case becomes a glossary
exactly as tests/integration/glossary_terms_test.cc builds it: entry k's source is the k-th run
of letters (ASCII letters or any non-ASCII byte) of 3 bytes or more of the line, its target the
case's term k ("either": one entry with both alternatives as its targets), so that the glossary
gives Hugging Face's force_words_ids for the line.

The lines are translated with beam 4 and at most 128 tokens (the goldens' settings): once without
a glossary, and once per case with its glossary. To decode many cases per glossa-translate run,
cases are packed into rounds: a round holds each dev line at most once, and no entry of one of its
cases occurs in the line of another (checked as a substring after NFKC and case folding, with
accents removed, as whole words: a superset of the matches glossa-translate makes), so each line meets
only its own case's terms. A round's glossary is the union of its cases' entries.

Per case kind and overall it prints: cases, BLEU (sacreBLEU's default; model_tools/bleu.py)
against ../shared/corpus/dev.en of the unconstrained and the constrained outputs of the same lines,
the share of constrained outputs that contain every forced term (any alternative for "either"),
and the share equal to Hugging Face's constrained output (`hyp`).

    glossary_bleu.py --translate build/glossa-translate --shared ../shared [--cases one,two]
        [--limit 150] [--jobs 2] [--json FILE]

Fails (exit 1) when a forced term is missing from an output or when fewer than --min_hf_equal of
the constrained outputs equal Hugging Face's; exit 77 (skipped) without the shared data.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import unicodedata
from concurrent.futures import ThreadPoolExecutor

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(REPO, "model_tools"))
import bleu  # noqa: E402

SKIPPED = 77
GOLDEN = "golden/constraints/opus-mt-es-en-bible/constraints.jsonl"
KINDS = ["one", "phrase", "two", "either", "present"]
BEAM = 4
MAX_TOKENS = 128


def words(text):
    """glossary_terms_test.cc's Words(): runs of 3 bytes or more of ASCII letters or non-ASCII."""
    out, word = [], bytearray()
    for c in text.encode("utf-8") + b" ":
        if c >= 0x80 or chr(c).isalpha():
            word.append(c)
        else:
            if len(word) >= 3:
                out.append(word.decode("utf-8"))
            word = bytearray()
    return out


def glossary(case):
    """The case's entries: (source, [targets]), in term order."""
    sources = words(case["src"])
    entries = []
    for k, term in enumerate(case["terms"]):
        entries.append((sources[k], list(term) if isinstance(term, list) else [term]))
    return entries


def loose(text):
    """NFKC, case folded, accents removed: for the conservative occurrence check."""
    text = unicodedata.normalize("NFKD", unicodedata.normalize("NFKC", text).casefold())
    return "".join(c for c in text if not unicodedata.combining(c))


def occurs(source, text):
    """Whether `source` occurs in `text` as whole words (both loose())."""
    return re.search(r"(?<!\w)" + re.escape(source) + r"(?!\w)", text) is not None


def pack_rounds(cases):
    """Lists of cases, each line at most once per list, no case's entry in another's line."""
    rounds = []  # [(cases, lines, loose sources, loose texts)]
    for case in cases:
        sources = [loose(s) for s, _ in glossary(case)]
        text = loose(case["src"])
        for r in rounds:
            if case["i"] in r[1]:
                continue
            if (any(occurs(s, t) for s in sources for t in r[3]) or
                    any(occurs(s, text) for s in r[2])):
                continue
            r[0].append(case)
            r[1].add(case["i"])
            r[2].extend(sources)
            r[3].append(text)
            break
        else:
            rounds.append(([case], {case["i"]}, sources, [text]))
    return [r[0] for r in rounds]


def translate(binary, model, lines, entries, workdir, name, threads):
    """glossa-translate's outputs for `lines`, with a glossary of `entries` when given."""
    src = os.path.join(workdir, name + ".in")
    with open(src, "w", encoding="utf-8") as f:
        f.write("".join(line + "\n" for line in lines))
    cmd = [binary, "--model", model, "--input", src, "--beam_size", str(BEAM),
           "--max_output_tokens", str(MAX_TOKENS), "--threads", str(threads)]
    if entries:
        tsv = os.path.join(workdir, name + ".tsv")
        with open(tsv, "w", encoding="utf-8") as f:
            for source, targets in entries:
                f.write("".join(f"{source}\t{t}\n" for t in targets))
        cmd += ["--glossary", tsv]
    run = subprocess.run(cmd, capture_output=True, text=True, encoding="utf-8")
    if run.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {run.returncode}: {run.stderr.strip()}")
    out = run.stdout.split("\n")[:-1]
    if len(out) != len(lines):
        raise RuntimeError(f"{name}: {len(out)} outputs for {len(lines)} lines")
    return out


def has_terms(text, terms):
    return all(any(alt in text for alt in (t if isinstance(t, list) else [t])) for t in terms)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--translate", required=True, help="glossa-translate")
    ap.add_argument("--shared", required=True, help="the shared data folder")
    ap.add_argument("--model", default=os.path.join(REPO, "models", "opus-mt-es-en-bible.glossa"))
    ap.add_argument("--cases", default=",".join(KINDS), help="case kinds, comma-separated")
    ap.add_argument("--limit", type=int, default=150, help="the first N golden dev lines")
    ap.add_argument("--jobs", type=int, default=2, help="glossa-translate runs at once")
    ap.add_argument("--threads", type=int, default=1, help="--threads of each run")
    ap.add_argument("--min_hf_equal", type=float, default=0.95,
                    help="the least share of outputs equal to Hugging Face's")
    ap.add_argument("--json", help="also write the table here as JSON")
    args = ap.parse_args()

    golden = os.path.join(args.shared, GOLDEN)
    refs_path = os.path.join(args.shared, "corpus", "dev.en")
    if not all(os.path.exists(p) for p in (golden, refs_path, args.model)):
        print(f"skipped: needs {golden}, {refs_path} and {args.model}")
        return SKIPPED
    kinds = args.cases.split(",")
    with open(golden, encoding="utf-8") as f:
        cases = [json.loads(line) for line in f]
    cases = [c for c in cases if c["case"] in kinds and c["i"] < args.limit]
    refs = bleu.read_lines(refs_path)
    lines = sorted({c["i"]: c["src"] for c in cases}.items())
    started = time.time()

    rounds = pack_rounds(cases)
    with tempfile.TemporaryDirectory() as workdir, ThreadPoolExecutor(args.jobs) as pool:
        plain = pool.submit(translate, args.translate, args.model, [src for _, src in lines], [],
                            workdir, "plain", args.threads)
        futures = []
        for n, r in enumerate(rounds):
            entries = [e for c in r for e in glossary(c)]
            futures.append(pool.submit(translate, args.translate, args.model,
                                       [c["src"] for c in r], entries, workdir, f"round{n}",
                                       args.threads))
        unconstrained = dict(zip((i for i, _ in lines), plain.result()))
        for r, f in zip(rounds, futures):
            for c, out in zip(r, f.result()):
                c["glossa"] = out
    seconds = time.time() - started

    table = []
    failed = []
    for kind in kinds + ["all"]:
        group = [c for c in cases if kind == "all" or c["case"] == kind]
        if not group:
            continue
        ref = [refs[c["i"]] for c in group]
        row = {
            "case": kind,
            "cases": len(group),
            "bleu_unconstrained": round(
                bleu.corpus_bleu([unconstrained[c["i"]] for c in group], [ref]).score, 2),
            "bleu_constrained": round(bleu.corpus_bleu([c["glossa"] for c in group], [ref]).score, 2),
            "bleu_hf_constrained": round(bleu.corpus_bleu([c["hyp"] for c in group], [ref]).score, 2),
            "terms_present": sum(has_terms(c["glossa"], c["terms"]) for c in group),
            "hf_equal": sum(c["glossa"] == c["hyp"] for c in group),
            "unconstrained_hf_equal": sum(unconstrained[c["i"]] == c["unconstrained_hyp"]
                                          for c in group),
        }
        table.append(row)
    for c in cases:
        if not has_terms(c["glossa"], c["terms"]):
            failed.append(f"line {c['i']} {c['case']}: {c['terms']} missing from {c['glossa']!r}")

    print(f"{len(cases)} cases over {len(lines)} lines (dev lines 0-{lines[-1][0]}), beam {BEAM}, "
          f"at most {MAX_TOKENS} tokens; {len(rounds)} glossa-translate runs with glossaries; "
          f"{seconds:.1f} s")
    print("| case | cases | BLEU without | BLEU with glossary | difference | HF's BLEU with "
          "force_words_ids | every term present | = HF's output | unconstrained = HF's |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in table:
        n = r["cases"]
        print(f"| {r['case']} | {n} | {r['bleu_unconstrained']:.2f} | {r['bleu_constrained']:.2f} | "
              f"{r['bleu_constrained'] - r['bleu_unconstrained']:+.2f} | "
              f"{r['bleu_hf_constrained']:.2f} | {r['terms_present']}/{n} "
              f"({100 * r['terms_present'] / n:.1f}%) | {r['hf_equal']}/{n} "
              f"({100 * r['hf_equal'] / n:.1f}%) | {r['unconstrained_hf_equal']}/{n} |")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"seconds": round(seconds, 1), "rounds": len(rounds), "table": table}, f,
                      indent=1)
    total = table[-1]
    if total["hf_equal"] < args.min_hf_equal * total["cases"]:
        failed.append(f"{total['hf_equal']}/{total['cases']} outputs equal Hugging Face's, "
                      f"under {args.min_hf_equal:.0%}")
    for f in failed:
        print("FAIL", f)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
