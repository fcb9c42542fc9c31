#!/usr/bin/python3
"""Load-and-fault ("soak") test of glossa-server. ctest label `soak`, not run by default.

Many concurrent gRPC clients (default 500, for 120 s) send mixed requests (both lanes: a quarter
PRIORITY_BATCH; the result cache on, as by default) to a server holding two model files from a
--model_config file. Part way (--reload_at) the test points model A at another path to the same
weights and sends SIGHUP: the server loads it and swaps it in under load, and no request may fail
for it. Later it SIGTERMs the server and restarts it on the same port. Afterwards it checks:
  - no crash: both server processes exit 0 on SIGTERM (the first one while under load, draining
    its in-flight requests), and neither dies on its own;
  - every OK response equals the expected output, computed from the server before the load
    (texts and token ids of every hypothesis; scores within 1e-3), and streamed pieces add up to
    the streamed result;
  - no leak: the second server's RSS (VmRSS from /proc/PID/status) at the end of the load is
    within --rss_tolerance (10 %) of its level after --warmup seconds of load;
  - the second server's Prometheus metrics agree with what the clients saw during its lifetime
    (see compare_metrics for which counts must be equal and which are bounded, and why).
It prints a JSON summary (requests, errors by gRPC code, cancellations, RSS, metric comparisons)
and exits 1 on any failure, 77 when it cannot run here (no server binary, no shared data, not
Debian's Python).

From the repository root, at full size (the issue's numbers) or small for a quick local check:
    GLOSSA_SERVER=build/glossa-server /usr/bin/python3 tests/soak/soak_test.py
    GLOSSA_SERVER=build/glossa-server /usr/bin/python3 tests/soak/soak_test.py --quick

Environment (as the other Python tests): GLOSSA_SERVER (the binary; also --server), GLOSSA_MODEL
(default: the bundled demo model), GLOSSA_SHARED (default <repo>/../shared; golden/dev.es gives
the sentences). The second model file (--second_model) is, by default, the shared Hugging Face
model (<shared>/models/opus-mt-es-en-bible) converted again with glossa-convert --dtype int8 into
a temporary directory (about a second): other weights, other outputs, so expected outputs are
kept per model. With --second_model copy (and as a fallback when the conversion cannot run) it
is a byte copy of --model under another name, which the server still maps and loads as a model
of its own (own engine, own mapping, own metrics label); then both must answer identically,
which the test checks before the load.

The clients run in --processes worker processes (asyncio + grpc.aio each, --clients in all),
so that the Python side is not a single core's worth of event loop; the summary reports the CPU
the clients and the server used. Reuses tests/metrics/test_metrics.py (stub generation, the
server process wrapper, the exposition parser).
"""

import argparse
import asyncio
import collections
import json
import math
import multiprocessing
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(REPO, "tests", "metrics"))

try:
    import grpc
    import grpc.aio
except ImportError:
    grpc = None

import test_metrics as tm  # noqa: E402  (Exposition, GlossaServer, stubs)

SKIP = 77
MODEL_A = tm.MODEL_NAME  # "demo": the name test_metrics.GlossaServer gives the model it loads
MODEL_B = "demo-variant"  # the second model file (see make_second_model)
MISSING_MODEL = "no-such-model"
CODES = [c.name for c in grpc.StatusCode] if grpc else []
# Outcomes a client may see for a call it gave up on (cancelled, or its deadline passed): the
# server may have recorded it differently (see compare_metrics).
FLEX = ("CANCELLED", "DEADLINE_EXCEEDED")
SCORE_TOLERANCE = 1e-3

# Decoding options the clients pick from; beam_size 0 takes the server default (4).
PROFILES = {
    "greedy": dict(beam_size=1),
    "beam2_scores": dict(beam_size=2, return_scores=True),
    "beam_default": dict(beam_size=0),
    "nbest3": dict(beam_size=4, num_hypotheses=3, return_scores=True),
    "beam3_lp": dict(beam_size=3, length_penalty=0.6),
    "greedy_max6": dict(beam_size=1, max_output_tokens=6),
    "sample_topk": dict(beam_size=1, sampling_temperature=0.7, sampling_top_k=20, seed=1234),
    "sample_topp": dict(beam_size=1, sampling_temperature=1.0, sampling_top_p=0.9, seed=99),
}


def log(*parts):
    print(f"[soak {time.strftime('%H:%M:%S')}]", *parts, file=sys.stderr, flush=True)


def vm_rss_bytes(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def cpu_seconds(pid):
    """User + system CPU seconds of a process (and its finished children: none here)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def translation_key(t):
    """A Translation as comparable data: [(text, token ids, score)] per hypothesis."""
    return [(h.text, list(h.token_ids), float(h.score)) for h in t.hypotheses]


def same_translation(got, want):
    """None if equal (scores within SCORE_TOLERANCE), else why not."""
    if len(got) != len(want):
        return f"{len(got)} hypotheses, expected {len(want)}"
    for i, ((gt, gi, gs), (wt, wi, ws)) in enumerate(zip(got, want)):
        if gt != wt or gi != wi:
            return f"hypothesis {i}: {gt!r} {gi}, expected {wt!r} {wi}"
        if abs(gs - ws) > SCORE_TOLERANCE * max(1.0, abs(ws)):
            return f"hypothesis {i}: score {gs}, expected {ws}"
    return None


# ---------------------------------------------------------------------------------------------
# Client worker processes

class Shared:
    """State the orchestrator shares with the worker processes."""

    def __init__(self, ctx):
        self.stop = ctx.Event()
        self.phase = ctx.Value("i", 1, lock=False)        # 1, 2 (drain), 3 (gap), 4 (server 2)
        self.t_spawn2 = ctx.Value("d", 0.0, lock=False)   # monotonic time server 2 was started


PHASES = {1: "server1", 2: "drain", 3: "gap", 4: "server2"}


class Stats:
    """What one worker's clients saw. window: "s1" for calls that ended before the second server
    was started, "s2" for the others (the only ones the second server can have recorded)."""

    def __init__(self):
        self.calls = collections.Counter()         # (window, model label, method, code)
        self.by_phase = collections.Counter()      # (start phase, code)
        self.fates = collections.Counter()         # (fate, code)
        self.client_cancels = collections.Counter()  # (window, cancel() won the race: bool)
        self.ok_output_tokens = collections.Counter()  # (window, label, method): best hyps, no EOS
        self.checked = collections.Counter()       # OK responses compared (by kind)
        self.mismatches = []
        self.mismatch_count = 0
        self.unexpected = []
        self.unexpected_count = 0
        self.retries = collections.Counter()       # code that made a client retry
        self.deadline_as_cancelled = 0             # CANCELLED at a short deadline (see one_call)
        self.shutdown_cancelled = 0                # CANCELLED by the first server's shutdown
        self.latency_ok = []                       # seconds, OK calls with the normal deadline

    def to_json(self):
        def keyed(counter):
            return [[*k, v] if isinstance(k, tuple) else [k, v] for k, v in counter.items()]
        return dict(calls=keyed(self.calls), by_phase=keyed(self.by_phase),
                    fates=keyed(self.fates), client_cancels=keyed(self.client_cancels),
                    ok_output_tokens=keyed(self.ok_output_tokens), checked=keyed(self.checked),
                    mismatches=self.mismatches, mismatch_count=self.mismatch_count,
                    unexpected=self.unexpected, unexpected_count=self.unexpected_count,
                    retries=keyed(self.retries), latency_ok=self.latency_ok,
                    deadline_as_cancelled=self.deadline_as_cancelled,
                    shutdown_cancelled=self.shutdown_cancelled)


def worker_main(index, n_clients, cfg, shared, results):
    tm.import_stubs(cfg["stub_dir"])
    stats = Stats()
    t_cpu = os.times()
    try:
        asyncio.run(run_clients(index, n_clients, cfg, shared, stats))
    except BaseException as e:  # report, do not hang the orchestrator
        stats.unexpected.append(f"worker {index} crashed: {e!r}")
        stats.unexpected_count += 1
    t_end = os.times()
    out = stats.to_json()
    out["cpu_seconds"] = (t_end.user - t_cpu.user) + (t_end.system - t_cpu.system)
    results.put((index, out))


async def run_clients(index, n_clients, cfg, shared, stats):
    channel_options = [("grpc.initial_reconnect_backoff_ms", 100),
                       ("grpc.min_reconnect_backoff_ms", 100),
                       ("grpc.max_reconnect_backoff_ms", 500)]
    n_channels = max(1, (n_clients + cfg["clients_per_channel"] - 1) // cfg["clients_per_channel"])
    channels = [grpc.aio.insecure_channel(cfg["address"], options=channel_options)
                for _ in range(n_channels)]
    stubs = [tm.pb_grpc.TranslatorStub(c) for c in channels]
    expected = {(m, p, s): want for m, p, s, want in cfg["expected"]}
    eos = cfg["eos_id"]
    rngs = [random.Random(cfg["seed"] * 100003 + index * 1009 + i) for i in range(n_clients)]
    tasks = [asyncio.create_task(client_loop(stubs[i % n_channels], rngs[i], cfg, expected, eos,
                                             shared, stats))
             for i in range(n_clients)]
    await asyncio.gather(*tasks)
    for c in channels:
        await c.close()


def pick_request(rng, cfg):
    """(method, model, texts, profile or None, options dict, fate, label) for one call."""
    r = rng.random()
    sentences = cfg["sentences"]
    model = MODEL_A if rng.random() < 0.5 else MODEL_B
    profile = rng.choice(sorted(PROFILES))
    options = PROFILES[profile]
    if r < 0.04:  # requests the server must refuse, always with a long deadline, never cancelled
        kind = rng.choice(["not_found", "too_many_hypotheses", "empty_model", "list_models"])
        text = [rng.choice(sentences)]
        if kind == "not_found":
            return ("Translate", MISSING_MODEL, text, None, dict(beam_size=1), "invalid", "")
        if kind == "too_many_hypotheses":
            return (rng.choice(["Translate", "TranslateStream"]), model, text, None,
                    dict(beam_size=2, num_hypotheses=3), "invalid", model)
        if kind == "empty_model":  # two models loaded: the name is required
            return ("Translate", "", text, None, dict(beam_size=1), "invalid", "")
        return ("ListModels", "", [], None, {}, "invalid", "")
    fate = rng.choices(["normal", "deadline", "cancel"], weights=cfg["fate_weights"])[0]
    if r < 0.70:
        n = rng.choice([1, 1, 2, 3, 4])
        texts = ["" if rng.random() < 0.03 else rng.choice(sentences) for _ in range(n)]
        return ("Translate", model, texts, profile, options, fate, model)
    text = "" if rng.random() < 0.02 else rng.choice(sentences)
    return ("TranslateStream", model, [text], profile, options, fate, model)


async def client_loop(stub, rng, cfg, expected, eos, shared, stats):
    await asyncio.sleep(rng.random() * cfg["ramp_s"])  # do not connect all at once
    retry = None
    while not shared.stop.is_set():
        request = retry or pick_request(rng, cfg)
        retry = None
        code = await one_call(stub, rng, request, cfg, expected, eos, shared, stats)
        if code in ("UNAVAILABLE", "RESOURCE_EXHAUSTED") and not shared.stop.is_set():
            stats.retries[code] += 1
            retry = request  # the same request again, after a backoff
            await asyncio.sleep(0.05 + rng.random() * 0.25)


async def one_call(stub, rng, request, cfg, expected, eos, shared, stats):
    method, model, texts, profile, options, fate, label = request
    phase = shared.phase.value
    loop = asyncio.get_running_loop()
    if fate == "deadline":  # log-uniform: some expire at once, some in the queue, some not
        timeout = log_uniform(rng, *cfg["short_deadline_s"])
    else:
        timeout = cfg["deadline_s"]
    cancel_after = log_uniform(rng, *cfg["cancel_after_s"]) if fate == "cancel" else None
    start = time.monotonic()
    cancel_won = None
    code = "OK"
    result = None
    pieces = []
    call = None
    handle = None
    details = ""
    try:
        if method == "ListModels":
            result = await stub.ListModels(tm.pb.ListModelsRequest(), timeout=timeout)
        else:
            # Both lanes: the batch lane's share of the translations (the outputs do not depend
            # on the lane).
            batch = rng.random() < cfg.get("batch_share", 0)
            req = tm.pb.TranslateRequest(
                model=model, texts=texts, options=tm.pb.DecodingOptions(**options),
                priority=tm.pb.PRIORITY_BATCH if batch else tm.pb.PRIORITY_INTERACTIVE)
            if method == "Translate":
                call = stub.Translate(req, timeout=timeout)
            else:
                call = stub.TranslateStream(req, timeout=timeout)
            if cancel_after is not None:
                def cancel():
                    nonlocal cancel_won
                    cancel_won = call.cancel()
                handle = loop.call_later(cancel_after, cancel)
            if method == "Translate":
                result = await call
            else:
                async for message in call:
                    pieces.append(message)
    except asyncio.CancelledError:
        if cancel_won is None:  # not ours: the worker itself is being torn down
            raise
        code = "CANCELLED"
    except grpc.aio.AioRpcError as e:
        code = e.code().name
        details = e.details()
    finally:
        if handle is not None:
            handle.cancel()
    end = time.monotonic()
    t2 = shared.t_spawn2.value
    window = "s2" if t2 and end >= t2 else "s1"
    stats.calls[(window, label, method, code)] += 1
    stats.by_phase[(PHASES[phase], code)] += 1
    stats.fates[(fate, code)] += 1
    if cancel_won is not None:
        stats.client_cancels[(window, bool(cancel_won))] += 1

    def unexpected(why):
        stats.unexpected_count += 1
        if len(stats.unexpected) < 20:
            stats.unexpected.append(
                f"{method} {model!r} {profile} {fate} (started in phase {PHASES[phase]}, "
                f"now {PHASES[shared.phase.value]}; {end - start:.3f} s of a {timeout:.3f} s "
                f"deadline): {why}" + (f" ({details})" if details else ""))

    if code == "OK":
        if fate == "normal":
            stats.latency_ok.append(round(end - start, 4))
        if method == "ListModels":
            names = sorted(m.name for m in result.models)
            if names != sorted([MODEL_A, MODEL_B]):
                unexpected(f"ListModels answered {names}")
            return code
        if fate == "invalid":
            unexpected("a request the server must refuse was answered OK")
            return code
        if method == "TranslateStream":
            if not pieces or not pieces[-1].done:
                unexpected("the stream ended without a message with done")
                return code
            if any(m.done for m in pieces[:-1]):
                unexpected("done before the last message")
            translations = [pieces[-1].result]
            best = translations[0].hypotheses[0] if translations[0].hypotheses else None
            joined_text = "".join(m.text_piece for m in pieces)
            joined_ids = [i for m in pieces for i in m.token_ids]
            if best is None or joined_text != best.text or joined_ids != list(best.token_ids):
                record_mismatch(stats, method, model, profile, texts[0],
                                f"pieces {joined_text!r} {joined_ids} do not add up to the "
                                f"result {best.text if best else None!r}")
        else:
            translations = list(result.translations)
            if result.model != model:
                unexpected(f"response names model {result.model!r}")
            if len(translations) != len(texts):
                unexpected(f"{len(translations)} translations for {len(texts)} texts")
                return code
        tokens = 0
        for text, t in zip(texts, translations):
            want = expected.get((model, profile, text))
            got = translation_key(t)
            why = same_translation(got, want) if want is not None else "no expected output"
            stats.checked[method] += 1
            if why:
                record_mismatch(stats, method, model, profile, text, why)
            if t.hypotheses:
                ids = list(t.hypotheses[0].token_ids)
                tokens += len(ids) - (1 if ids and ids[-1] == eos else 0)
        stats.ok_output_tokens[(window, label, method)] += tokens
    elif code == "CANCELLED":
        if cancel_won is None and (phase == 2 or shared.phase.value == 2 and end - start < 1):
            # A call that reaches the first server as its gRPC Server::Shutdown() begins (after
            # the service has started answering UNAVAILABLE) can be killed by gRPC itself: the
            # server no longer takes new calls, and the client sees CANCELLED, not UNAVAILABLE
            # (about one in 10,000 calls of the drain here). Counted and reported, not a failure.
            stats.shutdown_cancelled += 1
            if len(stats.unexpected) < 20:
                stats.unexpected.append(f"(counted, not a failure) {method} during the first "
                                        f"server's shutdown: CANCELLED after {end - start:.3f} s"
                                        + (f" ({details})" if details else ""))
        elif cancel_won is None and fate == "deadline" and end - start >= 0.9 * timeout - 0.05:
            # At the deadline, a call may end as CANCELLED instead of DEADLINE_EXCEEDED (seen
            # once in ~1,700 short-deadline streams): gRPC's client turns an HTTP/2 RST_STREAM
            # (CANCEL) into CANCELLED unless its (cached) clock already shows the deadline
            # passed, and a server ends a call at its deadline with such a reset. Counted, not a
            # failure.
            stats.deadline_as_cancelled += 1
            if len(stats.unexpected) < 20:
                stats.unexpected.append(f"(counted, not a failure) {method} at its deadline: "
                                        f"CANCELLED after {end - start:.3f} s of {timeout:.3f} s"
                                        + (f" ({details})" if details else ""))
        elif cancel_won is None:
            unexpected("CANCELLED without the client cancelling")
    elif code == "DEADLINE_EXCEEDED":
        if fate != "deadline":
            unexpected(f"DEADLINE_EXCEEDED with the {cfg['deadline_s']} s deadline")
    elif code in ("INVALID_ARGUMENT", "NOT_FOUND"):
        if fate != "invalid":
            unexpected(f"{code} for a valid request")
    elif code in ("UNAVAILABLE", "RESOURCE_EXHAUSTED"):
        if code == "UNAVAILABLE" and PHASES[phase] == "server1" and shared.phase.value == 1:
            unexpected("UNAVAILABLE while the first server was up and not draining")
    else:
        unexpected(code)
    return code


def log_uniform(rng, low, high):
    return math.exp(rng.uniform(math.log(low), math.log(high)))


def record_mismatch(stats, method, model, profile, text, why):
    stats.mismatch_count += 1
    if len(stats.mismatches) < 20:
        stats.mismatches.append(f"{method} {model} {profile} {text[:60]!r}: {why}")


# ---------------------------------------------------------------------------------------------
# The orchestrator

def read_sentences(path, n, max_words, seed):
    with open(path, encoding="utf-8") as f:
        lines = [line.rstrip("\r\n") for line in f]
    pool = sorted({line for line in lines if line.strip() and len(line.split()) <= max_words})
    random.Random(seed).shuffle(pool)
    return pool[:n]


def make_second_model(args, tmp):
    """(path, description) of the second model file: the shared Hugging Face model converted
    again with glossa-convert --dtype int8 or bfloat16 (other weights, other outputs: expected
    outputs are per model), or a byte copy of --model under another name. A conversion that
    cannot be made here falls back to the copy, and the summary says so."""
    path = os.path.join(tmp, "second-model.glossa")
    if args.second_model != "copy":
        hf_dir = os.path.join(args.shared, "models", "opus-mt-es-en-bible")
        convert = [sys.executable, os.path.join(REPO, "model_tools", "glossa-convert"),
                   "--input", hf_dir, "--output", path, "--dtype", args.second_model]
        try:
            out = subprocess.run(convert, capture_output=True, text=True, timeout=300)
            if out.returncode == 0 and os.path.exists(path):
                return path, f"{hf_dir} converted with glossa-convert --dtype {args.second_model}"
            why = (out.stderr.strip().splitlines() or [f"exit {out.returncode}"])[-1]
        except (OSError, subprocess.TimeoutExpired) as e:
            why = repr(e)
        log(f"cannot convert a {args.second_model} variant ({why}): using a byte copy")
    shutil.copyfile(args.model, path)  # another file: mapped and loaded on its own
    return path, f"byte copy of {args.model}"


def compute_expected(server, sentences, same_models):
    """{(model, profile, text): translation key} from the first server before the load: every
    profile, both models, the sentences in two different batchings (all in one request, then a
    few per request). Returns (expected, unstable, disagreements): texts whose outputs differ
    between batchings are float near-ties that later batches may break either way; they are left
    out of the load. same_models: the two files hold the same weights, so their outputs must be
    the same too (a difference counts as unstable as well)."""
    texts = sentences + [""]
    expected, unstable, disagree = {}, set(), []
    for profile, options in PROFILES.items():
        runs = {}
        for model in (MODEL_A, MODEL_B):
            for chunk in (len(texts), 5):
                out = []
                for i in range(0, len(texts), chunk):
                    response = server.stub.Translate(
                        tm.pb.TranslateRequest(model=model, texts=texts[i:i + chunk],
                                               options=tm.pb.DecodingOptions(**options)),
                        timeout=600)
                    out.extend(translation_key(t) for t in response.translations)
                runs[(model, chunk)] = out
        for i, text in enumerate(texts):
            for model in (MODEL_A, MODEL_B):
                first = runs[(model, len(texts))][i]
                others = [runs[(model, 5)][i]]
                if same_models and model == MODEL_B:
                    others.append(runs[(MODEL_A, len(texts))][i])
                for other in others:
                    why = same_translation(other, first)
                    if why:
                        unstable.add(text)
                        disagree.append((model, profile, text[:60], why))
                expected[(model, profile, text)] = first
    return expected, unstable, disagree


def scrape_requests(server):
    """The exposition of a running server, or None if it does not answer."""
    try:
        return server.scrape()
    except Exception:  # noqa: BLE001 (a server on its way out)
        return None


def request_counts(expo):
    """{(model label, method, code): value} of glossa_requests_total, summed over clients."""
    out = {}
    for labels, value in expo.series("glossa_requests_total"):
        key = (labels["model"], labels["method"], labels["code"])
        out[key] = out.get(key, 0) + int(value)
    return out


def compare_metrics(expo, client, client_tokens, models):
    """The second server's counters against what the clients saw while it ran (window "s2": the
    calls that ended after it was started; a call recorded by the first server ended before).

    With C the clients' counts and S the server's glossa_requests_total, by {model label, method,
    code}:
      - INVALID_ARGUMENT, NOT_FOUND: S == C exactly, per label and method. Only requests that
        carry the long deadline and are never cancelled get these, and the server answers them at
        once. (A server that records a call which ended before its request message arrived as
        INVALID_ARGUMENT{model=""}, "not a valid TranslateRequest", fails here.)
      - every other code a client saw with an answer from the server (OK, RESOURCE_EXHAUSTED, ...):
        S >= C. The server records an RPC's outcome before it sends it, so each of these is in S;
        S may hold more: calls whose client cancelled or timed out just after the server ended it.
      - CANCELLED and DEADLINE_EXCEEDED (the client gave up): bounded, not equal. The server may
        have ended such a call OK (just before the client's cancel or deadline), CANCELLED (a
        client's deadline reaches the server as a cancellation when the server's copy of the
        deadline, taken when the call arrived, is later than the client's by more than the
        service's 50 ms margin), DEADLINE_EXCEEDED, never have seen it (cancelled before it was
        sent), or have seen the call but not its request (then it cannot know the model: label
        ""). So, per method over all labels and per method for each loaded model:
            0 <= sum(S) - sum(C over the answered codes) <= C[CANCELLED] + C[DEADLINE_EXCEEDED],
            S[CANCELLED] + S[DEADLINE_EXCEEDED] <= C[CANCELLED] + C[DEADLINE_EXCEEDED].
        S[CANCELLED] - C[CANCELLED] (when > 0) is a lower bound of the client deadlines the server
        counted as cancellations; reported.
      - UNAVAILABLE: S == 0 (the second server is scraped before it is told to stop). Clients may
        have seen UNAVAILABLE in this window from their channel while it reconnected.
    Per model, against the engine's own counters (same process, exact but for the instant between
    a job's end and its RPC's end, which the scrape after the load cannot see):
      glossa_cancelled_total == sum over methods of S[CANCELLED],
      glossa_deadline_exceeded_total + glossa_refused_late_total == sum of S[DEADLINE_EXCEEDED]
        (jobs whose deadline passed while they decoded, and jobs answered early because they
        could not finish in time),
      glossa_rejected_total == sum of S[RESOURCE_EXHAUSTED].
    Internal consistency: glossa_request_duration_seconds_count == sum(S) per series;
    glossa_request_output_tokens_count == S[OK] and its _sum >= the best-hypothesis tokens (EOS
    excluded) of the OK responses the clients got, equal when S[OK] == C[OK]."""
    checks, failures, observations = [], [], {}

    def check(name, passed, **values):
        checks.append(f"{'ok' if passed else 'FAIL'}: {name} {json.dumps(values)}")
        if not passed:
            failures.append(f"metrics: {name}: {values}")

    server = request_counts(expo)
    answered = [code for code in CODES if code not in FLEX + ("UNAVAILABLE",)]
    series = sorted({(m, meth) for (m, meth, _) in server} | {(m, meth) for (m, meth, _) in client})

    def counts(table, labels, method):
        return {code: sum(table.get((m, method, code), 0) for m in labels) for code in CODES}

    def bounds(where, s, c):
        gave_up = c["CANCELLED"] + c["DEADLINE_EXCEEDED"]
        extra = sum(s.values()) - sum(c[code] for code in answered)
        check(f"{where}: 0 <= server total - client answered <= client gave up",
              0 <= extra <= gave_up, server_total=sum(s.values()),
              client_answered=sum(c[code] for code in answered), client_gave_up=gave_up,
              server_ok_minus_client_ok=s["OK"] - c["OK"],
              server_cancelled=s["CANCELLED"], client_cancelled=c["CANCELLED"],
              server_deadline_exceeded=s["DEADLINE_EXCEEDED"],
              client_deadline_exceeded=c["DEADLINE_EXCEEDED"])
        check(f"{where}: server CANCELLED+DEADLINE_EXCEEDED <= client's",
              s["CANCELLED"] + s["DEADLINE_EXCEEDED"] <= gave_up,
              server=s["CANCELLED"] + s["DEADLINE_EXCEEDED"], client=gave_up)

    for model, method in series:
        s, c = counts(server, [model], method), counts(client, [model], method)
        where = f"{model or '-'}/{method}"
        for code in ("INVALID_ARGUMENT", "NOT_FOUND"):
            if s[code] or c[code]:
                check(f"{where} {code}: server == client", s[code] == c[code],
                      server=s[code], client=c[code])
        for code in answered:
            if code in ("INVALID_ARGUMENT", "NOT_FOUND") or not (s[code] or c[code]):
                continue
            check(f"{where} {code}: server >= client", s[code] >= c[code],
                  server=s[code], client=c[code])
        check(f"{where} UNAVAILABLE: server == 0", s["UNAVAILABLE"] == 0, server=s["UNAVAILABLE"],
              client=c["UNAVAILABLE"])
        if model and method != "ListModels":  # the label "" may hold calls clients gave a model
            bounds(where, s, c)
        labels = dict(model=model, method=method)
        duration = expo.get("glossa_request_duration_seconds_count", **labels)
        if sum(s.values()):
            check(f"{where}: duration count == requests", duration == sum(s.values()),
                  duration_count=duration, requests=sum(s.values()))
        if model and method != "ListModels":
            count = expo.get("glossa_request_output_tokens_count", **labels) or 0
            total = expo.get("glossa_request_output_tokens_sum", **labels) or 0
            seen = client_tokens.get((model, method), 0)
            check(f"{where}: output_tokens count == OK", count == s["OK"], count=count,
                  server_ok=s["OK"])
            exact = s["OK"] == c["OK"]
            check(f"{where}: output_tokens sum {'==' if exact else '>='} client tokens",
                  total == seen if exact else total >= seen, server_sum=total, client_sum=seen)
    for method in ("Translate", "TranslateStream"):
        labels = [""] + list(models)
        s, c = counts(server, labels, method), counts(client, labels, method)
        bounds(f"all/{method}", s, c)
        observations[method] = dict(
            client_cancelled=c["CANCELLED"], server_cancelled=s["CANCELLED"],
            client_deadline_exceeded=c["DEADLINE_EXCEEDED"],
            server_deadline_exceeded=s["DEADLINE_EXCEEDED"],
            client_deadlines_counted_as_cancelled_at_least=max(0, s["CANCELLED"] - c["CANCELLED"]),
            answered_ok_after_client_gave_up=s["OK"] - c["OK"])
    for model in models:
        for metric, code in (("glossa_cancelled_total", "CANCELLED"),
                             ("glossa_deadline_exceeded_total+glossa_refused_late_total",
                              "DEADLINE_EXCEEDED"),
                             ("glossa_rejected_total", "RESOURCE_EXHAUSTED")):
            values = [expo.get(name, model=model) for name in metric.split("+")]
            engine = None if None in values else sum(values)
            rpcs = sum(server.get((model, m, code), 0) for m in ("Translate", "TranslateStream"))
            check(f"{model}: {metric} == RPCs {code}", engine == rpcs, engine=engine, rpcs=rpcs)
    return checks, failures, observations


class RssSampler(threading.Thread):
    def __init__(self):
        super().__init__(daemon=True)
        self.pid = None
        self.samples = []  # (monotonic, pid, bytes)
        self.done = threading.Event()

    def run(self):
        while not self.done.wait(1.0):
            pid = self.pid
            if pid:
                rss = vm_rss_bytes(pid)
                if rss:
                    self.samples.append((time.monotonic(), pid, rss))


def write_model_config(path, model_a_path, second_model):
    """The servers' --model_config (replaced at once, by rename, as a reload wants)."""
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        f.write(f"{MODEL_A}={model_a_path}\n{MODEL_B}={second_model}\n")
    os.replace(path + ".tmp", path)


def start_server(args, port, config):
    return tm.GlossaServer("--listen", f"127.0.0.1:{port}", "--model_config", config,
                           "--workers", str(args.workers), "--threads", str(args.threads),
                           "--shutdown_timeout", f"{args.shutdown_timeout}s",
                           "--max_queue", str(args.max_queue), models=())


def reload_model_a(server, args, config, second_model, tmp):
    """Points MODEL_A at another path to the same weights and sends SIGHUP: the server loads it
    and swaps it in under load (a new mapping, engine and result-cache generation; the outputs
    stay the expected ones). (ok, seconds until the reload was counted, why it failed)."""
    link = os.path.join(tmp, "model-a-reloaded.glossa")
    os.symlink(os.path.abspath(args.model), link)
    write_model_config(config, link, second_model)
    t = time.monotonic()
    server.proc.send_signal(signal.SIGHUP)
    while time.monotonic() - t < 120:
        expo = scrape_requests(server)
        if expo is not None:
            ok = expo.get("glossa_model_reloads_total", result="ok") or 0
            failed = expo.get("glossa_model_reloads_total", result="failed") or 0
            if ok or failed:
                return bool(ok) and not failed, time.monotonic() - t, "" if ok else "failed"
        if server.proc.poll() is not None:
            return False, time.monotonic() - t, f"the server exited with {server.proc.poll()}"
        time.sleep(0.2)
    return False, time.monotonic() - t, "no reload counted within 120 s"


def sigterm_and_wait(server, timeout):
    """SIGTERM, wait up to timeout; (exit code or None if it had to be killed, seconds taken)."""
    t = time.monotonic()
    server.proc.send_signal(signal.SIGTERM)
    try:
        code = server.proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        code = None
    took = time.monotonic() - t
    server.stop()  # closes its channel; SIGKILLs it if it is still there
    return code, took


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--server", default=os.environ.get("GLOSSA_SERVER", ""))
    p.add_argument("--model", default=tm.MODEL)
    p.add_argument("--shared", default=os.environ.get("GLOSSA_SHARED") or
                   os.path.join(REPO, "..", "shared"))
    p.add_argument("--clients", type=int, default=500, help="concurrent clients in all")
    p.add_argument("--duration", type=float, default=120, help="seconds of load")
    p.add_argument("--processes", type=int, default=2, help="client worker processes")
    p.add_argument("--clients_per_channel", type=int, default=50)
    p.add_argument("--reload_at", type=float, default=0.15,
                   help="replace model A (--model_config and SIGHUP) in the first server after "
                   "this share of --duration (before --restart_at)")
    p.add_argument("--restart_at", type=float, default=0.3,
                   help="SIGTERM the first server after this share of --duration")
    p.add_argument("--batch_share", type=float, default=0.25,
                   help="share of the translations sent with PRIORITY_BATCH (the batch lane)")
    p.add_argument("--restart_gap", type=float, default=1.0,
                   help="seconds between the first server's exit and the second's start")
    p.add_argument("--warmup", type=float, default=20,
                   help="seconds of load on the second server before its RSS reference")
    p.add_argument("--rss_tolerance", type=float, default=0.10)
    p.add_argument("--second_model", choices=["int8", "bfloat16", "copy"], default="int8",
                   help="the second model file: the shared Hugging Face model converted with "
                   "this --dtype, or a byte copy of --model")
    p.add_argument("--sentences", type=int, default=100, help="distinct sentences used")
    p.add_argument("--max_words", type=int, default=40, help="longest sentence used, in words")
    p.add_argument("--deadline", type=float, default=300, help="deadline of the normal calls, s")
    p.add_argument("--shutdown_timeout", type=float, default=120,
                   help="the servers' drain limit: every call in flight at SIGTERM must finish")
    p.add_argument("--max_queue", type=int, default=4096, help="the servers' --max_queue")
    p.add_argument("--workers", type=int, default=1, help="the servers' --workers")
    p.add_argument("--threads", type=int, default=1, help="the servers' --threads")
    p.add_argument("--seed", type=int, default=8)
    p.add_argument("--json", help="also write the summary to this file")
    p.add_argument("--quick", action="store_true",
                   help="a quick local check: 40 clients for 30 s, 8 s warm-up, 30 sentences")
    args = p.parse_args(argv)
    if args.quick:
        args.clients, args.duration, args.warmup, args.sentences = 40, 30, 8, 30
        args.processes = 1
    return args


def main(argv):
    args = parse_args(argv)
    if grpc is None:
        print(f"skipped: {sys.executable} has no grpcio: run with /usr/bin/python3")
        return SKIP
    if not args.server or not os.access(args.server, os.X_OK):
        print("skipped: set GLOSSA_SERVER (or --server) to a glossa-server binary (ctest does)")
        return SKIP
    dev_es = os.path.join(args.shared, "golden", "dev.es")
    if not os.path.exists(dev_es):
        print(f"skipped: needs the shared data: {dev_es} is absent (set GLOSSA_SHARED)")
        return SKIP
    for tool in (tm.PROTOC, tm.GRPC_PYTHON_PLUGIN):
        if not os.access(tool, os.X_OK):
            print(f"skipped: needs {tool} to generate the Python stubs")
            return SKIP
    tm.SERVER = args.server
    tmp = tempfile.mkdtemp(prefix="glossa-soak-")
    try:
        return run(args, dev_es, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run(args, dev_es, tmp):
    failures = []
    stub_dir = os.path.join(tmp, "stubs")
    os.makedirs(stub_dir)
    tm.generate_stubs(stub_dir)
    tm.import_stubs(stub_dir)
    second_model, second_about = make_second_model(args, tmp)
    log(f"second model file: {second_about}")

    sentences = read_sentences(dev_es, args.sentences, args.max_words, args.seed)
    port = tm.free_port()
    log(f"server 1 on 127.0.0.1:{port}: {args.server} ({MODEL_A}, {MODEL_B})")
    config = os.path.join(tmp, "models.conf")
    write_model_config(config, os.path.abspath(args.model), second_model)
    server = start_server(args, port, config)
    t = time.monotonic()
    expected, unstable, disagree = compute_expected(server, sentences,
                                                    second_about.startswith("byte copy"))
    log(f"expected outputs: {len(expected)} in {time.monotonic() - t:.1f} s; "
        f"{len(unstable)} sentences differ between batchings (left out)")
    sentences = [s for s in sentences if s not in unstable]
    last_ids = collections.Counter(k[0][1][-1] for k in expected.values() if k and k[0][1])
    eos_id = last_ids.most_common(1)[0][0]

    ctx = multiprocessing.get_context("spawn")  # no fork of a process that has used gRPC
    shared = Shared(ctx)
    results = ctx.Queue()
    cfg = dict(stub_dir=stub_dir, address=f"127.0.0.1:{port}", sentences=sentences, eos_id=eos_id,
               expected=[(m, p, s, want) for (m, p, s), want in expected.items()],
               seed=args.seed, deadline_s=args.deadline, short_deadline_s=(0.02, 40.0),
               cancel_after_s=(0.001, 40.0), fate_weights=[70, 15, 15],
               clients_per_channel=args.clients_per_channel, ramp_s=min(5.0, args.duration / 10),
               batch_share=args.batch_share)
    per = [args.clients // args.processes + (i < args.clients % args.processes)
           for i in range(args.processes)]
    workers = [ctx.Process(target=worker_main, args=(i, n, cfg, shared, results), daemon=True)
               for i, n in enumerate(per)]
    rss = RssSampler()
    rss.pid = server.proc.pid
    rss.start()

    summary = dict(config=dict(clients=args.clients, duration_s=args.duration,
                               client_processes=args.processes, sentences=len(sentences),
                               profiles=sorted(PROFILES),
                               models={MODEL_A: args.model, MODEL_B: second_about},
                               server=args.server, server_flags=server.args[1:],
                               restart_at_s=round(args.duration * args.restart_at, 1),
                               reload_at_s=round(args.duration * args.reload_at, 1),
                               batch_share=args.batch_share,
                               warmup_s=args.warmup, normal_deadline_s=args.deadline,
                               short_deadline_s_log_uniform=cfg["short_deadline_s"],
                               cancel_after_s_log_uniform=cfg["cancel_after_s"],
                               fates_percent=dict(zip(["normal", "deadline", "cancel"],
                                                      cfg["fate_weights"]))),
                   expected=dict(outputs=len(expected), unstable_sentences=len(unstable),
                                 differing_between_models=sum(
                                     want != expected.get((MODEL_A, p, t))
                                     for (m, p, t), want in expected.items() if m == MODEL_B),
                                 disagreements=disagree[:10]))
    cpu_server = {}
    t0 = time.monotonic()
    for w in workers:
        w.start()
    log(f"load: {args.clients} clients in {args.processes} processes for {args.duration} s")

    def wait_until(deadline, srv):
        while time.monotonic() < deadline:
            code = srv.proc.poll()
            if code is not None:
                return code
            time.sleep(0.2)
        return None

    # Phase 1: the first server under load, model A replaced in the middle (SIGHUP), then
    # SIGTERM while requests are in flight.
    died = wait_until(t0 + args.duration * min(args.reload_at, args.restart_at), server)
    if died is None:
        t_reload = time.monotonic()
        log(f"reload: {MODEL_A} -> another path to the same weights, SIGHUP to server 1")
        ok, took, why = reload_model_a(server, args, config, second_model, tmp)
        log(f"reload {'done' if ok else 'FAILED'} in {took:.1f} s")
        summary["reload"] = dict(at_s=round(t_reload - t0, 1), took_s=round(took, 2), ok=ok)
        if not ok:
            failures.append(f"the reload of {MODEL_A} under load failed ({why}):\n"
                            f"{server.output()[-3000:]}")
        died = wait_until(t0 + args.duration * args.restart_at, server)
    if died is not None:
        failures.append(f"server 1 exited by itself with {died}:\n{server.output()[-3000:]}")
        return finish(summary, failures, args, shared, workers, results, rss, None)
    pid1 = server.proc.pid
    before = scrape_requests(server)
    rss1 = vm_rss_bytes(pid1)
    cpu_server["server1"] = cpu_seconds(pid1)
    shared.phase.value = 2
    t_term = time.monotonic()
    log("SIGTERM to server 1 (draining)")
    code1, drain_s = sigterm_and_wait(server, args.shutdown_timeout + 30)
    log(f"server 1 exited with {code1} after {drain_s:.1f} s")
    summary["server1"] = dict(pid=pid1, exit_code=code1, drain_s=round(drain_s, 2),
                              sigterm_at_s=round(t_term - t0, 1), rss_bytes_at_sigterm=rss1,
                              requests_at_sigterm=sum(request_counts(before).values())
                              if before else None)
    if code1 != 0:
        failures.append(f"server 1 exit code on SIGTERM under load: {code1} (expected 0):\n"
                        f"{server.output()[-3000:]}")
    if "stopped" not in "\n".join(server.stdout_lines):
        failures.append("server 1 did not print 'glossa-server: stopped'")

    # Gap: clients get UNAVAILABLE and retry; then the second server on the same port.
    shared.phase.value = 3
    time.sleep(args.restart_gap)
    shared.t_spawn2.value = time.monotonic()
    t_spawn2 = time.monotonic()
    try:
        server = start_server(args, port, config)
    except AssertionError as e:
        failures.append(f"server 2 did not start on port {port}: {e}")
        return finish(summary, failures, args, shared, workers, results, rss, None)
    shared.phase.value = 4
    t_listen2 = time.monotonic()
    rss.pid = pid2 = server.proc.pid
    log(f"server 2 listening after {t_listen2 - t_spawn2:.1f} s (restart took "
        f"{t_listen2 - t_term:.1f} s from SIGTERM)")

    # Phase 2: warm-up, the RSS reference, the rest of the load, the RSS at its end.
    warm_at = t_listen2 + args.warmup
    died = wait_until(warm_at, server)
    rss_warm = vm_rss_bytes(pid2)
    end_at = max(t0 + args.duration, warm_at + 5)
    if died is None:
        died = wait_until(end_at, server)
    rss_end_load = vm_rss_bytes(pid2)
    if died is not None:
        failures.append(f"server 2 exited by itself with {died}:\n{server.output()[-3000:]}")
    summary["server2"] = dict(pid=pid2, start_s=round(t_spawn2 - t0, 1),
                              listening_after_s=round(t_listen2 - t_spawn2, 2),
                              unavailable_window_s=round(t_listen2 - t_term, 2),
                              load_after_start_s=round(end_at - t_listen2, 1))
    return finish(summary, failures, args, shared, workers, results, rss, server,
                  dict(rss_warm=rss_warm, rss_end_load=rss_end_load, t0=t0, end_at=end_at,
                       t_listen2=t_listen2, cpu_server=cpu_server))


def finish(summary, failures, args, shared, workers, results, rss, server, info=None):
    t_stop = time.monotonic()
    shared.stop.set()
    log("stopping the clients (each finishes its call)")
    collected = {}
    limit = time.monotonic() + args.deadline + 60
    while len(collected) < len(workers) and time.monotonic() < limit:
        try:
            i, out = results.get(timeout=1)
            collected[i] = out
        except Exception:  # noqa: BLE001 (queue.Empty)
            if all(not w.is_alive() for w in workers) and results.empty():
                break
    for w in workers:
        w.join(timeout=5)
        if w.is_alive():
            w.kill()
    if len(collected) < len(workers):
        failures.append(f"only {len(collected)} of {len(workers)} client processes reported")
    wind_down = time.monotonic() - t_stop
    log(f"clients done in {wind_down:.1f} s")

    merged = merge_stats(collected.values())
    summary["clients"] = client_summary(merged, collected.values(), info, wind_down)
    if merged["mismatch_count"]:
        failures.append(f"{merged['mismatch_count']} OK responses differ from the expected "
                        f"output, e.g. {merged['mismatches'][:3]}")
    if merged["unexpected_count"]:
        failures.append(f"{merged['unexpected_count']} unexpected outcomes, e.g. "
                        f"{merged['unexpected'][:3]}")
    if sum(merged["ok_by_method"].values()) == 0:
        failures.append("no request succeeded")

    if server is not None:
        rss_quiet = vm_rss_bytes(server.proc.pid)
        expo = scrape_requests(server)
        if expo is None:
            failures.append("cannot scrape the second server's metrics")
        else:
            client_s2 = collections.Counter()
            for (window, label, method, code), n in merged["calls"].items():
                if window == "s2":
                    client_s2[(label, method, code)] += n
            tokens_s2 = {(label, method): n for (window, label, method), n
                         in merged["ok_output_tokens"].items() if window == "s2"}
            checks, metric_failures, observations = compare_metrics(
                expo, client_s2, tokens_s2, [MODEL_A, MODEL_B])
            failures.extend(metric_failures)
            summary["metrics_server2"] = dict(
                requests_total={f"{m or '-'}/{meth}/{code}": n for (m, meth, code), n
                                in sorted(request_counts(expo).items())},
                clients_saw={f"{m or '-'}/{meth}/{code}": n
                             for (m, meth, code), n in sorted(client_s2.items())},
                engine={f"{name}{{{model}}}": expo.get(name, model=model)
                        for model in (MODEL_A, MODEL_B)
                        for name in ("glossa_cancelled_total", "glossa_deadline_exceeded_total",
                                     "glossa_refused_late_total", "glossa_rejected_total",
                                     "glossa_sentences_total")},
                process_resident_memory_bytes=expo.get("process_resident_memory_bytes"),
                gave_up_calls=observations,
                build_info=[labels for labels, _ in expo.series("glossa_build_info")][:1],
                checks_passed=sum(c.startswith("ok") for c in checks),
                checks_failed=sum(c.startswith("FAIL") for c in checks),
                checks=checks)
        cpu2 = cpu_seconds(server.proc.pid)
        code2, drain2 = sigterm_and_wait(server, args.shutdown_timeout + 30)
        summary["server2"].update(exit_code=code2, drain_s=round(drain2, 2))
        if code2 != 0:
            failures.append(f"server 2 exit code on SIGTERM: {code2} (expected 0):\n"
                            f"{server.output()[-3000:]}")
        warm, end = info["rss_warm"], info["rss_end_load"]
        growth = (end - warm) / warm if warm and end else None
        peak = max((b for t, p, b in rss.samples if p == server.proc.pid
                    and t >= info["t_listen2"] + args.warmup), default=None)
        summary["rss_server2"] = dict(
            after_warmup_bytes=warm, end_of_load_bytes=end, after_load_bytes=rss_quiet,
            peak_after_warmup_bytes=peak,
            growth_percent=round(100 * growth, 2) if growth is not None else None,
            tolerance_percent=100 * args.rss_tolerance,
            timeline_mib=[[round(t - info["t0"], 1), round(b / 2**20, 1)]
                          for t, p, b in rss.samples[::5]])
        if growth is None:
            failures.append("no RSS samples of the second server")
        elif abs(growth) > args.rss_tolerance:
            failures.append(f"second server's RSS moved {100 * growth:.1f} % between the end of "
                            f"the warm-up ({warm} B) and the end of the load ({end} B); limit "
                            f"{100 * args.rss_tolerance:.0f} %")
        load_s = info["end_at"] - info["t0"]
        summary["cpu"] = dict(
            cores=os.cpu_count(), load_seconds=round(load_s, 1),
            server1_cpu_s=info["cpu_server"].get("server1"), server2_cpu_s=cpu2,
            clients_cpu_s=round(sum(o.get("cpu_seconds", 0) for o in collected.values()), 1),
            clients_cores_used=round(sum(o.get("cpu_seconds", 0) for o in collected.values()) /
                                     (load_s + wind_down), 2))
    rss.done.set()
    summary["failures"] = failures
    summary["passed"] = not failures
    summary = headline(summary) | summary
    text = dumps(summary)
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text + "\n")
    log("PASSED" if not failures else f"FAILED: {len(failures)} failure(s)")
    return 0 if not failures else 1


def headline(summary):
    """The few numbers a note quotes, first."""
    c = summary.get("clients", {})
    r = summary.get("rss_server2", {})
    m = summary.get("metrics_server2", {})

    def mib(b):
        return round(b / 2**20, 1) if b else None
    return dict(headline=dict(
        passed=summary["passed"], requests=c.get("requests"),
        distinct_requests=c.get("distinct_requests"), ok=c.get("ok"),
        errors_by_code=c.get("errors_by_code"),
        client_cancellations_effective=c.get("client_cancellations", {}).get("took_effect"),
        cancelled_without_client_cancel=dict(
            by_first_server_shutdown=c.get("cancelled_by_first_server_shutdown"),
            at_a_deadline=c.get("cancelled_at_deadline_without_client_cancel")),
        responses_checked=sum(c.get("responses_checked", {}).values()),
        mismatches=c.get("mismatches"),
        exit_codes=[summary.get("server1", {}).get("exit_code"),
                    summary.get("server2", {}).get("exit_code")],
        rss_after_warmup_mib=mib(r.get("after_warmup_bytes")),
        rss_end_of_load_mib=mib(r.get("end_of_load_bytes")),
        rss_growth_percent=r.get("growth_percent"),
        metric_checks=f"{m.get('checks_passed')} passed, {m.get('checks_failed')} failed"))


def dumps(value, indent=0):
    """JSON with one key per line, but lists of scalars (and of short lists) on one line."""
    pad = " " * (indent + 1)
    flat = (str, int, float, bool, type(None))
    if isinstance(value, dict) and value:
        items = [f"{pad}{json.dumps(str(k))}: {dumps(v, indent + 1)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + " " * indent + "}"
    if isinstance(value, (list, tuple)) and value and (len(json.dumps(value)) > 100 and any(
            isinstance(v, str) for v in value) or not all(
            isinstance(v, flat) or (isinstance(v, (list, tuple)) and
                                    all(isinstance(x, flat) for x in v)) for v in value)):
        items = [pad + dumps(v, indent + 1) for v in value]
        return "[\n" + ",\n".join(items) + "\n" + " " * indent + "]"
    return json.dumps(value, ensure_ascii=False)


def merge_stats(outs):
    m = dict(calls=collections.Counter(), by_phase=collections.Counter(),
             fates=collections.Counter(), client_cancels=collections.Counter(),
             ok_output_tokens=collections.Counter(), checked=collections.Counter(),
             retries=collections.Counter(), mismatches=[], unexpected=[], mismatch_count=0,
             unexpected_count=0, latency_ok=[], ok_by_method=collections.Counter(),
             deadline_as_cancelled=0, shutdown_cancelled=0)
    for out in outs:
        for key in ("calls", "by_phase", "fates", "client_cancels", "ok_output_tokens",
                    "checked", "retries"):
            for *k, v in out[key]:
                m[key][tuple(k) if len(k) > 1 else k[0]] += v
        for key in ("mismatches", "unexpected", "latency_ok"):
            m[key].extend(out[key])
        m["mismatch_count"] += out["mismatch_count"]
        m["deadline_as_cancelled"] += out["deadline_as_cancelled"]
        m["shutdown_cancelled"] += out["shutdown_cancelled"]
        m["unexpected_count"] += out["unexpected_count"]
    for (window, label, method, code), n in m["calls"].items():
        if code == "OK":
            m["ok_by_method"][method] += n
    return m


def client_summary(m, outs, info, wind_down):
    by_code = collections.Counter()
    by_method = collections.Counter()
    for (window, label, method, code), n in m["calls"].items():
        by_code[code] += n
        by_method[method] += n
    by_phase = collections.defaultdict(dict)
    for (phase, code), n in sorted(m["by_phase"].items()):
        by_phase[phase][code] = n
    fates = collections.defaultdict(dict)
    for (fate, code), n in sorted(m["fates"].items()):
        fates[fate][code] = n
    lat = sorted(m["latency_ok"])

    def pct(q):
        return lat[min(len(lat) - 1, int(q * len(lat)))] if lat else None
    total = sum(by_code.values())
    retried = sum(m["retries"].values())
    return dict(
        requests=total, distinct_requests=total - retried, ok=by_code.get("OK", 0),
        errors_by_code={c: n for c, n in sorted(by_code.items()) if c != "OK"},
        by_method=dict(sorted(by_method.items())),
        by_start_phase=by_phase, by_fate=fates,
        client_cancellations=dict(
            requested=sum(m["client_cancels"].values()),
            took_effect=sum(n for (w, won), n in m["client_cancels"].items() if won),
            too_late_already_done=sum(n for (w, won), n in m["client_cancels"].items()
                                      if not won)),
        retries=dict(m["retries"]),
        responses_checked=dict(m["checked"]), mismatches=m["mismatch_count"],
        mismatch_examples=m["mismatches"][:10],
        unexpected=m["unexpected_count"], unexpected_examples=m["unexpected"][:10],
        cancelled_at_deadline_without_client_cancel=m["deadline_as_cancelled"],
        cancelled_by_first_server_shutdown=m["shutdown_cancelled"],
        requests_per_s=round(total / ((info["end_at"] - info["t0"]) + wind_down), 1)
        if info else None,
        latency_ok_normal_s=dict(p50=pct(0.5), p90=pct(0.9), p99=pct(0.99),
                                 max=lat[-1] if lat else None),
        wind_down_s=round(wind_down, 1))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
