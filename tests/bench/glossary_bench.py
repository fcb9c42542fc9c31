#!/usr/bin/python3
"""Time per request that names a stored glossary (TranslateRequest.glossary_id), over HTTP.

Starts each given glossa-server in turn (one worker, the demo model), stores a glossary of
--entries entries (1,950 by default, about the most a stored glossary can hold: each term
counts 256 bytes besides its own against the 1 MiB limit), then sends POST /v1/translate
requests one at a time, alternating three kinds:

  plain     one text, no glossary: the result cache answers it (the floor of a request)
  no_term   the same text with glossary_id: no term occurs, so the cache answers it too and
            the time over `plain` is what preparing the glossary costs
  term      a text in which one glossary term occurs, with glossary_id: a constrained search
            every time (not cached)

Prints a table (stderr) and one JSON object (stdout); compare servers only within one run on one
machine.
    /usr/bin/python3 tests/bench/glossary_bench.py --server this=build/glossa-server \\
        [--server other=/path/to/another/glossa-server] [--entries 1950] [--requests 200]
"""

import argparse
import http.client
import json
import os
import re
import statistics
import subprocess
import sys
import threading
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
MODEL = os.path.join(ROOT, "models", "opus-mt-es-en-bible.glossa")
NO_TERM_TEXT = "Y dijo Dios: Sea la luz; y fue la luz."
TERM_TEXT = "Y vio Dios que la luz era buena."


class Server:
    def __init__(self, binary, model):
        self.proc = subprocess.Popen(
            [binary, "--listen", "127.0.0.1:0", "--http_listen", "127.0.0.1:0",
             "--metrics_listen", "", "--model", f"demo={model}", "--workers", "1"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.port = None
        for line in self.proc.stdout:
            found = re.search(r"glossa-server: HTTP on http://127\.0\.0\.1:(\d+)/", line)
            if found:
                self.port = int(found.group(1))
                break
        if self.port is None:
            sys.exit(f"glossary_bench: {binary} did not start")
        threading.Thread(target=self.proc.stdout.read, daemon=True).start()
        self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)

    def post(self, path, body):
        self.conn.request("POST", path, body=json.dumps(body),
                          headers={"Content-Type": "application/json"})
        response = self.conn.getresponse()
        data = response.read()
        if response.status not in (200, 201):
            sys.exit(f"glossary_bench: {path}: {response.status} {data[:300]!r}")
        return json.loads(data)

    def stop(self):
        self.conn.close()
        self.proc.terminate()
        self.proc.wait(timeout=60)


def glossary_tsv(entries):
    # "luz" occurs in TERM_TEXT; the other terms occur nowhere.
    lines = ["luz\tlight"] + [f"tér{i:04d}\tt{i:04d}" for i in range(1, entries)]
    return "\n".join(lines) + "\n"


def measure(binary, args):
    server = Server(binary, args.model)
    try:
        created = server.post("/v1/glossaries", {
            "name": "bench", "sourceLanguage": "es", "targetLanguage": "en",
            "entriesText": glossary_tsv(args.entries)})
        gid = created["glossaryId"]
        no_term = NO_TERM_TEXT.replace("luz", "tierra")
        kinds = {
            "plain": {"texts": [no_term], "options": {"beamSize": 4}},
            "no_term": {"texts": [no_term], "glossaryId": gid, "options": {"beamSize": 4}},
            "term": {"texts": [TERM_TEXT], "glossaryId": gid,
                     "options": {"beamSize": 4, "maxOutputTokens": 32}},
        }
        for body in kinds.values():  # warm-up; fills the result cache
            server.post("/v1/translate", body)
        times = {kind: [] for kind in kinds}
        for i in range(args.requests):
            for kind, body in kinds.items():
                if kind == "term" and i % args.term_every:
                    continue
                start = time.perf_counter()
                answer = server.post("/v1/translate", body)
                times[kind].append((time.perf_counter() - start) * 1000)
                if kind == "term" and "light" not in json.dumps(answer):
                    sys.exit(f"glossary_bench: the term is missing from {answer}")
        return {kind: {"requests": len(t), "median_ms": round(statistics.median(t), 3),
                       "mean_ms": round(statistics.fmean(t), 3),
                       "p90_ms": round(sorted(t)[int(0.9 * (len(t) - 1))], 3)}
                for kind, t in times.items()}
    finally:
        server.stop()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--server", action="append", required=True,
                   help="LABEL=PATH of a glossa-server binary (repeat to compare)")
    p.add_argument("--model", default=MODEL)
    p.add_argument("--entries", type=int, default=1950, help="entries of the stored glossary")
    p.add_argument("--requests", type=int, default=200, help="requests of each cached kind")
    p.add_argument("--term_every", type=int, default=10,
                   help="a `term` request every this many rounds (each one decodes)")
    p.add_argument("--rounds", type=int, default=2, help="each server measured this many times, "
                   "alternately")
    args = p.parse_args()
    servers = [s.split("=", 1) for s in args.server]
    runs = []
    print(f"{'server':>8} {'round':>5} {'kind':>8} {'requests':>8} {'median ms':>10} "
          f"{'mean ms':>9} {'p90 ms':>8}", file=sys.stderr)
    for round_ in range(args.rounds):
        for label, binary in servers:
            result = measure(binary, args)
            runs.append({"server": label, "round": round_, "kinds": result})
            for kind, r in result.items():
                print(f"{label:>8} {round_:>5} {kind:>8} {r['requests']:>8} {r['median_ms']:>10} "
                      f"{r['mean_ms']:>9} {r['p90_ms']:>8}", file=sys.stderr)
    print(json.dumps({"entries": args.entries, "runs": runs}, indent=1))


if __name__ == "__main__":
    main()
