#!/usr/bin/python3
"""Model load: seconds to the first translation, memory after load, and a second process on the
same model file.

    /usr/bin/python3 tests/bench/load_bench.py [--model nllb-600m] [--compute_types float32,int8]
        [--workers 2] [--json FILE] [--work_dir /tmp/glossa-peer]

Glossa: build/glossa-server --model M=FILE with --workers (default 2, what it runs on this 2-core
machine), on free loopback ports; the clock runs from the spawn to the first successful
POST /v1/translate (one short sentence, greedy, at most 16 tokens), polled every 20 ms. Then a
second glossa-server is started on the same file and timed the same way, and both are measured.
Glossa maps its model file (mmap), so the second process can share the file's pages with the
first: RSS counts shared pages in full in each process, PSS splits them between the processes
that map them; both are read from /proc/PID/smaps_rollup, with the shared and private parts.

CTranslate2 (../shared/peer/ctranslate2, when present): tests/bench/peer_ct2_run.py --hold,
--inter_threads as --workers: the clock runs from the spawn (Python start and import included) to
its first translation of the same sentence; two processes likewise. It reads its model.bin into
its own memory, so nothing is shared.

The models come from peer_compare.py's work dir (made and converted there if missing). The page
cache holds the model file (it was just converted or read): warm-cache load times. Each process
is stopped (SIGTERM, then SIGKILL) by its own pid.
"""
import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import peer_compare as pc  # noqa: E402

SENTENCE = "Y dijo Dios: Sea la luz; y fue la luz."


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rollup(pid):
    """smaps_rollup and status of `pid`, in MB."""
    out = {}
    with open("/proc/%d/smaps_rollup" % pid) as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 3 and parts[2] == "kB":
                key = parts[0].rstrip(":")
                if key in ("Rss", "Pss", "Shared_Clean", "Shared_Dirty", "Private_Clean",
                           "Private_Dirty", "Anonymous", "Pss_Anon", "Pss_File"):
                    out[key.lower() + "_mb"] = round(int(parts[1]) / 1024.0, 1)
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(("VmHWM:", "RssFile:", "RssAnon:")):
                key, value = line.split()[:2]
                out[key.rstrip(":").lower() + "_mb"] = round(int(value) / 1024.0, 1)
    return out


def stop(proc):
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def start_glossa(server, model_file, workers, compute_type, langs, env, timeout):
    ports = [free_port() for _ in range(3)]
    cmd = [str(server), "--model", "m=%s" % model_file, "--workers", str(workers),
           "--listen", "127.0.0.1:%d" % ports[0], "--http_listen", "127.0.0.1:%d" % ports[1],
           "--metrics_listen", "127.0.0.1:%d" % ports[2]]
    if compute_type:
        cmd += ["--compute_type", compute_type]
    body = {"texts": [SENTENCE], "options": {"beamSize": 1, "maxOutputTokens": pc.FIRST_MAX_TOKENS}}
    if langs:
        body.update(sourceLanguage=langs[0], targetLanguage=langs[1])
    data = json.dumps(body).encode()
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    url = "http://127.0.0.1:%d/v1/translate" % ports[1]
    while True:
        if proc.poll() is not None:
            raise RuntimeError("glossa-server exited %d: %s" % (proc.returncode, proc.stderr.read()[-2000:]))
        try:
            req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=60) as r:
                answer = json.loads(r.read())
            break
        except (urllib.error.URLError, ConnectionError, socket.timeout):
            pass
        if time.perf_counter() - t0 > timeout:
            stop(proc)
            raise RuntimeError("glossa-server: no translation within %d s" % timeout)
        time.sleep(0.02)
    seconds = time.perf_counter() - t0
    try:
        text = answer["translations"][0]["hypotheses"][0].get("text", "")
    except (KeyError, IndexError, TypeError):
        text = None
    return proc, {"spawn_to_first_translation_s": round(seconds, 3), "translation": text}


def start_ct2(model_dir, workers, compute_type, langs, env, timeout):
    source = Path(env["GLOSSA_LOAD_INPUT"])
    cmd = [pc.PYTHON, str(pc.ROOT / "tests" / "bench" / "peer_ct2_run.py"), "--model", str(model_dir),
           "--input", str(source), "--compute_type", compute_type, "--inter_threads", str(workers),
           "--first_max_output_tokens", str(pc.FIRST_MAX_TOKENS), "--hold"]
    if langs:
        cmd += ["--source_prefix", langs[0], "--target_prefix", langs[1]]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    while True:
        line = proc.stderr.readline()
        if not line:
            raise RuntimeError("peer_ct2_run.py exited %s" % proc.poll())
        if line.startswith("{"):
            break
        if time.perf_counter() - t0 > timeout:
            break
    seconds = time.perf_counter() - t0
    report = json.loads(line)
    report["spawn_to_first_translation_s"] = round(seconds, 3)
    return proc, report


def stop_ct2(proc):
    try:
        proc.stdin.close()
        proc.wait(timeout=30)
    except (subprocess.TimeoutExpired, BrokenPipeError):
        stop(proc)


def measure_pair(start, stopper):
    """Two processes on the same file, one after the other: their times and memory."""
    first, info1 = start()
    try:
        info1["after_load"] = rollup(first.pid)
        second, info2 = start()
        try:
            info2["after_load"] = rollup(second.pid)
            info1["with_second_running"] = rollup(first.pid)
        finally:
            stopper(second)
    finally:
        stopper(first)
    return {"first": info1, "second": info2}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="nllb-600m", help="demo, opus-mt-base, opus-mt-big, nllb-600m")
    ap.add_argument("--compute_types", default="float32,int8",
                    help="float32 (float32 files), int8 (int8 files; Glossa's int8 and CT2's int8)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--work_dir", type=Path, default=Path("/tmp/glossa-peer"))
    ap.add_argument("--build_dir", type=Path, default=pc.ROOT / "build")
    ap.add_argument("--shared_dir", type=Path, default=pc.ROOT.parent / "shared")
    ap.add_argument("--timeout", type=int, default=600)
    args = ap.parse_args()
    args.peer_dir = args.shared_dir / "peer" / "ctranslate2"
    server = args.build_dir / "glossa-server"
    if not server.exists():
        sys.exit("load_bench: %s missing: cmake --build %s --target glossa-server" % (server, args.build_dir))
    compute_types = pc.csv(args.compute_types)
    have_peer = (args.peer_dir / "run.py").exists()
    args.work_dir.mkdir(parents=True, exist_ok=True)
    env = pc.peer_env(args.peer_dir, args.work_dir, os.environ.get("OMP_WAIT_POLICY", "PASSIVE"))
    if have_peer:
        pc.check_peer(env)  # exits 0 with the reason when the peer cannot run
    else:
        print("load_bench: %s is absent: Glossa only" % args.peer_dir)
    source = args.work_dir / "load-input.txt"
    source.write_text(SENTENCE + "\n", encoding="utf-8")
    env["GLOSSA_LOAD_INPUT"] = str(source)
    glossa_env = dict(os.environ, OMP_WAIT_POLICY=env["OMP_WAIT_POLICY"])
    # Models as peer_compare.py makes them.
    _, files, sizes = pc.prepare_model(args.model, args, env, "int8" in compute_types,
                                            peer=have_peer)
    langs = pc.LANGUAGES.get(args.model)
    report = {"model": args.model, "workers": args.workers, "file_bytes": sizes, "results": {}}
    lines = []
    for compute in compute_types:
        g_file = files["glossa-%s" % compute]
        res = {"glossa": measure_pair(
            lambda: start_glossa(server, g_file, args.workers, compute, langs, glossa_env, args.timeout),
            stop)}
        if have_peer:
            c_dir = files["ct2-%s" % compute]
            res["ctranslate2"] = measure_pair(
                lambda: start_ct2(c_dir, args.workers, compute, langs, env, args.timeout), stop_ct2)
        report["results"][compute] = res
        for engine, r in res.items():
            f, s = r["first"], r["second"]
            file_mb = sizes["%s-%s" % ("glossa" if engine == "glossa" else "ct2", compute)] / 2**20
            lines.append("| %s | %s | %.0f | %.2f / %.2f | %.0f / %.0f | %.0f / %.0f | %.0f | %.0f / %.0f |" % (
                engine, compute, file_mb, f["spawn_to_first_translation_s"],
                s["spawn_to_first_translation_s"], f["after_load"]["rss_mb"], f["after_load"]["pss_mb"],
                s["after_load"]["rss_mb"], s["after_load"]["pss_mb"],
                f["with_second_running"]["pss_mb"],
                s["after_load"].get("shared_clean_mb", 0) + s["after_load"].get("shared_dirty_mb", 0),
                s["after_load"].get("private_clean_mb", 0) + s["after_load"].get("private_dirty_mb", 0)))
        if args.json:
            pc.write_json(args.json, report)
    print("%s, %d workers, warm page cache; MB; 1st = the first process alone, 2nd = a second "
          "process on the same file while the first runs" % (args.model, args.workers))
    print()
    print("| engine | type | file MB | s to 1st translation: 1st / 2nd | 1st: RSS / PSS | 2nd: RSS "
          "/ PSS | 1st PSS beside 2nd | 2nd: shared / private |")
    print("|---|---|---|---|---|---|---|---|")
    print("\n".join(lines))
    if args.json:
        pc.write_json(args.json, report)


if __name__ == "__main__":
    main()
