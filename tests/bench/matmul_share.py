#!/usr/bin/python3
"""How much of a glossa-peer-run is spent in oneDNN's matrix products, and how fast they run.

    /usr/bin/python3 tests/bench/matmul_share.py [--peak_gflops G] -- build/glossa-peer-run ARGS...

Runs the command once with DNNL_VERBOSE=1 (oneDNN then times every primitive execution and
prints one line for it), sums the matmul executions by shape (M x K : K x N), and prints one
JSON line: the command's own JSON report (wall_s, fma_peak_gflops, ...) with
  matmul_s          seconds inside matmul primitives (warm-up and first line included),
  matmul_share      matmul_s / wall_s (matmul_s includes the warm-up, wall_s is the timed run),
  matmul_gflops     their FLOPs (2 M K N per execution) over matmul_s,
  matmul_peak_share matmul_gflops / the run's measured single-core FMA peak (or --peak_gflops),
  top_shapes        the five shapes with the most time: [shape, calls, ms, GFLOP/s].
Not the ops/gemv.h kernel (float32 pieces of up to 32 rows: no oneDNN primitive), nor reorders.
Printing the verbose lines costs time outside the primitives, so wall_s here is a little above
a plain run's (and the share lower by that much). One worker of one thread is what this
reads sensibly (with more, executions overlap).
"""
import argparse
import collections
import json
import os
import subprocess
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--peak_gflops", type=float, help="default: the run's fma_peak_gflops")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        ap.error("give the glossa-peer-run command after --")
    env = dict(os.environ, DNNL_VERBOSE="1", ONEDNN_VERBOSE="1")
    r = subprocess.run(command, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("exit %d: %s" % (r.returncode, r.stderr[-2000:]))
    report = next((json.loads(line) for line in reversed(r.stderr.splitlines())
                   if line.startswith("{")), None)
    if report is None:
        sys.exit("no JSON report from the command")
    shapes = collections.defaultdict(lambda: [0, 0.0, 0.0])  # calls, ms, flop
    for line in r.stdout.splitlines():
        fields = line.split(",")
        if len(fields) < 4 or fields[1] != "exec" or fields[3] != "matmul":
            continue
        shape, ms = fields[-2], float(fields[-1])
        src, wei = shape.split(":")[:2]
        m, k = (int(v) for v in src.split("x")[-2:])
        n = int(wei.split("x")[-1])
        s = shapes[shape]
        s[0] += 1
        s[1] += ms
        s[2] += 2.0 * m * k * n
    total_ms = sum(s[1] for s in shapes.values())
    flop = sum(s[2] for s in shapes.values())
    peak = args.peak_gflops or report.get("fma_peak_gflops")
    gflops = flop / total_ms * 1e-6 if total_ms else 0.0
    report.update({
        "matmul_s": round(total_ms * 1e-3, 4),
        "matmul_share": round(total_ms * 1e-3 / report["wall_s"], 4),
        "matmul_gflops": round(gflops, 1),
        "matmul_peak_share": round(gflops / peak, 4) if peak else None,
        "top_shapes": [[shape, s[0], round(s[1], 1), round(s[2] / s[1] * 1e-6, 1) if s[1] else None]
                       for shape, s in sorted(shapes.items(), key=lambda kv: -kv[1][1])[:5]],
    })
    print(json.dumps(report))


if __name__ == "__main__":
    main()
