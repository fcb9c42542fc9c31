#!/usr/bin/python3
"""Catalogued models under a memory budget: cold-start latency per model size, and what loading
models does to the latency of requests to a model that stays loaded. Prints JSON.

    /usr/bin/python3 tests/bench/catalogue_bench.py [--shapes demo,opus-mt-base,nllb-600m]
        [--loads 10] [--seconds 20] [--rounds 4] [--workers 1] [--json FILE]
        [--work_dir /tmp/glossa-peer]

One glossa-server per shape, --models_dir holding three names of the shape's model file (links
"cold-a", "cold-b", "cold-c") and the demo model as "warm", --max_loaded_mb holding the warm model
and one cold model only. Each request to a cold model then unloads the other and loads its own:

The budget is what the server counts for the warm model and one cold one (ListModels'
resident_bytes after a greedy and a beam request each, in a first server) and 10% more.

- cold_start: --loads requests to cold-a, cold-b, cold-c in turn, one at a time, each timed from
  send to answer (one short sentence, greedy, at most 16 tokens): the load and the translation. The
  server's own glossa_model_cold_start_seconds (load alone) is reported beside it.
- warm: one client sends requests to "warm" back to back, alone, beside a second client sending
  the cold requests' sentence back to back to the cold model that is loaded (no load: what any
  second client costs on this machine), and while the second client keeps loading cold models as
  above, in --rounds turns of each (--seconds in all for each); p50/p99 of each, the ratio of the
  p99s while loading and alone, and of the p99s while loading and beside requests.

The models come from peer_compare.py's work dir (made by glossa-make-shape and converted there
when missing; nllb-600m takes minutes and about 4 GB of disk). The page cache holds the model
files after the first load (warm-cache loads).
"""
import argparse
import json
import multiprocessing
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import peer_compare as pc  # noqa: E402

CTX = multiprocessing.get_context("fork")  # the loading client's process shares the Server object
SENTENCE = "Y dijo Dios: Sea la luz; y fue la luz."
WARM_MODEL = pc.ROOT / "models" / "opus-mt-es-en-bible.glossa"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def percentile(values, p):
    values = sorted(values)
    if not values:
        return None
    k = min(len(values) - 1, max(0, int(round(p / 100.0 * (len(values) - 1)))))
    return values[k]


class Server:
    def __init__(self, binary, models_dir, budget_mb, workers):
        self.http, self.metrics = free_port(), free_port()
        cmd = [str(binary), "--models_dir", str(models_dir), "--max_loaded_mb", str(budget_mb),
               "--workers", str(workers), "--listen", "127.0.0.1:%d" % free_port(),
               "--http_listen", "127.0.0.1:%d" % self.http,
               "--metrics_listen", "127.0.0.1:%d" % self.metrics, "--cache_bytes", "0"]
        self.log = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 120
        while time.time() < deadline:
            if self.proc.poll() is not None:
                self.log.seek(0)
                sys.exit("catalogue_bench: glossa-server exited: " + self.log.read()[-2000:])
            try:
                urllib.request.urlopen("http://127.0.0.1:%d/health" % self.http, timeout=1)
                return
            except OSError:
                time.sleep(0.05)
        sys.exit("catalogue_bench: glossa-server did not start")

    def models(self):
        with urllib.request.urlopen("http://127.0.0.1:%d/v1/models" % self.http) as r:
            return json.loads(r.read())["models"]

    def resident_bytes(self):
        return {m["name"]: int(m.get("residentBytes", 0)) for m in self.models()}

    def loaded_cold(self):
        names = [m["name"] for m in self.models()
                 if m["name"].startswith("cold-") and m.get("state") == "loaded"]
        if len(names) != 1:
            sys.exit("catalogue_bench: expected one loaded cold model, found %r" % names)
        return names[0]

    def translate(self, model, langs, beam=1, tokens=16):
        body = {"model": model, "texts": [SENTENCE],
                "options": {"beamSize": beam, "maxOutputTokens": tokens}}
        if langs:
            body.update(sourceLanguage=langs[0], targetLanguage=langs[1])
        req = urllib.request.Request("http://127.0.0.1:%d/v1/translate" % self.http,
                                     data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        t0 = time.perf_counter()
        with urllib.request.urlopen(req, timeout=600) as r:
            json.loads(r.read())
        return time.perf_counter() - t0

    def cold_start_histogram(self):
        text = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % self.metrics).read().decode()
        out = {}
        for key in ("sum", "count"):
            m = re.search(r"^glossa_model_cold_start_seconds_%s\S* (\S+)$" % key, text, re.M)
            out[key] = float(m.group(1)) if m else None
        return out

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def cold_loads(server, langs, n, stop_event=None, tokens=16, model=None):
    """Requests to cold-a, cold-b, cold-c in turn (each loads), or all to `model` (loaded)."""
    times = []
    for i in range(n):
        if stop_event is not None and stop_event.is_set():
            break
        times.append(server.translate(model or "cold-" + "abc"[i % 3], langs, tokens=tokens))
    return times


def warm_beside(server, seconds, second_client):
    """Warm requests while second_client() runs in a process of its own; both lists of times.

    A process, not a thread: as a thread it would hold Python's GIL for up to 5 ms (the switch
    interval) when the warm client's answer comes, which times the client, not the server."""
    stop, out = CTX.Event(), CTX.Queue()
    other = CTX.Process(target=lambda: out.put(second_client(stop)))
    other.start()
    times = warm_run(server, seconds)
    stop.set()
    other_times = out.get()
    other.join()
    return times, other_times


def spin(stop):
    """A CPU-only loop at SCHED_IDLE until `stop` is set."""
    os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    n = 0
    while not stop.is_set():
        for _ in range(100000):
            n += 1
    return [n]


def warm_run(server, seconds):
    times, end = [], time.time() + seconds
    while time.time() < end:
        times.append(server.translate("warm", None))
    return times


def summary(times):
    return {"n": len(times), "p50_ms": round(1000 * percentile(times, 50), 1),
            "p99_ms": round(1000 * percentile(times, 99), 1)}


def bench_shape(name, args):
    _, files, _ = pc.prepare_model(name, args, os.environ.copy(), need_int8=False, peer=False)
    model_file = files["glossa-float32"]
    langs = pc.LANGUAGES.get(name)
    with tempfile.TemporaryDirectory(prefix="glossa-catalogue-bench-") as d:
        for cold in ("cold-a", "cold-b", "cold-c"):
            os.symlink(model_file, os.path.join(d, cold + ".glossa"))
        os.symlink(WARM_MODEL, os.path.join(d, "warm.glossa"))
        mb = 1 << 20
        # The budget: what the server counts for the warm model and one cold one (ListModels'
        # resident_bytes once each has run a greedy and a beam request), and 10% more.
        server = Server(args.server, d, 1 << 20, args.workers)
        try:
            for model in ("warm", "cold-a"):
                for beam in (1, 4):
                    server.translate(model, langs if model != "warm" else None, beam)
            resident = server.resident_bytes()
        finally:
            server.stop()
        budget = int((resident["warm"] + resident["cold-a"]) * 1.1 / mb) + 1
        server = Server(args.server, d, budget, args.workers)
        try:
            server.translate("warm", None)  # loaded, and stays the most recently used
            server.translate("cold-c", langs)
            cold = cold_loads(server, langs, args.loads)
            histogram = server.cold_start_histogram()
            # Alone, beside requests and while loading in turns, --rounds times each, so that a
            # drift of the machine's speed over the run weighs on all alike.
            alone, beside, busy, requests, loads, spun = [], [], [], [], [], []
            turn = args.seconds / args.rounds
            for _ in range(args.rounds):
                alone += warm_run(server, turn)
                loaded = server.loaded_cold()  # the one a load left; it stays while nothing loads
                w, r = warm_beside(server, turn, lambda stop: cold_loads(
                    server, langs, 1 << 30, stop, args.cold_tokens, model=loaded))
                beside, requests = beside + w, requests + r
                w, r = warm_beside(server, turn, lambda stop: cold_loads(
                    server, langs, 1 << 30, stop, args.cold_tokens))
                busy, loads = busy + w, loads + r
                if args.spinner:
                    spun += warm_beside(server, turn, spin)[0]
        finally:
            server.stop()
    spinning = {}
    if spun:
        spinning = {"warm_beside_spinner": summary(spun),
                    "warm_p99_ratio_spinner_to_alone":
                        round(percentile(spun, 99) / percentile(alone, 99), 2)}
    return {"model": name, "file_mb": round(model_file.stat().st_size / mb, 1),
            "budget_mb": budget, "cold_start_request": summary(cold),
            "server_cold_start_mean_s": round(histogram["sum"] / histogram["count"], 3)
            if histogram["count"] else None,
            "warm_alone": summary(alone), "warm_beside_requests": summary(beside),
            "warm_while_loading": summary(busy),
            "requests_meanwhile": len(requests), "loads_meanwhile": len(loads),
            "cold_tokens": args.cold_tokens,
            "warm_p99_ratio": round(percentile(busy, 99) / percentile(alone, 99), 2),
            "warm_p99_ratio_loading_to_requests":
                round(percentile(busy, 99) / percentile(beside, 99), 2), **spinning}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--server", type=Path, default=pc.ROOT / "build" / "glossa-server")
    ap.add_argument("--shapes", default="demo,opus-mt-base")
    ap.add_argument("--loads", type=int, default=10)
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--cold_tokens", type=int, default=16,
                    help="maxOutputTokens of the cold requests sent while the warm client runs "
                         "(1: little but the load itself competes with it)")
    ap.add_argument("--rounds", type=int, default=4,
                    help="turns of warm requests alone, beside requests and while loading "
                         "(--seconds in all for each)")
    ap.add_argument("--spinner", action="store_true",
                    help="add turns of warm requests beside a process spinning at SCHED_IDLE")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--work_dir", type=Path, default=Path("/tmp/glossa-peer"))
    ap.add_argument("--shared_dir", type=Path, default=pc.ROOT.parent / "shared")
    args = ap.parse_args()
    args.peer_dir = args.shared_dir / "peer" / "ctranslate2"  # prepare_model names it; unused
    args.work_dir.mkdir(parents=True, exist_ok=True)
    report = {"date": time.strftime("%Y-%m-%d"), "cpu": pc.cpu_model(), "cores": os.cpu_count(),
              "shapes": [bench_shape(name, args) for name in args.shapes.split(",")]}
    text = json.dumps(report, indent=1)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()
