#!/usr/bin/python3
"""Two glossa-peer-run binaries (e.g. two commits' builds) timed alternately in one run.

    peer_alternate.py --a LABEL=BINARY --b LABEL=BINARY --input FILE [--repeats 5]
        -- [glossa-peer-run flags, e.g. --model M --beam_size 4 --batch_size 32]

Runs A, B, A, B, ... (--repeats of each; B first on odd repeats, so neither always runs first),
each a fresh process with the same flags, and reads glossa-peer-run's JSON line. Prints one JSON
object on stdout: every run, and per binary the medians of the timed run's wall_s,
target_tokens_per_s, decode_steps_s and the decode-step time per decoder row, plus whether both
decoded the same tokens (target_tokens, decoder_rows).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time


def run(binary, input_path, flags):
    out = subprocess.run([binary, "--input", input_path] + flags, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"{binary}: exit {out.returncode}: {out.stderr.strip()}")
    return json.loads(out.stderr.strip().split("\n")[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--a", required=True, help="LABEL=BINARY")
    ap.add_argument("--b", required=True, help="LABEL=BINARY")
    ap.add_argument("--input", required=True)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("flags", nargs=argparse.REMAINDER, help="-- then glossa-peer-run flags")
    args = ap.parse_args()
    flags = args.flags[1:] if args.flags[:1] == ["--"] else args.flags
    sides = [tuple(x.split("=", 1)) for x in (args.a, args.b)]
    runs = []
    for repeat in range(args.repeats):
        for label, binary in (sides if repeat % 2 == 0 else sides[::-1]):
            r = run(binary, args.input, flags)
            with open("/proc/loadavg") as f:
                load = float(f.read().split()[0])
            runs.append({"repeat": repeat, "label": label, "wall_s": r["wall_s"],
                         "target_tokens_per_s": r["target_tokens_per_s"],
                         "decode_steps_s": r["decode_steps_s"], "decoder_rows": r["decoder_rows"],
                         "target_tokens": r["target_tokens"], "sentences": r["sentences"],
                         "length_limited": r["length_limited"], "load_average": load})
            print(json.dumps(runs[-1]), file=sys.stderr)
    summary = {}
    for label, binary in sides:
        mine = [r for r in runs if r["label"] == label]
        summary[label] = {
            "binary": os.path.abspath(binary),
            "runs": len(mine),
            "median_wall_s": round(statistics.median(r["wall_s"] for r in mine), 4),
            "median_target_tokens_per_s": round(
                statistics.median(r["target_tokens_per_s"] for r in mine), 1),
            "median_decode_steps_s": round(statistics.median(r["decode_steps_s"] for r in mine), 4),
            "median_us_per_decoder_row": round(statistics.median(
                1e6 * r["decode_steps_s"] / r["decoder_rows"] for r in mine), 2),
            "target_tokens": sorted({r["target_tokens"] for r in mine}),
            "decoder_rows": sorted({r["decoder_rows"] for r in mine}),
        }
    a, b = (summary[label] for label, _ in sides)
    report = {
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "input": args.input,
        "flags": flags,
        "same_tokens": a["target_tokens"] == b["target_tokens"] and
                       a["decoder_rows"] == b["decoder_rows"],
        "wall_ratio_b_over_a": round(b["median_wall_s"] / a["median_wall_s"], 4),
        "summary": summary,
        "runs": runs,
    }
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
