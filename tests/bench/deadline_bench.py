#!/usr/bin/python3
"""Requests finished within their deadline, deadline-aware admission against one FIFO queue.

For each rate, glossa-load's open loop (Poisson arrivals, every request with the same deadline)
runs twice on its in-process server, alternately: with deadline-aware admission (requests that
cannot finish in time are answered DEADLINE_EXCEEDED at once and take no place) and without it
(arrival order; a late request decodes until its deadline passes). Prints a table and one JSON
object; compare only within one run on one machine.
    /usr/bin/python3 tests/bench/deadline_bench.py --build build [--rates 60,120,240]
        [--deadline_ms 300] [--seconds 15]
"""

import argparse
import json
import os
import subprocess
import sys


def run(args, rate, admission):
    cmd = [os.path.join(args.build, "glossa-load"), "--clients", "none", "--rates", str(rate),
           "--seconds", str(args.seconds), "--deadline_ms", str(args.deadline_ms),
           f"--deadline_admission={'true' if admission else 'false'}",
           "--max_output_tokens", str(args.max_output_tokens)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out)["runs"][0]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--build", default="build", help="build directory holding glossa-load")
    p.add_argument("--rates", default="60,120,240", help="arrival rates, sentences/s")
    p.add_argument("--deadline_ms", type=int, default=300, help="every request's deadline")
    p.add_argument("--seconds", type=float, default=15, help="length of each open-loop run")
    p.add_argument("--max_output_tokens", type=int, default=256)
    args = p.parse_args()
    if not os.path.exists(os.path.join(args.build, "glossa-load")):
        sys.exit(f"deadline_bench: no glossa-load in {args.build}: build it first")
    rows = []
    print(f"{'rate/s':>7} {'admission':>10} {'sent':>6} {'in time':>8} {'late':>6} "
          f"{'refused early':>13} {'late answer p50 ms':>18} {'ok p99 ms':>9}", file=sys.stderr)
    for rate in (int(r) for r in args.rates.split(",")):
        for admission in (True, False):
            r = run(args, rate, admission)
            ok = r["sentences"] - r["failed"]
            rows.append({"rate": rate, "deadline_admission": admission, "sent": r["sentences"],
                         "within_deadline": ok, "deadline_exceeded": r["deadline_exceeded"],
                         "refused_early_by_server": r["refused_early_by_server"],
                         "deadline_exceeded_answer_ms_p50": r["deadline_exceeded_answer_ms_p50"],
                         "ok_latency_ms": r["latency_ms"], "load_average_1m": r["load_average_1m"]})
            print(f"{rate:>7} {'deadline' if admission else 'fifo':>10} {r['sentences']:>6} "
                  f"{ok:>8} {r['deadline_exceeded']:>6} {r['refused_early_by_server']:>13} "
                  f"{r['deadline_exceeded_answer_ms_p50']:>18} {r['latency_ms']['p99']:>9}",
                  file=sys.stderr)
    print(json.dumps({"deadline_ms": args.deadline_ms, "seconds": args.seconds, "runs": rows},
                     indent=1))


if __name__ == "__main__":
    main()
