#!/usr/bin/python3
"""Interactive latency while a batch job saturates the server, with and without priority lanes.

One glossa-server (one engine worker, so that the clients keep a core; no result cache, as the
texts repeat), then, in order:
  idle         glossa-load's open loop at --rate interactive sentences/s on the idle server;
  batch alone  a glossa-batch job (PRIORITY_BATCH) alone: its sentences/s;
  lanes        the same job again with the same open loop beside it;
  fifo         the same again with the job sent as interactive work (--priority interactive):
               what one FIFO queue gives.
Batch throughput is measured from the server's metrics (sentences of the batch lane admitted per
second over the window; in the fifo case, all admitted sentences minus the interactive ones).
Prints one JSON object; figures compare only within one run on one machine.
    /usr/bin/python3 tests/bench/lanes_bench.py --build build [--rate 2] [--seconds 20]
"""

import argparse
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scrape(metrics_port):
    """{(name, frozenset(labels)): value} of the server's /metrics."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10).read()
    samples = {}
    for line in text.decode().splitlines():
        m = re.match(r"^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$", line)
        if m:
            labels = frozenset(re.findall(r'(\w+)="([^"]*)"', m.group(2) or ""))
            samples[(m.group(1), labels)] = float(m.group(3))
    return samples


def admitted(samples, lane):
    key = ("glossa_lane_queue_wait_seconds_count", frozenset({("lane", lane), ("model", "demo")}))
    return samples.get(key, 0.0)


class Bench:
    def __init__(self, args):
        self.args = args
        self.port, self.metrics_port = free_port(), free_port()
        self.tmp = tempfile.mkdtemp(prefix="glossa-lanes-")
        with open(args.input, encoding="utf-8") as f:
            lines = [line for line in f.read().splitlines() if line.strip()]
        self.batch_input = os.path.join(self.tmp, "batch.txt")
        with open(self.batch_input, "w", encoding="utf-8") as f:
            f.write("\n".join((lines * (args.batch_lines // len(lines) + 1))[:args.batch_lines]))
            f.write("\n")
        server = os.path.join(args.build, "glossa-server")
        self.server = subprocess.Popen(
            [server, "--model", f"demo={args.model}", "--listen", f"127.0.0.1:{self.port}",
             "--metrics_listen", f"127.0.0.1:{self.metrics_port}", "--workers", "1",
             "--threads", "1", "--max_queue", "100000", "--cache_bytes", "0",
             "--batch_min_share", str(args.batch_min_share),
             "--interactive_hold", args.interactive_hold],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(300):
            try:
                scrape(self.metrics_port)
                break
            except OSError:
                time.sleep(0.1)

    def close(self):
        self.server.send_signal(signal.SIGTERM)
        self.server.wait(60)

    def interactive(self):
        out = subprocess.run(
            [os.path.join(self.args.build, "glossa-load"), "--server",
             f"127.0.0.1:{self.port}", "--input", self.args.dev, "--clients", "none",
             "--rates", str(self.args.rate), "--seconds", str(self.args.seconds),
             "--beam_size", "1", "--warmup=false"],
            check=True, capture_output=True, text=True).stdout
        run = json.loads(out)["runs"][0]
        return {"sentences": run["sentences"], "failed": run["failed"],
                "latency_ms": run["latency_ms"]}

    def start_batch(self, priority, name):
        return subprocess.Popen(
            [os.path.join(self.args.build, "glossa-batch"), "--server", f"127.0.0.1:{self.port}",
             "--input", self.batch_input, "--output", os.path.join(self.tmp, name + ".out"),
             "--priority", priority, "--beam_size", "4", "--concurrency", "16",
             "--progress_interval", "1h"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def window(self, priority, name, with_interactive):
        job = self.start_batch(priority, name)
        time.sleep(self.args.ramp)  # the job fills the batch
        before, start = scrape(self.metrics_port), time.monotonic()
        result = {}
        if with_interactive:
            result["interactive"] = self.interactive()
        else:
            time.sleep(self.args.seconds)
        after, seconds = scrape(self.metrics_port), time.monotonic() - start
        still_running = job.poll() is None
        job.send_signal(signal.SIGTERM)
        job.wait(120)
        time.sleep(2)  # what it left in the engine drains
        lane = "batch" if priority == "batch" else "interactive"
        batch_sentences = admitted(after, lane) - admitted(before, lane)
        if priority != "batch" and with_interactive:
            batch_sentences -= result["interactive"]["sentences"]
        result["batch_sentences_per_s"] = round(batch_sentences / seconds, 2)
        result["batch_job_ran_throughout"] = still_running
        return result


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", default=os.path.join(REPO, "build"))
    p.add_argument("--model", default=os.path.join(REPO, "models", "opus-mt-es-en-bible.glossa"))
    p.add_argument("--dev", default=os.path.join(REPO, "..", "shared", "golden", "dev.es"))
    p.add_argument("--input", default=None, help="batch job's text (default: --dev)")
    p.add_argument("--batch_lines", type=int, default=20000)
    p.add_argument("--rate", type=int, default=2, help="interactive sentences/s (Poisson)")
    p.add_argument("--seconds", type=float, default=20)
    p.add_argument("--ramp", type=float, default=3)
    p.add_argument("--batch_min_share", type=float, default=0.25, help="the server's flag")
    p.add_argument("--interactive_hold", default="2s", help="the server's flag")
    args = p.parse_args()
    args.input = args.input or args.dev
    if not os.path.exists(args.dev):
        print(f"lanes_bench: skipped: needs {args.dev}", file=sys.stderr)
        return 77
    bench = Bench(args)
    try:
        report = {"rate": args.rate, "seconds": args.seconds, "workers": 1, "threads": 1,
                  "batch_min_share": args.batch_min_share,
                  "interactive_hold": args.interactive_hold,
                  "interactive_beam_size": 1, "batch_beam_size": 4,
                  "load_average_1m_start": os.getloadavg()[0]}
        print("lanes_bench: idle", file=sys.stderr)
        report["idle"] = bench.interactive()
        print("lanes_bench: batch alone", file=sys.stderr)
        report["batch_alone"] = bench.window("batch", "alone", False)
        print("lanes_bench: batch + interactive, lanes", file=sys.stderr)
        report["lanes"] = bench.window("batch", "lanes", True)
        print("lanes_bench: batch + interactive, one FIFO", file=sys.stderr)
        report["fifo"] = bench.window("interactive", "fifo", True)
        idle_p99 = report["idle"]["latency_ms"]["p99"]
        for case in ("lanes", "fifo"):
            report[case]["p99_over_idle"] = round(
                report[case]["interactive"]["latency_ms"]["p99"] / idle_p99, 2)
        report["load_average_1m_end"] = os.getloadavg()[0]
    finally:
        bench.close()
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
