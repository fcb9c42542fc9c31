#!/usr/bin/python3
"""Glossa and CTranslate2 side by side: the same model, the same input, alternately, one run.

    /usr/bin/python3 tests/bench/peer_compare.py [--models demo,opus-mt-base] [--json FILE]
        [--compute_types float32,int8,bfloat16] [--quantize_at_load] [--beams 1,4]
        [--batches 32,1] [--threads 1,2]
        [--sentences N] [--sentences_batch1 N] [--repeats 3] [--work_dir /tmp/glossa-peer]

For every cell (model x compute type x cores x beam x batch) each engine translates the same lines
in its own fresh process, the engines taking turns (Glossa first on even repeats, the peer first
on odd ones), --repeats times; the table shows the median of each engine's target tokens/s and the
ratio Glossa / CTranslate2, with each engine's peak RSS, peak RSS of the load, RSS after the load
and model load time (file to first translation) of its median run, and the target tokens each
produced.

Engines: Glossa through build/glossa-peer-run (tests/bench/peer_run_main.cc: Model::Load, one
Engine, every line in one job, longest first, as glossa-translate and glossa-server translate);
CTranslate2 4.8.1 from ../shared/peer/ctranslate2 through tests/bench/peer_ct2_run.py (its
translate_batch over every line; it sorts them by length itself). Both drivers time the same
steps: load, the first line alone (greedy, at most 16 tokens: the load figure), a warm-up (as
many lines as the workers decode at once, at most 16 tokens each: it makes the primitives for the
cell's row counts), then the timed run over all lines. Before each run the engine's model file
(CTranslate2: its model directory) is read once, so that every load starts from the page cache
(this VM's cache dropped files between runs); the log line gives that read's seconds.

Cells:
  compute type  float32: both float32. int8: CTranslate2's int8 (int8 weights, float32 elsewhere)
                against Glossa's int8 (two u8 codes per activation) and, in a row of its own,
                against Glossa's int8_fast (one code); both read int8 model files, or with
                --quantize_at_load both read the float32 files and quantize them as they load.
                bfloat16: Glossa's bfloat16 from the float32 file against CTranslate2's float32
                (CTranslate2 4.8.1 offers no bfloat16 on CPUs: get_supported_compute_types).
  cores         1: one worker of one thread each. 2: the best use of 2 cores of each:
                CTranslate2 --inter_threads 2 --threads 1 (two workers; its README), Glossa's
                engine with 2 workers x 1 thread (what glossa-server runs on 2 cores, --workers 0).
                "WxT" gives workers x threads for both.
  beam, batch   beam 1 (greedy) and 4; at most 32 or 1 sentences decoded together per worker.
                Neither engine computes scores (CTranslate2's default; glossa-server's unless a
                request asks): Glossa's greedy steps of at most 64 rows then take their tokens
                from the output projection's ArgMaxScreen (runtime/ops/argmax_screen.h; its
                int8 copy counts in Glossa's peak RSS; per-run lines show its rows and the
                candidates per row).

Models:
  demo          ../shared/models/opus-mt-es-en-bible (real weights); input: the first --sentences
                lines of ../shared/corpus/dev.es; natural output length (at most 256 tokens).
  opus-mt-base, opus-mt-big, nllb-600m
                made by model_tools/glossa-make-shape (seeded random weights, the released
                shapes); input: the same dev lines. Random weights make outputs degenerate, so the
                length is fixed (--fixed_length, 64): end of sentence is banned before 64 tokens in
                both engines (min_output_tokens / min_decoding_length) and 64 is the limit, so each
                sentence gets exactly 64 tokens in each engine. These models carry Hugging Face's
                forced_eos_token_id, which Glossa honours (CTranslate2 does not): Glossa's limit is
                65 with the 65th token the forced end of sentence, not counted, so Glossa runs one
                decoder step more per sentence (1/65 of the work) for the same 64 tokens.
                nllb-600m: spa_Latn -> eng_Latn, no forced end of sentence; the target language
                token (Glossa: forced first token; CTranslate2: target prefix) is within both
                limits and in neither count.
Models are converted once and kept under --work_dir: glossa-convert (float32 and --dtype int8)
and the peer's hf_to_ct2.py (float32 and --quantization int8).

Memory: peak RSS is the whole process's (VmHWM / ru_maxrss) at the end of the run; load peak
the same just after the first translation (Glossa's is reset before its model loads, so it
leaves out glossa-peer-run's memory probe; CTranslate2's includes the Python imports); after
load: VmRSS then. All of the median run.

GEMM roofline (Glossa column): the share of the machine's fp32 FMA peak (x4 for int8) that the
cell's matrix products reach, as glossa-bench's gemm_roofline_share but from the model's own
shape and counting every beam row. The peak is measured: each glossa-peer-run times one core's
fp32 multiply-add chains just before its timed run (fma_peak_gflops; this host's clock moves
within minutes), and the cell divides by its median run's figure (117 GFLOP/s per core, the
figure NOTES-debian.md gives for its machine, only where a run reports none):
  FLOP = decoder_rows x 2 x (dec_layers x (6 d^2 + 2 d ffn) + d vocab)
       + source_tokens x 2 x (enc_layers x (4 d^2 + 2 d ffn) + dec_layers x 2 d^2)
over the timed seconds (decoder_rows: the rows Glossa's decoder computed, one per active beam per
step, as glossa-peer-run reports them; target_tokens x beam where a run reports none), divided by
(peak x workers x threads). Attention scores are left out.
The table's "peak" column gives the measured GFLOP/s per core.
For the demo model, greedy, it equals glossa-bench's figure.

Memory (Glossa's per-run lines and its runs in --json): each glossa-peer-run first reads a fresh
128 MiB mapping in order (read_gbps) and chases a chain through its cache lines in random order
(chase_ns per load), before its model loads. On the 2-core VM Glossa's float32 speed swings by
up to 2x between processes while the FMA peak stays put: these say whether the memory moved too.
Just before its timed run it also reads the output projection's weights as the products read
them (the packed copy; projection_read_gbps): packed weights, the kind of memory whose loads
stall in slow runs.

Decoder rows (--count_rows): beam search's work is its decoder rows, and the engines' stopping
rules differ: Glossa ends a sentence where Hugging Face's generate() does (the model's
early_stopping, false for Marian: after `beam` finished hypotheses, only once the best running
one cannot beat them), CTranslate2 once `beam` hypotheses are finished. With --count_rows the
peer's first run of each cell also counts its rows (peer_ct2_run.py --decoder_rows: an untimed
second pass), and the table gives each engine's decoder rows per target token (not for
nllb-600m: the peer's target prefix steps are not counted there).

Skips (exit 0, a line saying why) when ../shared/peer/ctranslate2 is not there or the peer cannot
be imported (it needs Debian's python3-sentencepiece and python3-numpy).
"""
import argparse
import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PYTHON = "/usr/bin/python3"
SHAPES = ("opus-mt-base", "opus-mt-big", "nllb-600m")
# (sentences for batch > 1, sentences for batch 1): defaults sized for ~10 min (demo) and ~15 min
# (opus-mt-base) on the project's 2-core machine with every default cell (see docs/performance.md).
DEFAULT_SENTENCES = {"demo": (300, 100), "opus-mt-base": (64, 4), "opus-mt-big": (64, 2),
                     "nllb-600m": (64, 2)}
LANGUAGES = {"nllb-600m": ("spa_Latn", "eng_Latn")}
FALLBACK_PEAK_FLOP_PER_CORE = 117e9  # NOTES-debian.md, for runs that report no measured peak
FIRST_MAX_TOKENS = 16


def log(msg):
    print("peer_compare: " + msg, file=sys.stderr, flush=True)


def skip(reason):
    print("peer_compare: skipped: " + reason)
    sys.exit(0)


def csv(text, kind=str):
    return [kind(x) for x in text.split(",") if x.strip()]


def run_checked(cmd, env=None, what=""):
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("peer_compare: %s failed (exit %d): %s\n%s" % (what or cmd[0], r.returncode,
                                                                 " ".join(map(str, cmd)), r.stderr[-3000:]))
    return r


# ----------------------------------------------------------------------------------------------
# The peer's environment

def peer_env(peer_dir, work_dir, wait_policy):
    """PYTHONPATH and LD_LIBRARY_PATH as the peer's env.sh sets them. Where lib/'s symlinks came
    through as small text files (a copy that does not keep links), links are made in the work
    dir and put first."""
    env = dict(os.environ)
    lib = peer_dir / "lib"
    libs = [str(lib)]
    real = sorted(lib.glob("libctranslate2.so.*.*.*"))
    broken = [p for p in (lib / "libctranslate2.so.4", lib / "libctranslate2.so")
              if p.exists() and not p.is_symlink() and p.stat().st_size < 1024]
    if real and broken:
        fixed = work_dir / "ct2lib"
        fixed.mkdir(parents=True, exist_ok=True)
        for p in broken:
            link = fixed / p.name
            if not link.is_symlink():
                link.symlink_to(real[-1])
        libs.insert(0, str(fixed))
    env["PYTHONPATH"] = os.pathsep.join([str(peer_dir / "python")] +
                                        ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env["LD_LIBRARY_PATH"] = os.pathsep.join(libs + ([env["LD_LIBRARY_PATH"]]
                                                      if env.get("LD_LIBRARY_PATH") else []))
    env["CT2_HOME"] = str(peer_dir)
    env["OMP_WAIT_POLICY"] = wait_policy
    return env


def check_peer(env):
    r = subprocess.run([PYTHON, "-c", "import sys; sys.modules['torch'] = None; "
                        "import ctranslate2, sentencepiece; print(ctranslate2.__version__)"],
                       env=env, capture_output=True, text=True)
    if r.returncode != 0:
        last = (r.stderr.strip().splitlines() or ["?"])[-1]
        skip("the peer does not import (%s); it needs Debian's python3-sentencepiece and "
             "python3-numpy (apt-get install python3-sentencepiece python3-numpy)" % last)
    return r.stdout.strip()


# ----------------------------------------------------------------------------------------------
# Models

def hf_config(hf_dir):
    with open(hf_dir / "config.json", encoding="utf-8") as f:
        config = json.load(f)
    generation = {}
    if (hf_dir / "generation_config.json").exists():
        with open(hf_dir / "generation_config.json", encoding="utf-8") as f:
            generation = json.load(f)
    return config, generation


def flop_per_token(config):
    d = config["d_model"]
    enc, dec = config["encoder_layers"], config["decoder_layers"]
    ffn_e, ffn_d = config["encoder_ffn_dim"], config["decoder_ffn_dim"]
    vocab = config.get("decoder_vocab_size") or config["vocab_size"]
    target = 2 * (dec * (6 * d * d + 2 * d * ffn_d) + d * vocab)
    source = 2 * (enc * (4 * d * d + 2 * d * ffn_e) + dec * 2 * d * d)
    return target, source


def cached(path, make):
    """Runs make(tmp_path) unless `path` exists; the result is renamed into place."""
    if path.exists():
        return path
    tmp = path.with_name(path.name + ".tmp")
    if tmp.is_dir():
        shutil.rmtree(tmp)
    elif tmp.exists():
        tmp.unlink()
    t0 = time.time()
    make(tmp)
    tmp.rename(path)
    log("made %s (%.1f s)" % (path, time.time() - t0))
    return path


def prepare_model(name, args, env, need_int8, peer=True):
    """The model's Hugging Face dir, its converted files (Glossa's, and the peer's unless
    peer=False) and their sizes in bytes."""
    work = args.work_dir / name
    work.mkdir(parents=True, exist_ok=True)
    if name == "demo":
        hf_dir = args.shared_dir / "models" / "opus-mt-es-en-bible"
        if not (hf_dir / "config.json").exists():
            sys.exit("peer_compare: %s missing" % hf_dir)
    else:
        hf_dir = cached(work / "hf", lambda out: run_checked(
            [PYTHON, str(ROOT / "model_tools" / "glossa-make-shape"), "--shape", name,
             "--output", str(out), "--templates", str(args.shared_dir / "models")],
            what="glossa-make-shape"))
    convert = str(ROOT / "model_tools" / "glossa-convert")
    hf_to_ct2 = str(args.peer_dir / "hf_to_ct2.py")
    files = {"glossa-float32": cached(work / "glossa-float32.glossa", lambda out: run_checked(
        [PYTHON, convert, "--input", str(hf_dir), "--output", str(out)], what="glossa-convert"))}
    if peer:
        files["ct2-float32"] = cached(work / "ct2-float32", lambda out: run_checked(
            [PYTHON, hf_to_ct2, str(hf_dir), str(out)], env=env, what="hf_to_ct2.py"))
    if need_int8:
        files["glossa-int8"] = cached(work / "glossa-int8.glossa", lambda out: run_checked(
            [PYTHON, convert, "--input", str(hf_dir), "--output", str(out), "--dtype", "int8"],
            what="glossa-convert --dtype int8"))
        if peer:
            files["ct2-int8"] = cached(work / "ct2-int8", lambda out: run_checked(
                [PYTHON, hf_to_ct2, str(hf_dir), str(out), "--quantization", "int8"], env=env,
                what="hf_to_ct2.py --quantization int8"))
    sizes = {k: (v.stat().st_size if v.is_file() else sum(p.stat().st_size for p in v.rglob("*")
                                                           if p.is_file()))
             for k, v in files.items()}
    return hf_dir, files, sizes


def input_file(args, count):
    path = args.work_dir / ("input-%d.txt" % count)
    with open(args.input, encoding="utf-8") as f:
        lines = [line.rstrip("\n") for line in f if line.strip()]
    if count > len(lines):
        log("%s has %d lines; using all of them" % (args.input, len(lines)))
        count = len(lines)
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(line + "\n" for line in lines[:count])
    return path, count


# ----------------------------------------------------------------------------------------------
# Runs

def parse_cores(text):
    if "x" in text:
        workers, threads = text.split("x")
        return int(workers), int(threads)
    n = int(text)
    return (1, 1) if n == 1 else (n, 1)


def read_into_page_cache(path):
    """Reads the model file (or every file of the model directory) once, so that both engines'
    loads start from the page cache: this VM's page cache dropped model files between runs, which
    made some loads disk reads. Returns the seconds it took (well over 1 s: it came from disk)."""
    path = Path(path)
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    t0 = time.time()
    for name in files:
        with open(name, "rb", buffering=0) as f:
            while f.read(16 << 20):
                pass
    return round(time.time() - t0, 3)


def model_path(cmd):
    return cmd[cmd.index("--model") + 1]


def run_engine(cmd, env, timeout):
    pre_read_s = read_into_page_cache(model_path(cmd))
    t0 = time.time()
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError("exit %d: %s\n%s" % (r.returncode, " ".join(cmd), r.stderr[-2000:]))
    for line in reversed(r.stderr.strip().splitlines()):
        if line.startswith("{"):
            report = json.loads(line)
            report["process_s"] = round(time.time() - t0, 3)
            report["model_pre_read_s"] = pre_read_s
            return report
    raise RuntimeError("no JSON line from %s:\n%s" % (" ".join(cmd), r.stderr[-2000:]))


def rows_per_token(cell):
    """Each engine's decoder rows per target token, "G / C" (- where not counted)."""
    def per_token(rows, tokens):
        return "%.2f" % (rows / tokens) if rows and tokens else "-"
    return "%s / %s" % (per_token(cell.get("glossa_decoder_rows"), cell["glossa_target_tokens"]),
                        per_token(cell.get("ct2_decoder_rows"), cell["ct2_target_tokens"]))


def median_run(runs):
    """The run with the median tokens/s (the lower middle one for an even count)."""
    ordered = sorted(runs, key=lambda r: r["target_tokens_per_s"])
    return ordered[(len(ordered) - 1) // 2]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="demo", help="demo, opus-mt-base, opus-mt-big, nllb-600m")
    ap.add_argument("--compute_types", default="float32,int8",
                    help="float32, int8 (Glossa's int8 and int8_fast against CTranslate2's int8), "
                    "bfloat16")
    ap.add_argument("--quantize_at_load", action="store_true",
                    help="int8 cells read the float32 model files (both engines quantize at load)")
    ap.add_argument("--beams", default="1,4")
    ap.add_argument("--batches", default="32,1")
    ap.add_argument("--threads", default="1,2",
                    help="cores: 1 (one worker, one thread), 2 (2 workers x 1 thread), or WxT")
    ap.add_argument("--sentences", type=int, default=0,
                    help="input lines for batch > 1 cells (default per model: demo %d, "
                    "opus-mt-base %d, opus-mt-big and nllb-600m %d)" % (
                        DEFAULT_SENTENCES["demo"][0], DEFAULT_SENTENCES["opus-mt-base"][0],
                        DEFAULT_SENTENCES["nllb-600m"][0]))
    ap.add_argument("--sentences_batch1", type=int, default=0,
                    help="input lines for batch 1 cells (default per model: demo %d, "
                    "opus-mt-base %d, opus-mt-big and nllb-600m %d)" % (
                        DEFAULT_SENTENCES["demo"][1], DEFAULT_SENTENCES["opus-mt-base"][1],
                        DEFAULT_SENTENCES["nllb-600m"][1]))
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--count_rows", action="store_true",
                    help="also count CTranslate2's decoder rows (an untimed pass in its first run "
                    "of each cell) and show rows per token")
    ap.add_argument("--fixed_length", type=int, default=64,
                    help="tokens per sentence for the random-weight shapes (demo: natural length)")
    ap.add_argument("--max_output_tokens", type=int, default=256, help="limit at natural length")
    ap.add_argument("--json", type=Path, help="write every figure here")
    ap.add_argument("--work_dir", type=Path, default=Path("/tmp/glossa-peer"))
    ap.add_argument("--build_dir", type=Path, default=ROOT / "build")
    ap.add_argument("--shared_dir", type=Path, default=ROOT.parent / "shared")
    ap.add_argument("--peer_dir", type=Path, help="default: SHARED/peer/ctranslate2")
    ap.add_argument("--input", type=Path, help="default: SHARED/corpus/dev.es")
    ap.add_argument("--omp_wait_policy", default=os.environ.get("OMP_WAIT_POLICY", "PASSIVE"),
                    help="for both engines (default PASSIVE, as the peer's env.sh and glossa-server)")
    ap.add_argument("--timeout", type=int, default=1800, help="seconds per engine run")
    args = ap.parse_args()

    args.peer_dir = args.peer_dir or args.shared_dir / "peer" / "ctranslate2"
    args.input = args.input or args.shared_dir / "corpus" / "dev.es"
    if not (args.shared_dir / "peer").is_dir():
        skip("%s is absent: no CTranslate2 to compare with" % (args.shared_dir / "peer"))
    if not (args.peer_dir / "run.py").exists():
        skip("%s holds no CTranslate2 (run.py missing)" % args.peer_dir)
    glossa_run = args.build_dir / "glossa-peer-run"
    if not glossa_run.exists():
        sys.exit("peer_compare: %s missing: cmake --build %s --target glossa-peer-run" %
                 (glossa_run, args.build_dir))
    models = csv(args.models)
    for m in models:
        if m != "demo" and m not in SHAPES:
            sys.exit("peer_compare: unknown model %s (demo, %s)" % (m, ", ".join(SHAPES)))
    compute_types = csv(args.compute_types)
    for c in compute_types:
        if c not in ("float32", "int8", "bfloat16"):
            sys.exit("peer_compare: --compute_types: float32, int8 or bfloat16, not %s" % c)
    beams, batches = csv(args.beams, int), csv(args.batches, int)
    cores = [parse_cores(c) for c in csv(args.threads)]

    args.work_dir.mkdir(parents=True, exist_ok=True)
    env = peer_env(args.peer_dir, args.work_dir, args.omp_wait_policy)
    ct2_version = check_peer(env)
    glossa_env = dict(os.environ, OMP_WAIT_POLICY=args.omp_wait_policy)
    ct2_run = str(ROOT / "tests" / "bench" / "peer_ct2_run.py")

    report = {
        "started_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": {"nproc": os.cpu_count(), "cpu": cpu_model(), "platform": platform.platform(),
                    "load_average_at_start": os.getloadavg()[0]},
        "ctranslate2_version": ct2_version, "omp_wait_policy": args.omp_wait_policy,
        "repeats": args.repeats,
        "args": {k: str(v) for k, v in vars(args).items()}, "models": {}, "cells": [],
    }
    tables = []
    for name in models:
        t_model = time.time()
        hf_dir, files, sizes = prepare_model(name, args, env,
                                             "int8" in compute_types and not args.quantize_at_load)
        config, generation = hf_config(hf_dir)
        target_flop, source_flop = flop_per_token(config)
        forced_eos = generation.get("forced_eos_token_id", config.get("forced_eos_token_id"))
        fixed = 0 if name == "demo" else args.fixed_length
        langs = LANGUAGES.get(name)
        default_n, default_n1 = DEFAULT_SENTENCES[name]
        n_batch = args.sentences or default_n
        n_batch1 = args.sentences_batch1 or (args.sentences if args.sentences else default_n1)
        report["models"][name] = {
            "hf_dir": str(hf_dir), "files": {k: str(v) for k, v in files.items()},
            "file_bytes": sizes, "target_flop_per_token": target_flop,
            "source_flop_per_token": source_flop, "fixed_length": fixed,
            "forced_eos_token_id": forced_eos, "languages": langs,
        }
        # Length options of each engine (see the docstring).
        if fixed:
            extra = 1 if langs else 0  # the forced target language token, generated, not counted
            g_len = ["--max_output_tokens", str(fixed + extra + (1 if forced_eos is not None else 0)),
                     "--min_output_tokens", str(fixed + extra)]
            # CTranslate2's max/min_decoding_length count its target prefix (the language) too.
            c_len = ["--max_output_tokens", str(fixed + extra), "--min_output_tokens", str(fixed + extra)]
        else:
            g_len = ["--max_output_tokens", str(args.max_output_tokens)]
            c_len = ["--max_output_tokens", str(args.max_output_tokens)]
        g_lang = ["--source_language", langs[0], "--target_language", langs[1]] if langs else []
        c_lang = ["--source_prefix", langs[0], "--target_prefix", langs[1]] if langs else []
        rows = []
        for compute in compute_types:
            if compute == "float32":
                variants = [("float32", files["glossa-float32"], "float32")]
                ct2_model, ct2_type = files["ct2-float32"], "float32"
            elif compute == "bfloat16":
                variants = [("bfloat16", files["glossa-float32"], "bfloat16")]
                ct2_model, ct2_type = files["ct2-float32"], "float32"
            elif args.quantize_at_load:
                variants = [("int8", files["glossa-float32"], "int8"),
                            ("int8_fast", files["glossa-float32"], "int8_fast")]
                ct2_model, ct2_type = files["ct2-float32"], "int8"
            else:
                variants = [("int8", files["glossa-int8"], "int8"),
                            ("int8_fast", files["glossa-int8"], "int8_fast")]
                ct2_model, ct2_type = files["ct2-int8"], "int8"
            for workers, threads in cores:
                for beam in beams:
                    for batch in batches:
                        count = n_batch1 if batch == 1 else n_batch
                        source, count = input_file(args, count)
                        common = ["--input", str(source), "--beam_size", str(beam),
                                  "--batch_size", str(batch), "--threads", str(threads),
                                  "--warmup", str(min(count, batch * workers)),
                                  "--warmup_max_output_tokens", str(FIRST_MAX_TOKENS),
                                  "--first_max_output_tokens", str(FIRST_MAX_TOKENS)]
                        commands = []
                        for label, path, ctype in variants:
                            commands.append(("glossa:" + label, glossa_env,
                                             [str(glossa_run), "--model", str(path),
                                              "--compute_type", ctype, "--workers", str(workers)]
                                             + common + g_len + g_lang))
                        commands.append(("ctranslate2", env,
                                         [PYTHON, ct2_run, "--model", str(ct2_model),
                                          "--compute_type", ct2_type,
                                          "--inter_threads", str(workers)] + common + c_len + c_lang))
                        runs = {key: [] for key, _, _ in commands}
                        for rep in range(max(1, args.repeats)):
                            order = commands if rep % 2 == 0 else list(reversed(commands))
                            for key, run_env, cmd in order:
                                if (key == "ctranslate2" and rep == 0 and args.count_rows
                                        and "--target_prefix" not in cmd):
                                    cmd = cmd + ["--decoder_rows"]
                                r = run_engine(cmd, run_env, args.timeout)
                                r["load_average_1m"] = os.getloadavg()[0]
                                runs[key].append(r)
                                log("%s %s %dx%d beam %d batch %d, run %d, %s: %.1f tokens/s, "
                                    "%d tokens, %.1f s, load %.2f s (model file read %.2f s before)"
                                    % (name, compute, workers, threads, beam, batch, rep + 1, key,
                                       r["target_tokens_per_s"], r["target_tokens"],
                                       r["process_s"], r["first_translation_s"],
                                       r["model_pre_read_s"])
                                    + ("; memory %.1f GB/s, %.0f ns a random load"
                                       % (r["read_gbps"], r["chase_ns"]) if "chase_ns" in r else "")
                                    + ("; output projection read %.1f GB/s"
                                       % r["projection_read_gbps"]
                                       if "projection_read_gbps" in r else "")
                                    + ("; argmax screen (%.0f MB): %d rows, %.2f candidates each"
                                       % (r["screen_mb"], r["screened_rows"],
                                          r["candidates_per_screened_row"])
                                       if r.get("screened_rows") else ""))
                        peer = median_run(runs["ctranslate2"])
                        for label, _, _ in variants:
                            mine = median_run(runs["glossa:" + label])
                            rows_g = mine.get("decoder_rows", mine["target_tokens"] * beam)
                            rows_c = next((r["decoder_rows"] for r in runs["ctranslate2"]
                                           if "decoder_rows" in r), None)
                            flop = rows_g * target_flop + mine["source_tokens"] * source_flop
                            core_peak = (mine.get("fma_peak_gflops") or 0) * 1e9 or \
                                FALLBACK_PEAK_FLOP_PER_CORE
                            peak = core_peak * workers * threads * (4 if "int8" in label else 1)
                            counts = {key: sorted({r["target_tokens"] for r in rs})
                                      for key, rs in runs.items()}
                            cell = {
                                "model": name, "compute_type": compute,
                                "glossa_compute_type": label, "ct2_compute_type": peer["compute_type"],
                                "workers": workers, "threads": threads, "beam_size": beam,
                                "batch_size": batch, "sentences": count,
                                "glossa_tokens_per_s": mine["target_tokens_per_s"],
                                "ct2_tokens_per_s": peer["target_tokens_per_s"],
                                "ratio": round(mine["target_tokens_per_s"] / peer["target_tokens_per_s"], 3),
                                "glossa_gemm_roofline_share": round(flop / mine["wall_s"] / peak, 4),
                                "fma_peak_gflops_per_core": round(core_peak * 1e-9, 1),
                                "glossa_peak_rss_mb": mine["peak_rss_mb"],
                                "ct2_peak_rss_mb": peer["peak_rss_mb"],
                                "glossa_load_peak_rss_mb": mine.get("peak_rss_after_load_mb"),
                                "ct2_load_peak_rss_mb": peer.get("peak_rss_after_load_mb"),
                                "glossa_rss_after_load_mb": mine.get("rss_after_load_mb"),
                                "ct2_rss_after_load_mb": peer.get("rss_after_load_mb"),
                                "quantized_at_load": compute == "bfloat16" or (
                                    compute == "int8" and args.quantize_at_load),
                                "glossa_first_translation_s": mine["first_translation_s"],
                                "ct2_first_translation_s": peer["first_translation_s"],
                                "glossa_target_tokens": mine["target_tokens"],
                                "ct2_target_tokens": peer["target_tokens"],
                                "glossa_decoder_rows": rows_g, "ct2_decoder_rows": rows_c,
                                "source_tokens": [mine["source_tokens"], peer["source_tokens"]],
                                "tokens_equal": (counts["glossa:" + label] == counts["ctranslate2"]
                                                 and len(counts["ctranslate2"]) == 1),
                                "glossa_tokens_per_s_all": [r["target_tokens_per_s"]
                                                            for r in runs["glossa:" + label]],
                                "ct2_tokens_per_s_all": [r["target_tokens_per_s"]
                                                         for r in runs["ctranslate2"]],
                                "glossa_runs": runs["glossa:" + label],
                                "ct2_runs": runs["ctranslate2"],
                            }
                            rows.append(cell)
                            report["cells"].append(cell)
                            if args.json:
                                write_json(args.json, report)
        elapsed = time.time() - t_model
        report["models"][name]["seconds"] = round(elapsed, 1)
        table = format_table(name, rows, report["models"][name], n_batch, n_batch1, args)
        table += "\n(%s: %.1f min, load average %.1f at the end)\n" % (
            name, elapsed / 60, os.getloadavg()[0])
        tables.append(table)
        print(table, flush=True)
    report["finished_at"] = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    report["machine"]["load_average_at_end"] = os.getloadavg()[0]
    if args.json:
        write_json(args.json, report)
        log("wrote %s" % args.json)


def write_json(path, report):
    tmp = Path(str(path) + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(report, f, indent=1)
    tmp.replace(path)


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def mb_pair(glossa, ct2):
    """'G / C' in MB, '-' for a figure a run did not report."""
    return " / ".join("-" if v is None else "%.0f" % v for v in (glossa, ct2))


def format_table(name, rows, info, n_batch, n_batch1, args):
    fixed = info["fixed_length"]
    head = ("%s: %s; %d sentences (batch 1: %d), median of %d, target tokens/s; %s" % (
        name, "real weights, natural length" if not fixed else
        "random weights, %d tokens per sentence" % fixed, n_batch, n_batch1, args.repeats,
        "ratio = Glossa / CTranslate2"))
    rows_shown = any(c.get("ct2_decoder_rows") for c in rows)
    lines = [head, "",
             "| type | cores | beam | batch | Glossa | CT2 | ratio | Glossa GEMM roofline (peak) "
             "| peak RSS MB G / C | load peak RSS MB G / C | RSS after load MB G / C "
             "| load s G / C | tokens G / C |" + (" rows/token G / C |" if rows_shown else ""),
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|" + ("---|" if rows_shown else "")]
    for c in rows:
        kind = c["glossa_compute_type"]
        if c["compute_type"] in ("int8", "bfloat16"):
            kind = "%s vs %s" % (kind, c["ct2_compute_type"])
        if c.get("quantized_at_load"):
            kind += " (float32 files)"
        cores = "1" if c["workers"] * c["threads"] == 1 else "%dx%d" % (c["workers"], c["threads"])
        tokens = "%d / %d%s" % (c["glossa_target_tokens"], c["ct2_target_tokens"],
                                "" if c["tokens_equal"] else " (differ)")
        lines.append("| %s | %s | %d | %d | %s | %s | %.2f× | %.1f%% (%.0f) | %.0f / %.0f | %s | %s "
                     "| %.2f / %.2f | %s |" % (
            kind, cores, c["beam_size"], c["batch_size"], "{:,.0f}".format(c["glossa_tokens_per_s"]),
            "{:,.0f}".format(c["ct2_tokens_per_s"]), c["ratio"],
            100 * c["glossa_gemm_roofline_share"], c["fma_peak_gflops_per_core"],
            c["glossa_peak_rss_mb"], c["ct2_peak_rss_mb"],
            mb_pair(c.get("glossa_load_peak_rss_mb"), c.get("ct2_load_peak_rss_mb")),
            mb_pair(c.get("glossa_rss_after_load_mb"), c.get("ct2_rss_after_load_mb")),
            c["glossa_first_translation_s"], c["ct2_first_translation_s"], tokens)
            + (" %s |" % rows_per_token(c) if rows_shown else ""))
    lines.append("")
    lines.append("cores: 1 = one worker of one thread; WxT = W workers of T threads each (Glossa's "
                 "engine workers, CTranslate2's inter_threads x intra_threads). load s: file to "
                 "first translation (one line, greedy, <= %d tokens), page cache warm. peak RSS: "
                 "the whole process, median run; load peak RSS: its peak up to the first "
                 "translation; RSS after load: its RSS then. CT2 int8 = int8 weights, float32 elsewhere. "
                 "GEMM roofline: share of the fp32 FMA peak (int8: x4) over the cores used; "
                 "(peak): that peak per core in GFLOP/s, measured before the median Glossa run."
                 % FIRST_MAX_TOKENS
                 + (" rows/token: decoder rows (one per active beam per step) per target token, "
                    "each engine's own stopping rule." if rows_shown else ""))
    return "\n".join(lines)


if __name__ == "__main__":
    main()
