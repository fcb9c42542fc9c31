#!/usr/bin/python3
"""A catalogue of many models under a memory budget, under mixed traffic from 32 clients.

Run from the repository root (ctest does this as `python_catalogue_quick`, 20 s of traffic, and
`python_catalogue`, 120 s):
    GLOSSA_SERVER=build/glossa-server GLOSSA_TRANSLATE=build/glossa-translate \\
        /usr/bin/python3 tests/python/test_catalogue.py --duration 20 --work_dir /tmp/catalogue

The fixture (catalogue_models.py, cached in --work_dir) is one directory of 42 models: 40 small
random-weight bilingual ones (xx-en and en-xx for ten languages, en-es, pairs without English),
the demo model (es-en-demo) and a small random-weight M2M100 for en, ja and ko.

The server is started with `--model_config FILE` whose lines `dir=DIR` and `max_loaded_mb=N`
catalogue every *.glossa of DIR (loaded on first use, least recently used unloaded beyond N MB),
N about a quarter of the models' total size. Then, for --duration seconds, 32 client threads send
requests that name no model: gRPC Translate on every direct pair (greedy and beam 4), on every
pair that goes through English (the pivot), with source_language "auto" on Spanish text,
TranslateStream on a sixth of the direct and pivoted pairs (greedy, one text), and
LibreTranslate POST /translate on direct pairs and "auto". The test asserts:
  - no request fails, and each reports the route the server's rules give (router.h);
  - every translation equals the reference: glossa-translate --model FILE over the same sentences
    (a pivoted one: the first hop greedy for a greedy request, else beam 4, then the second hop);
  - the server's VmRSS, sampled every 100 ms, never exceeds its fixed part + N MB + --margin_mb,
    the fixed part being its RSS with no model loaded once its code has run (a few seconds of the
    traffic, then max_loaded_mb=1);
  - ListModels shows every model, all "not_loaded" at first, and models going loaded then back to
    not_loaded under the budget; health stays SERVING;
  - the metrics glossa_models_loaded, glossa_models_loaded_bytes, glossa_model_loads_total,
    glossa_model_unloads_total, glossa_model_cold_start_seconds and
    glossa_requests_waited_for_load_total exist and count;
  - after max_loaded_mb=1 (less than any model) and SIGHUP, every model is unloaded and the RSS
    comes back within 10% of the fixed part (8 MiB at least).
Before that, a server started with --models_dir/--max_loaded_mb lists the catalogue unloaded and
loads a model on its first request.

Under ThreadSanitizer (GLOSSA_SANITIZE=thread) it runs without its memory bounds (the sanitizer's
shadow memory grows with every allocation), with a budget 8 times as large (a load's RSS growth,
which the registry counts, takes in the shadow memory), RPC_TIMEOUT_S five times as long and 60 s
of overtime at most, and says how many pairs and ways it sent rather than requiring all: there it
checks the registry's loads and unloads under concurrent traffic for data races. Under
AddressSanitizer it skips.

Exit status: 0 passed, 1 failed, 77 skipped (the reason printed): without GLOSSA_SERVER or
GLOSSA_TRANSLATE, without the stub tools, or when the server has no --models_dir or the proto's
ModelInfo no `state`. --no_catalogue checks the same traffic, routes and references on a server
given every model with --model NAME=PATH (all loaded at start, no budget), warmed up by the same
traffic for 10 s, and bounds its RSS by its RSS after the warm-up + --margin_mb (60).
"""

import argparse
import collections
import concurrent.futures
import hashlib
import json
import math
import os
import queue
import random
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import catalogue_models  # noqa: E402
import test_server as ts  # noqa: E402  (stubs, constants)

SKIPPED = 77
PIVOT = catalogue_models.PIVOT
RPC_TIMEOUT_S = 60      # a request may wait for loads behind 31 others on 2 cores
STARTUP_TIMEOUT_S = 60
SAMPLE_S = 0.1          # VmRSS sampling period
STATES_S = 0.5          # ListModels sampling period
SETTLE_S = 15           # for the RSS to come back after the budget shrinks
# The RSS comes back within 10% of the fixed part, or this much above it when 10% is less: the
# fixed part measured in runs under ctest -j2 was 44-51 MiB and the RSS after unloading 1-5 MiB
# above it (thread stacks and allocator bookkeeping of 32 clients' calls vary by a few MiB).
RSS_BACK_MIN_MIB = 8
MIB = 1 << 20

# Used when the shared corpus is absent: single sentences (no sentence break inside), so that
# LibreTranslate's sentence splitting leaves them whole.
SPANISH = [
    "Y dijo Dios: Sea la luz: y fué la luz.",
    "Y vió Dios que la luz era buena, y apartó Dios la luz de las tinieblas.",
    "Y llamó Dios á la luz Día, y á las tinieblas llamó Noche.",
    "Y estaban ambos desnudos, Adam y su mujer, y no se avergonzaban.",
    "Entonces el rey dijo á sus siervos que trajesen el libro de la ley.",
    "Y sucedió que, al cabo de cuarenta días, abrió Noé la ventana del arca que había hecho.",
]


class Failure(Exception):
    pass


def skip(reason):
    print(f"test_catalogue: skipped: {reason}")
    sys.exit(SKIPPED)


def check(condition, message):
    if not condition:
        raise Failure(message)


# ---------------------------------------------------------------------------
# Sentences, routes and references


def sentences(count):
    """The first `count` lines of ../shared/corpus/dev.es of 20-110 characters with no sentence
    break inside (else the built-in ones)."""
    path = os.path.join(ts.SHARED, "corpus", "dev.es")
    if not os.path.isfile(path):
        print(f"test_catalogue: {path} not found: using {len(SPANISH)} built-in sentences")
        return SPANISH[:count]
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if 20 <= len(line) <= 110 and not re.search(r"[.!?;]\s", line):
                out.append(line)
            if len(out) == count:
                break
    return out


class Catalogue:
    """The fixture's models and the routes the server's rules (server/models/router.h) give:
    a model that covers the pair, bilingual before multilingual, then the smaller file, then the
    name; else source -> PIVOT -> target, each hop chosen so."""

    def __init__(self, directory):
        self.dir = directory
        self.models = catalogue_models.models(directory)
        self.languages = sorted({lang for m in self.models.values() for lang in m["languages"]})

    def covers(self, name, source, target):
        info = self.models[name]
        if info["multilingual"]:
            return source != target and source in info["languages"] and target in info["languages"]
        return info["languages"] == (source, target)

    def direct(self, source, target):
        found = [n for n in self.models if self.covers(n, source, target)]
        found.sort(key=lambda n: (self.models[n]["multilingual"],
                                  os.path.getsize(self.models[n]["path"]), n))
        return found[0] if found else None

    def route(self, source, target):
        """(model,) or (first, second); None when nothing translates the pair."""
        one = self.direct(source, target)
        if one:
            return (one,)
        if PIVOT in (source, target):
            return None
        first, second = self.direct(source, PIVOT), self.direct(PIVOT, target)
        return (first, second) if first and second else None

    def pairs(self):
        """Every (source, target) with a route: {pair: route}."""
        return {(s, t): r for s in self.languages for t in self.languages if s != t
                for r in [self.route(s, t)] if r}


def run_cli(model, lines, greedy, source, target):
    """glossa-translate's translation of lines (one output per line)."""
    flags = ["--beam_size", "1" if greedy else "4"]
    if model["multilingual"]:
        flags += ["--source_language", source, "--target_language", target]
    out = subprocess.run([ts.TRANSLATE, "--model", model["path"], *flags],
                         input="\n".join(lines) + "\n", capture_output=True, text=True,
                         encoding="utf-8", timeout=300,
                         env=dict(os.environ, OMP_NUM_THREADS="1"))
    if out.returncode != 0:
        raise Failure(f"glossa-translate --model {model['path']} {' '.join(flags)} failed "
                      f"({out.returncode}): {out.stderr}")
    result = out.stdout.split("\n")
    check(result[-1] == "" and len(result) == len(lines) + 1,
          f"glossa-translate --model {model['path']}: {len(result) - 1} lines for {len(lines)}")
    return result[:-1]


def cached_references(catalogue, routes, texts, path):
    """references(), kept in `path` (JSON) for the same glossa-translate binary, catalogue and
    sentences."""
    key = hashlib.sha256()
    with open(ts.TRANSLATE, "rb") as f:
        key.update(f.read())
    with open(os.path.join(catalogue.dir, catalogue_models.STAMP), "rb") as f:
        key.update(f.read())
    key.update(json.dumps(texts).encode())
    key = key.hexdigest()
    try:
        with open(path, encoding="utf-8") as f:
            stored = json.load(f)
        if stored["key"] == key:
            return {(s, t, g): v for s, t, g, v in stored["references"]}, 0
    except (OSError, ValueError, KeyError):
        pass
    refs, runs = references(catalogue, routes, texts)
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump({"key": key, "references": [[*k, v] for k, v in refs.items()]}, f)
    os.replace(path + ".tmp", path)
    return refs, runs


def references(catalogue, routes, texts):
    """{(source, target, greedy): [reference per text]} for every routed pair: the first hop by
    the model alone, then the second hop over the first hop's outputs."""
    jobs = {}  # (model, source, target, greedy) -> lines
    for (s, t), route in routes.items():
        for greedy in (True, False):
            if len(route) == 1:
                jobs[(route[0], s, t, greedy)] = texts
            else:
                jobs[(route[0], s, PIVOT, greedy)] = texts
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        futures = {key: pool.submit(run_cli, catalogue.models[key[0]], lines, key[3], key[1],
                                    key[2]) for key, lines in jobs.items()}
        first = {key: f.result() for key, f in futures.items()}
        # Second hops: one run per (second model, greedy) over every first hop's outputs.
        second_inputs = collections.defaultdict(list)
        for (s, t), route in routes.items():
            if len(route) == 2:
                for greedy in (True, False):
                    lines = first[(route[0], s, PIVOT, greedy)]
                    key = (route[1], PIVOT, t, greedy)
                    second_inputs[key].extend(x for x in lines if x not in second_inputs[key])
        futures = {key: pool.submit(run_cli, catalogue.models[key[0]], lines, key[3], key[1],
                                    key[2]) for key, lines in second_inputs.items()}
        second = {key: dict(zip(second_inputs[key], f.result())) for key, f in futures.items()}
    out = {}
    for (s, t), route in routes.items():
        for greedy in (True, False):
            if len(route) == 1:
                out[(s, t, greedy)] = first[(route[0], s, t, greedy)]
            else:
                hop = first[(route[0], s, PIVOT, greedy)]
                out[(s, t, greedy)] = [second[(route[1], PIVOT, t, greedy)][x] for x in hop]
    return out, len(jobs) + len(second_inputs)


# ---------------------------------------------------------------------------
# The server


class Server:
    """A glossa-server on free local ports, its output collected."""

    def __init__(self, args, log_path):
        self.log = open(log_path, "w+b")
        self.args = [ts.SERVER, "--listen", "127.0.0.1:0", "--http_listen", "127.0.0.1:0",
                     "--metrics_listen", "127.0.0.1:0", "--shutdown_timeout", "5s",
                     "--cache_bytes", "0", "--workers", "1", "--pivot_language", PIVOT, *args]
        env = dict(os.environ, OMP_NUM_THREADS="1", OMP_WAIT_POLICY="passive")
        self.proc = subprocess.Popen(self.args, stdout=subprocess.PIPE, stderr=self.log, env=env,
                                     preexec_fn=ts._die_with_parent)
        self.lines = []
        found = queue.Queue()

        def pump():
            for raw in self.proc.stdout:
                line = raw.decode("utf-8", "replace").rstrip("\n")
                self.lines.append(line)
                found.put(line)
            found.put(None)
        threading.Thread(target=pump, daemon=True).start()
        self.address = self.http_port = self.metrics_port = None
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while self.address is None:
            try:
                line = found.get(timeout=max(deadline - time.monotonic(), 0.01))
            except queue.Empty:
                line = None
            if line is None:
                self.stop()
                raise Failure(f"{' '.join(self.args)} did not start:\n{self.output()}")
            m = re.match(r"glossa-server: (HTTP|metrics) on http://[^:]+:(\d+)/", line)
            if m and m.group(1) == "HTTP":
                self.http_port = int(m.group(2))
            elif m:
                self.metrics_port = int(m.group(2))
            m = re.match(r"glossa-server: listening on (\S+):(\d+)", line)
            if m:
                self.address = f"{m.group(1)}:{m.group(2)}"
        check(self.http_port and self.metrics_port, f"no HTTP or metrics port:\n{self.output()}")
        import grpc
        self.channel = grpc.insecure_channel(self.address)
        grpc.channel_ready_future(self.channel).result(timeout=STARTUP_TIMEOUT_S)
        self.translator = ts.pb_grpc.TranslatorStub(self.channel)
        self.health = ts.health_grpc.HealthStub(self.channel)

    def output(self):
        self.log.seek(0)
        return ("stdout:\n" + "\n".join(self.lines[-50:]) + "\nstderr (end):\n" +
                self.log.read().decode("utf-8", "replace")[-6000:])

    def rss(self):
        with open(f"/proc/{self.proc.pid}/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        raise Failure("no VmRSS")

    def alive(self):
        check(self.proc.poll() is None,
              f"glossa-server exited with {self.proc.returncode}:\n{self.output()}")

    def metrics(self):
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics",
                                    timeout=30) as response:
            return response.read().decode()

    def serving(self):
        request = ts.health_pb.HealthCheckRequest(service="")
        return self.health.Check(request, timeout=30).status == \
            ts.health_pb.HealthCheckResponse.SERVING

    def list_models(self):
        return self.translator.ListModels(ts.pb.ListModelsRequest(), timeout=30)

    def stop(self):
        if getattr(self, "channel", None) is not None:
            self.channel.close()
            self.channel = None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=ts.STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                return None
        return self.proc.returncode


def metric_samples(text, name):
    """{labels: value} of metric `name` (labels: the text between braces, '' when none)."""
    pattern = re.compile(rf"^{re.escape(name)}(?:\{{([^}}]*)\}})? (\S+)$", re.M)
    return {m.group(1) or "": float(m.group(2)) for m in pattern.finditer(text)}


def metric_total(text, name):
    samples = metric_samples(text, name)
    check(samples, f"metric {name} is missing")
    return sum(samples.values())


def http_post(port, path, body):
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}",
                                     data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=RPC_TIMEOUT_S) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode("utf-8", "replace")


# ---------------------------------------------------------------------------
# Traffic


class Traffic:
    """Client threads sending requests until a deadline; each answer checked as it comes. The
    requests cycle through a shuffled list holding every pair in every way it is asked for, so
    that each is sent within the first few seconds, whatever the duration."""

    KINDS = ("grpc direct", "grpc pivot", "grpc auto", "grpc stream", "http direct", "http auto")

    def __init__(self, server, catalogue, routes, refs, texts, clients, seed):
        self.server, self.catalogue, self.routes = server, catalogue, routes
        self.refs, self.texts, self.clients, self.seed = refs, texts, clients, seed
        direct = sorted(p for p, r in routes.items() if len(r) == 1)
        pivoted = sorted(p for p, r in routes.items() if len(r) == 2)
        auto_targets = sorted(t for (s, t) in routes if s == "es")
        both = (True, False)
        # (kind, source, target, greedy). LibreTranslate's requests use the server's default
        # beam; its "auto" only into en (direct), since its sentence splitting would split the
        # nonsense a pivot's first hop makes.
        self.jobs = ([("grpc direct", s, t, g) for s, t in direct for g in both] +
                     [("grpc pivot", s, t, g) for s, t in pivoted for g in both] +
                     [("grpc auto", "auto", t, g) for t in auto_targets for g in both] * 2 +
                     [("grpc stream", s, t, True) for s, t in (direct + pivoted)[::6]] +
                     [("http direct", s, t, False) for s, t in direct] +
                     [("http auto", "auto", "en", False)] * 20)
        random.Random(seed).shuffle(self.jobs)
        self.next_job = 0
        self.overtime = RPC_TIMEOUT_S  # seconds past the duration to send every job once
        self.counts = collections.Counter()
        self.errors = []
        self.lock = threading.Lock()
        self.local = threading.local()  # each client's request in flight, for its errors

    def fail(self, what):
        with self.lock:
            self.errors.append(what)

    def one(self, rng):
        with self.lock:
            kind, source, target, greedy = self.jobs[self.next_job % len(self.jobs)]
            self.next_job += 1
        language = "es" if source == "auto" else source
        # Every sentence, in an order of its own (gRPC), or one of them (LibreTranslate's auto,
        # half the time).
        picked = rng.sample(range(len(self.texts)), len(self.texts))
        if kind == "http auto" and rng.random() < 0.5:
            picked = picked[:1]
        want = [self.refs[(language, target, greedy)][i] for i in picked]
        texts = [self.texts[i] for i in picked]
        what = f"{kind} {source}->{target} {'greedy' if greedy else 'beam'} texts {picked}"
        self.local.what = what
        if kind == "grpc stream":  # one text, its pieces streamed (the second hop's, pivoted)
            texts, want = texts[:1], want[:1]
            request = ts.pb.TranslateRequest(texts=texts, source_language=source,
                                             target_language=target,
                                             options=ts.pb.DecodingOptions(beam_size=1))
            messages = list(self.server.translator.TranslateStream(request,
                                                                   timeout=RPC_TIMEOUT_S))
            if not messages or not messages[-1].done:
                return f"{what}: the stream ended without its done message"
            got = [messages[-1].result.hypotheses[0].text]
            pieces = "".join(m.text_piece for m in messages)
            if pieces != got[0]:
                return f"{what}: pieces {pieces!r} add up to other than the result {got[0]!r}"
        elif kind.startswith("grpc"):
            beam = 1 if greedy else rng.choice((0, 4))  # 0: the server's default, 4
            request = ts.pb.TranslateRequest(texts=texts, source_language=source,
                                             target_language=target,
                                             options=ts.pb.DecodingOptions(beam_size=beam))
            response = self.server.translator.Translate(request, timeout=RPC_TIMEOUT_S)
            route = "+".join(self.routes[(language, target)])
            if response.model != route:
                return f"{what}: model {response.model!r}, expected {route!r}"
            got = [t.hypotheses[0].text for t in response.translations]
            if source == "auto":
                detected = [t.detected_language for t in response.translations]
                if detected != ["es"] * len(texts):
                    return f"{what}: detected {detected}"
        else:
            body = {"q": texts[0] if len(texts) == 1 else texts, "source": source,
                    "target": target}
            status, answer = http_post(self.server.http_port, "/translate", body)
            if status != 200:
                return f"{what}: HTTP {status} {answer}"
            got = answer["translatedText"]
            got = [got] if isinstance(got, str) else got
            if source == "auto":
                detected = answer.get("detectedLanguage")
                detected = [detected] if isinstance(detected, dict) else detected
                if [d.get("language") for d in detected or []] != ["es"] * len(texts):
                    return f"{what}: detectedLanguage {detected}"
        if got != want:
            return f"{what}: got {got!r}, expected {want!r}"
        with self.lock:
            self.counts[kind] += 1
        return None

    def client(self, index, deadline):
        rng = random.Random(self.seed * 1000 + index)
        import grpc
        # Past the deadline, until every job was sent once (a slow server or a short run), for
        # at most self.overtime more.
        while (time.monotonic() < deadline or
               (self.next_job < len(self.jobs) and time.monotonic() < deadline + self.overtime)):
            try:
                problem = self.one(rng)
            except grpc.RpcError as e:
                problem = f"{getattr(self.local, 'what', '')}: gRPC {e.code()}: {e.details()}"
            except Exception as e:  # noqa: BLE001 (any failure is the test's to report)
                problem = f"{getattr(self.local, 'what', '')}: {type(e).__name__}: {e}"
            if problem:
                self.fail(problem)

    def run(self, duration):
        deadline = time.monotonic() + duration
        threads = [threading.Thread(target=self.client, args=(i, deadline), daemon=True)
                   for i in range(self.clients)]
        for t in threads:
            t.start()
        return threads


class Sampler(threading.Thread):
    """Calls fn every period seconds until stopped; keeps (time, value) pairs."""

    def __init__(self, fn, period):
        super().__init__(daemon=True)
        self.fn, self.period = fn, period
        self.samples, self.problems = [], []
        self.stopping = threading.Event()

    def run(self):
        while not self.stopping.is_set():
            try:
                self.samples.append((time.monotonic(), self.fn()))
            except Exception as e:  # noqa: BLE001
                self.problems.append(f"{type(e).__name__}: {e}")
            self.stopping.wait(self.period)

    def stop(self):
        self.stopping.set()
        self.join()


# ---------------------------------------------------------------------------
# The checks


def states(server):
    return {m.name: (m.state, m.resident_bytes) for m in server.list_models().models}


def warm_up(server, routes, texts):
    """One greedy and one beam request of every direct pair."""
    for (source, target), route in sorted(routes.items()):
        if len(route) == 1:
            for beam in (1, 4):
                request = ts.pb.TranslateRequest(texts=texts, source_language=source,
                                                 target_language=target,
                                                 options=ts.pb.DecodingOptions(beam_size=beam))
                server.translator.Translate(request, timeout=RPC_TIMEOUT_S)


def unload_all(server, write_config, settled_rss=None):
    """max_loaded_mb=1 (less than any model; 0 would mean no budget) and SIGHUP: waits until
    every model is unloaded and the RSS is at most settled_rss (None: until it holds still for
    0.6 s), or SETTLE_S at most, then 1 s more; returns the RSS."""
    write_config(1)
    server.proc.send_signal(signal.SIGHUP)
    deadline = time.monotonic() + SETTLE_S
    previous = []
    while True:
        listed = states(server)
        settled = all(s == "not_loaded" for s, _ in listed.values())
        rss = server.rss()
        previous = (previous + [rss])[-4:]
        still = len(previous) == 4 and max(previous) - min(previous) < MIB
        if settled and (rss <= settled_rss if settled_rss is not None else still):
            break
        if time.monotonic() > deadline:
            break
        time.sleep(0.2)
    server.alive()
    loaded = sorted(n for n, (s, _) in listed.items() if s != "not_loaded")
    check(not loaded, f"after max_loaded_mb=1 and SIGHUP, still loaded: {loaded}")
    time.sleep(1)
    return server.rss()


def wait_for_budget(server, budget_mb):
    """Waits until the server's budget metric says budget_mb (a reload applied)."""
    deadline = time.monotonic() + SETTLE_S
    while metric_total(server.metrics(), "glossa_models_budget_bytes") != budget_mb * MIB:
        check(time.monotonic() < deadline, f"the budget did not become {budget_mb} MB")
        time.sleep(0.1)


def check_catalogue_listing(server, catalogue):
    """Every model listed, none loaded; health SERVING; /languages lists every language."""
    listed = states(server)
    check(sorted(listed) == sorted(catalogue.models),
          f"ListModels lists {sorted(listed)}, the directory holds {sorted(catalogue.models)}")
    loaded = {n: s for n, s in listed.items() if s[0] != "not_loaded" or s[1] != 0}
    check(not loaded, f"before any request, models not 'not_loaded' with 0 bytes: {loaded}")
    check(server.serving(), "health is not SERVING while every model is cold")
    with urllib.request.urlopen(f"http://127.0.0.1:{server.http_port}/languages",
                                timeout=30) as response:
        codes = sorted(entry["code"] for entry in json.loads(response.read()))
    check(codes == catalogue.languages, f"/languages lists {codes}, expected {catalogue.languages}")
    pivots = sorted((p.source_language, p.target_language, p.models)
                    for p in server.list_models().pivot_pairs)
    expected = sorted((s, t, "+".join(r)) for (s, t), r in catalogue.pairs().items()
                      if len(r) == 2)
    check(pivots == expected, f"ListModels pivot_pairs: {len(pivots)} pairs, expected "
                              f"{len(expected)}; first differences: "
                              f"{sorted(set(pivots) ^ set(expected))[:5]}")


def check_models_dir_flag(catalogue, work, budget_mb, texts, refs):
    """--models_dir/--max_loaded_mb: the catalogue listed unloaded; a first request loads one."""
    server = Server(["--models_dir", catalogue.dir, "--max_loaded_mb", str(budget_mb)],
                    os.path.join(work, "server-models-dir.log"))
    try:
        check_catalogue_listing(server, catalogue)
        request = ts.pb.TranslateRequest(texts=texts[:1], source_language="de",
                                         target_language="en")
        response = server.translator.Translate(request, timeout=RPC_TIMEOUT_S)
        check(response.model == "de-en", f"de->en went to {response.model!r}")
        check(response.translations[0].hypotheses[0].text == refs[("de", "en", False)][0],
              "de->en differs from glossa-translate")
        listed = states(server)
        check(listed["de-en"][0] == "loaded" and listed["de-en"][1] > 0,
              f"de-en after its first request: {listed['de-en']}")
        others = {n: s for n, s in listed.items() if n != "de-en" and s[0] != "not_loaded"}
        check(not others, f"models loaded without a request: {others}")
        text = server.metrics()
        check(metric_total(text, "glossa_models_loaded") == 1, "glossa_models_loaded is not 1")
        check(metric_total(text, "glossa_model_loads_total") == 1,
              "glossa_model_loads_total is not 1")
        check(metric_total(text, "glossa_requests_waited_for_load_total") >= 1,
              "glossa_requests_waited_for_load_total did not count the first request")
        check(metric_total(text, "glossa_model_cold_start_seconds_count") == 1,
              "glossa_model_cold_start_seconds_count is not 1")
        print(f"test_catalogue: --models_dir: {len(listed)} models listed not_loaded; de-en "
              "loaded by its first request")
    finally:
        server.stop()


def main():
    global RPC_TIMEOUT_S
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=120, help="seconds of traffic")
    parser.add_argument("--clients", type=int, default=32, help="client threads")
    parser.add_argument("--work_dir", help="where the models are cached (default: a temporary "
                                           "directory)")
    parser.add_argument("--sentences", type=int, default=4, help="Spanish sentences used")
    parser.add_argument("--overtime", type=float, default=RPC_TIMEOUT_S,
                        help="seconds the clients may go on past --duration until every pair "
                             "and way was sent once (each costs one to three loads under the "
                             "budget: about 80 s for all on 2 idle cores)")
    parser.add_argument("--budget_fraction", type=float, default=0.25,
                        help="max_loaded_mb as a fraction of the models' total size")
    parser.add_argument("--margin_mb", type=float, default=None,
                        help="RSS allowed above the fixed part + max_loaded_mb (default: "
                             "32; --no_catalogue: 60 above the RSS after the warm-up)")
    parser.add_argument("--seed", type=int, default=1, help="the models' and the clients' seed")
    parser.add_argument("--no_catalogue", action="store_true",
                        help="every model given with --model, all loaded, no budget")
    args = parser.parse_args()

    sanitizer = os.environ.get("GLOSSA_SANITIZE", "")
    args.bounds = not sanitizer
    if sanitizer == "thread":
        RPC_TIMEOUT_S *= 5
        args.overtime = min(args.overtime, 60)  # within ctest's 600 s
        # A load's RSS growth, which the registry counts when it exceeds the file's estimate,
        # takes in the shadow memory (a 5.4 MB model: 69-84 MB): a budget 8 times as large.
        args.budget_fraction *= 8
        print("test_catalogue: under ThreadSanitizer: no memory bounds, budget x8, RPC timeout "
              f"{RPC_TIMEOUT_S} s, pairs and ways sent counted, not required")
    elif sanitizer:
        skip(f"a {sanitizer} sanitizer build: its RSS bounds cannot hold (AddressSanitizer keeps "
             "freed memory in quarantine); catalogue_test covers the registry there, and the "
             "ThreadSanitizer pass runs this traffic without the bounds")
    if not ts.SERVER or not os.access(ts.SERVER, os.X_OK):
        skip("set GLOSSA_SERVER to a glossa-server binary (ctest does)")
    if not ts.TRANSLATE or not os.access(ts.TRANSLATE, os.X_OK):
        skip("set GLOSSA_TRANSLATE to glossa-translate, which makes the references (ctest does)")
    if not args.no_catalogue:
        usage = subprocess.run([ts.SERVER, "--help"], capture_output=True, text=True,
                               timeout=60)
        if "--models_dir" not in usage.stdout + usage.stderr:
            skip(f"{ts.SERVER} has no --models_dir flag (no model catalogue); "
                 "--no_catalogue runs the traffic against every model loaded")
    try:
        ts.setUpModule()
    except unittest.SkipTest as e:
        skip(str(e))
    if not args.no_catalogue:
        fields = ts.pb.ModelInfo.DESCRIPTOR.fields_by_name
        if "state" not in fields or "resident_bytes" not in fields:
            skip("proto/glossa/v1/translator.proto's ModelInfo has no state/resident_bytes")

    if args.margin_mb is None:
        args.margin_mb = 60 if args.no_catalogue else 32
    work = args.work_dir or tempfile.mkdtemp(prefix="glossa-catalogue-")
    os.makedirs(work, exist_ok=True)
    try:
        return run(args, work)
    except Failure as e:
        print(f"test_catalogue: FAILED: {e}")
        return 1
    finally:
        ts.tearDownModule()


def run(args, work):
    start = time.monotonic()
    directory = catalogue_models.build(os.path.join(work, "models"), ts.MODEL, seed=args.seed,
                                       log=lambda line: print(f"test_catalogue: {line}"))
    catalogue = Catalogue(directory)
    check(len(catalogue.models) >= 42, f"{directory} holds {len(catalogue.models)} models")
    texts = sentences(args.sentences)
    routes = catalogue.pairs()
    refs, runs = cached_references(catalogue, routes, texts,
                                   os.path.join(work, "references.json"))
    n_direct = sum(len(r) == 1 for r in routes.values())
    print(f"test_catalogue: {len(catalogue.models)} models, {len(catalogue.languages)} languages, "
          f"{n_direct} direct pairs, {len(routes) - n_direct} pivot pairs, {len(texts)} "
          f"sentences; references from {runs or 'cached'} glossa-translate runs; "
          f"{time.monotonic() - start:.1f} s so far")
    # The random models must differ: two models on the same input give different outputs.
    outputs = {tuple(refs[(s, t, True)]) for (s, t), r in routes.items() if len(r) == 1}
    check(len(outputs) > 0.9 * n_direct, f"only {len(outputs)} distinct outputs of {n_direct} "
                                         "direct pairs")

    total_bytes = sum(os.path.getsize(m["path"]) for m in catalogue.models.values())
    budget_mb = 0 if args.no_catalogue else math.ceil(total_bytes * args.budget_fraction / MIB)
    if not args.no_catalogue:
        check_models_dir_flag(catalogue, work, budget_mb, texts, refs)

    config = os.path.join(work, "models.conf")

    def write_config(budget):
        with open(config + ".tmp", "w", encoding="utf-8") as f:
            f.write(f"dir={directory}\nmax_loaded_mb={budget}\n")
        os.replace(config + ".tmp", config)

    if args.no_catalogue:
        flags = [x for name, m in sorted(catalogue.models.items())
                 for x in ("--model", f"{name}={m['path']}")]
    else:
        write_config(budget_mb)
        flags = ["--model_config", config]
    server = Server(flags, os.path.join(work, "server.log"))
    try:
        return traffic(args, server, catalogue, routes, refs, texts, budget_mb, total_bytes,
                       write_config)
    finally:
        code = server.stop()
        if code != 0:
            print(f"test_catalogue: FAILED: glossa-server exited with {code} on SIGTERM:\n"
                  f"{server.output()}")
            sys.exit(1)


def traffic(args, server, catalogue, routes, refs, texts, budget_mb, total_bytes, write_config):
    catalogued = not args.no_catalogue
    if catalogued:
        check_catalogue_listing(server, catalogue)
        # The server's fixed part: its RSS once its code has run (the first loads page in
        # oneDNN's kernels, SentencePiece, gRPC's and the HTTP server's paths: about 10 MiB of
        # libraries) with no model loaded. A few seconds of the traffic, then every model
        # unloaded (max_loaded_mb=1), then the budget back.
        warm = Traffic(server, catalogue, routes, refs, texts, args.clients, args.seed + 1)
        for t in warm.run(min(5.0, args.duration / 4)):
            t.join()
        check(not warm.errors, f"{len(warm.errors)} requests of the warm-up failed or differ; "
                               "the first:\n  " + "\n  ".join(warm.errors[:10]))
        rss_start = unload_all(server, write_config)
        write_config(budget_mb)
        server.proc.send_signal(signal.SIGHUP)
        wait_for_budget(server, budget_mb)
    else:
        # Every model's weights become resident as requests first touch them (the file is
        # mapped; beam search makes its copy of the output layer), and each model's workers keep
        # the buffers of the largest batches they ran (about 4 MiB a model under this traffic):
        # one greedy and one beam request per model, then the same traffic for a while, before
        # the RSS taken as the start. Under the traffic that follows, the RSS may then grow by
        # --margin_mb at most (measured on 2 cores: 22 MiB from 10 s to 40 s).
        check(server.serving(), "health is not SERVING")
        warm_up(server, routes, texts)
        warm = Traffic(server, catalogue, routes, refs, texts, args.clients, args.seed + 1)
        for t in warm.run(min(10.0, args.duration / 2)):
            t.join()
        check(not warm.errors, f"{len(warm.errors)} requests of the warm-up failed or differ; "
                               "the first:\n  " + "\n  ".join(warm.errors[:10]))
        rss_start = server.rss()
    # The margin over the budget: what the budget does not count. It counts each loaded model's
    # weights, output-layer copies and allocated KV cache; not the buffers of the batches in
    # flight (encoder outputs, beams), gRPC's and the HTTP server's buffers, nor what the
    # allocator keeps of freed memory. Measured on 2 cores under ctest -j2 at the default
    # traffic: the peak 111 MiB against a fixed part of 50 and a budget of 60 MiB, 1 MiB over
    # both. Without unloading, the models' own 350 MiB (file pages and output-layer copies)
    # would be far above the limit.
    limit = rss_start + budget_mb * MIB + args.margin_mb * MIB
    rss = Sampler(server.rss, SAMPLE_S)
    listing = Sampler(lambda: states(server), STATES_S) if catalogued else None
    health = Sampler(server.serving, 1.0)
    for sampler in (rss, health) + ((listing,) if listing else ()):
        sampler.start()
    load = Traffic(server, catalogue, routes, refs, texts, args.clients, args.seed)
    load.overtime = args.overtime
    began = time.monotonic()
    threads = load.run(args.duration)
    for t in threads:
        t.join(max(began + args.duration + args.overtime + 2 * RPC_TIMEOUT_S - time.monotonic(), 0))
    elapsed = time.monotonic() - began
    stuck = sum(t.is_alive() for t in threads)
    for sampler in (rss, health) + ((listing,) if listing else ()):
        sampler.stop()
    server.alive()
    time.sleep(1)
    rss_after = server.rss()
    peak = max(v for _, v in rss.samples)
    done = sum(load.counts.values())
    print(f"test_catalogue: {done} requests in {elapsed:.0f} s from {args.clients} clients "
          f"({', '.join(f'{k}: {v}' for k, v in sorted(load.counts.items()))}), "
          f"{len(load.errors)} failed")
    print(f"test_catalogue: VmRSS fixed part {rss_start / MIB:.0f} MiB, peak {peak / MIB:.0f} "
          f"MiB (+{(peak - rss_start) / MIB:.0f}), 1 s after the traffic "
          f"{rss_after / MIB:.0f} MiB; limit {limit / MIB:.0f} MiB (budget "
          f"{budget_mb} MB of {total_bytes / MIB:.0f} MiB of models + margin {args.margin_mb:g})")
    timeline = [max((v for t, v in rss.samples if t - began <= f * elapsed), default=0)
                for f in (0.25, 0.5, 0.75, 1.0)]
    print("test_catalogue: VmRSS peak by 25/50/75/100% of the traffic: " +
          ", ".join(f"{v / MIB:.0f}" for v in timeline) + " MiB")
    check(not stuck, f"{stuck} client threads still running long after the end")
    kinds = collections.Counter(re.sub(r"'[^']*'|\d+", "_", e)[:90] for e in load.errors)
    check(not load.errors, f"{len(load.errors)} requests failed or differ; the first:\n  " +
          "\n  ".join(load.errors[:10]) + "\nby kind:\n  " +
          "\n  ".join(f"{n} x {k}" for k, n in kinds.most_common(10)))
    check(load.next_job >= len(load.jobs) or not args.bounds,
          f"{load.next_job} requests sent in {elapsed:.0f} s, fewer than the {len(load.jobs)} "
          "pairs and ways")
    print(f"test_catalogue: {min(load.next_job, len(load.jobs))} of {len(load.jobs)} pairs and "
          "ways sent")
    check(not rss.problems and not health.problems,
          f"sampling failed: {(rss.problems + health.problems)[:3]}")
    check(all(v for _, v in health.samples), "health was not SERVING at some point")
    over = [(t - began, v) for t, v in rss.samples if v > limit and args.bounds]
    check(not over, f"VmRSS above {limit / MIB:.0f} MiB {len(over)} times, first at "
                    f"{over[0][0] if over else 0:.1f} s: {over[0][1] / MIB if over else 0:.0f} MiB")
    if not catalogued:
        print("test_catalogue: passed (--no_catalogue)")
        return 0

    # States: every model was seen loaded at some point (every pair was asked for, unless the
    # run was too short), and some went back to not_loaded under the budget.
    check(not listing.problems, f"ListModels failed: {listing.problems[:3]}")
    history = collections.defaultdict(list)
    for _, snapshot in listing.samples:
        for name, (state, _) in snapshot.items():
            if not history[name] or history[name][-1] != state:
                history[name].append(state)
    unknown = {s for h in history.values() for s in h} - {"loaded", "not_loaded", "loading"}
    check(not unknown, f"unknown states {unknown}")
    evicted = [n for n, h in history.items() if "loaded" in h and h[-1] == "not_loaded"
               or h.count("loaded") > 1]
    check(evicted, "no model went back to not_loaded during the traffic")
    resident = [sum(b for s, b in snapshot.values() if s == "loaded")
                for _, snapshot in listing.samples]
    check(max(resident) <= budget_mb * MIB + max(os.path.getsize(m["path"])
                                                for m in catalogue.models.values()),
          f"resident_bytes of the loaded models reached {max(resident) / MIB:.0f} MiB over "
          f"the budget {budget_mb} MB (and one model loading)")
    text = server.metrics()
    loads = metric_total(text, "glossa_model_loads_total")
    unloads = metric_total(text, "glossa_model_unloads_total")
    check(loads >= len(catalogue.models) and unloads > 0,  # each model was asked for
          f"glossa_model_loads_total {loads}, glossa_model_unloads_total {unloads}")
    check(all("reason=" in labels for labels in
              list(metric_samples(text, "glossa_model_loads_total")) +
              list(metric_samples(text, "glossa_model_unloads_total"))),
          "loads/unloads without a reason label")
    cold = metric_total(text, "glossa_model_cold_start_seconds_count")
    check(0 < cold <= loads, f"glossa_model_cold_start_seconds_count {cold}, loads {loads}")
    check(metric_total(text, "glossa_requests_waited_for_load_total") > 0,
          "no request waited for a load")
    check(0 < metric_total(text, "glossa_models_loaded") <= len(catalogue.models),
          "glossa_models_loaded out of range")
    # The budget is kept at each load; between loads the KV caches of the loaded models grow
    # with their requests (counted, they make room at the next load), by up to half the budget
    # under this traffic.
    loaded_bytes = metric_total(text, "glossa_models_loaded_bytes")
    check(loaded_bytes <= 1.5 * budget_mb * MIB,
          f"glossa_models_loaded_bytes {loaded_bytes / MIB:.0f} MiB, above 1.5 x the budget")
    print(f"test_catalogue: {int(loads)} loads, {int(unloads)} unloads, "
          f"{len(evicted)} models seen unloaded after use")

    # Shrink the budget to 1 MB (0 would mean no budget), less than any model: every model
    # unloads at once and the memory comes back.
    back_bound = max(1.1 * rss_start, rss_start + RSS_BACK_MIN_MIB * MIB)
    now_rss = unload_all(server, write_config, settled_rss=back_bound)
    text = server.metrics()
    check(metric_total(text, "glossa_models_loaded") == 0 and
          metric_total(text, "glossa_models_loaded_bytes") == 0,
          "glossa_models_loaded(_bytes) not 0 after the budget went to 1 MB")
    print(f"test_catalogue: after max_loaded_mb=1: VmRSS {now_rss / MIB:.0f} MiB (fixed part: "
          f"{rss_start / MIB:.0f} MiB)")
    check(now_rss <= back_bound or not args.bounds,
          f"VmRSS {now_rss / MIB:.0f} MiB {SETTLE_S} s after the budget went to 1 MB: above "
          f"{back_bound / MIB:.0f} MiB (the fixed part, {rss_start / MIB:.0f} MiB, + 10%, or "
          f"+ {RSS_BACK_MIN_MIB} MiB)")
    check(server.serving(), "health is not SERVING after the reload")
    print("test_catalogue: passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
