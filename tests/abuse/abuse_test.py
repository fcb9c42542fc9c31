#!/usr/bin/python3
"""Abuse run: every attack at once against one glossa-server held to 1 GiB of memory, while a
client from another address checks that /health and /translate keep answering in time.

The attacks (each a thread of this process, looping until the run ends):
  zip bombs       a 290 KB .docx of 255 zero-filled 1 MiB entries, and an archive of honest
                  ratio that inflates past --document_memory_mb, to /translate_file and gRPC's
                  TranslateDocument
  glossary flood  POST /v1/glossaries, each glossary just under the 1 MiB a glossary may hold
  slowloris       connections that send a header byte a second, reopened when cut off
  idle streams    1,000 gRPC streams (10 connections x 100) opened with HEADERS and never sent
                  a message, the connections kept alive (SETTINGS and PING answered)
  abandoned       uploads that declare 20 MB, send 1 MB and close
  key rotation    /translate with a new api_key each time, against --req_limit
The watcher runs in a process of its own from 127.0.0.2 (the attacks come from 127.0.0.1):
/health every 50 ms, and a one-sentence /translate every fifth time. Its p99 before the attacks is the baseline; during
them each must stay within 3 x the baseline p99 (with a floor of FLOOR_MS, see below), none may
fail, and the server must not die, be killed for memory, or exit other than 0 on SIGTERM.

Memory: the server runs in a cgroup (v1 memory controller, or v2) limited to 1 GiB when this
process may make one (root, as in CI's container); otherwise it says so and the check is the
server's peak RSS (VmHWM) against 1 GiB. Prints a table of answers by attack and status, the
latencies, peak memory, then PASS or FAIL (exit 1); exit 77 when it cannot run here.

    GLOSSA_SERVER=build/glossa-server /usr/bin/python3 tests/abuse/abuse_test.py --quick
    ... --attacks slowloris,zip_bombs     # some of them only, to see which one costs what
"""

import argparse
import collections
import io
import json
import multiprocessing
import os
import random
import re
import socket
import sys
import threading
import time
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
import test_files as tf  # noqa: E402  (multipart bodies)
import test_http as th  # noqa: E402  (the server process with HTTP)
import test_server as ts  # noqa: E402  (stubs, constants)

LIMIT_BYTES = 1 << 30
# Scheduling noise on a loaded 2-core machine is a few milliseconds whatever the server does:
# a bound of 3 x a 1 ms baseline would measure the kernel, not the server.
FLOOR_MS = 25.0
WATCHER_ADDRESS = "127.0.0.2"
SERVER_FLAGS = ("--req_limit", "300", "--document_memory_mb", "64", "--max_file_mb", "20",
                "--max_message_bytes", str(24 << 20))


# ---------------------------------------------------------------- memory limit

class MemoryCgroup:
    """A cgroup limited to LIMIT_BYTES that the server enters before it starts (None: none)."""

    def __init__(self):
        self.path, self.version = None, None
        name = f"glossa-abuse-{os.getpid()}"
        v2_root = "/sys/fs/cgroup"
        for version, root in ((1, "/sys/fs/cgroup/memory"), (2, v2_root)):
            limit_file = "memory.limit_in_bytes" if version == 1 else "memory.max"
            if version == 2 and not os.path.exists(os.path.join(root, "cgroup.controllers")):
                continue
            path = os.path.join(root, name)
            try:
                os.mkdir(path)
                with open(os.path.join(path, limit_file), "w") as f:
                    f.write(str(LIMIT_BYTES))
            except OSError:
                try:
                    os.rmdir(path)
                except OSError:
                    pass
                continue
            self.path, self.version = path, version
            return

    def enter(self):
        """In the child, before exec."""
        if self.path:
            with open(os.path.join(self.path, "cgroup.procs"), "w") as f:
                f.write(str(os.getpid()))

    def peak(self):
        if not self.path:
            return None
        name = "memory.max_usage_in_bytes" if self.version == 1 else "memory.peak"
        try:
            with open(os.path.join(self.path, name)) as f:
                return int(f.read())
        except OSError:
            return None

    def oom_kills(self):
        if not self.path:
            return 0
        name = "memory.oom_control" if self.version == 1 else "memory.events"
        try:
            with open(os.path.join(self.path, name)) as f:
                m = re.search(r"oom_kill (\d+)", f.read())
            return int(m.group(1)) if m else 0
        except OSError:
            return 0

    def remove(self):
        if self.path:
            try:
                os.rmdir(self.path)
            except OSError:
                pass


def peak_rss(pid):
    with open(f"/proc/{pid}/status") as f:
        m = re.search(r"VmHWM:\s+(\d+) kB", f.read())
    return int(m.group(1)) * 1024


# ---------------------------------------------------------------- the watcher

def watch(http_port, stop_at, out):
    """In a process of its own: /health every 50 ms and a one-sentence /translate every fifth
    time (within --req_limit) from WATCHER_ADDRESS until stop_at; puts (path, seconds, status)
    tuples on `out`."""
    import http.client
    body = json.dumps({"q": ts.SHORT, "source": "es", "target": "en"})
    results, turn = [], 0
    while time.time() < stop_at:
        turn += 1
        calls = [("GET", "/health", None)]
        if turn % 5 == 0:
            calls.append(("POST", "/translate", body))
        for method, path, payload in calls:
            started = time.monotonic()
            try:
                conn = http.client.HTTPConnection("127.0.0.1", http_port, timeout=60,
                                                  source_address=(WATCHER_ADDRESS, 0))
                conn.request(method, path, body=payload,
                             headers={"Content-Type": "application/json"})
                response = conn.getresponse()
                response.read()
                status = response.status
                conn.close()
            except OSError as e:
                status = f"error: {e}"
            results.append((path, time.monotonic() - started, status))
        time.sleep(0.05)
    out.put(results)


def run_watcher(http_port, seconds):
    queue = multiprocessing.Queue()
    process = multiprocessing.Process(target=watch, args=(http_port, time.time() + seconds, queue))
    process.start()
    results = queue.get(timeout=seconds + 120)
    process.join()
    return results


def p99(values):
    values = sorted(values)
    return values[min(len(values) - 1, int(0.99 * len(values)))] if values else 0.0


# ---------------------------------------------------------------- the attacks

class Tally:
    def __init__(self):
        self.lock = threading.Lock()
        self.counts = collections.defaultdict(collections.Counter)

    def add(self, attack, outcome):
        with self.lock:
            self.counts[attack][str(outcome)] += 1


def http_status(port, raw, read_timeout=120):
    """Sends raw request bytes; the status of the answer ("closed" when there is none)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=read_timeout) as s:
            s.sendall(raw)
            data = s.recv(64)
        m = re.match(rb"HTTP/1\.[01] (\d{3})", data)
        return int(m.group(1)) if m else "closed"
    except OSError as e:
        return type(e).__name__


def post(port, path, body, content_type):
    head = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: {content_type}\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()
    return http_status(port, head + body)


def zip_bomb():
    data = io.BytesIO()
    with zipfile.ZipFile(data, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("[Content_Types].xml", "<Types/>")
        z.writestr("word/document.xml", "<w:document/>")
        zeros = bytes(1 << 20)
        for i in range(255):
            z.writestr(f"word/media/zero{i}.bin", zeros)
    return data.getvalue()


def honest_big_archive():
    """An archive of office XML's usual ratio (about 20) that inflates to 80 MB: over
    --document_memory_mb (64) alone."""
    paragraphs = "".join(f"<w:p><w:r><w:t>Hola, mundo {i}.</w:t></w:r></w:p>"
                         for i in range(2_000_000 // 40))
    data = io.BytesIO()
    with zipfile.ZipFile(data, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("[Content_Types].xml", "<Types/>")
        z.writestr("word/document.xml",
                   '<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/'
                   '2006/main"><w:body>' + paragraphs * 40 + "</w:body></w:document>")
    return data.getvalue()


class Target:
    """What the attacks need of the server (picklable, for the attack process)."""

    def __init__(self, server):
        self.http_port, self.address = server.http_port, server.address
        self.channel = None

    def connect(self):
        self.channel = ts.grpc.insecure_channel(self.address)


def attack_zip_bombs(server, stop, tally):
    bomb, big = zip_bomb(), honest_big_archive()
    stub = ts.pb_grpc.TranslatorStub(server.channel)
    content_type = f"multipart/form-data; boundary={tf.BOUNDARY}"
    while not stop.is_set():
        for name, data in (("bomb.docx", bomb), ("big.docx", big)):
            body = tf.multipart({"source": "es", "target": "en"}, [("file", name, data)])
            tally.add("zip bombs (HTTP)", post(server.http_port, "/translate_file", body,
                                               content_type))
            try:
                stub.TranslateDocument(ts.pb.TranslateDocumentRequest(
                    file_name=name, content=data, source_language="es", target_language="en"),
                    timeout=60)
                tally.add("zip bombs (gRPC)", "OK")
            except ts.grpc.RpcError as e:
                tally.add("zip bombs (gRPC)", e.code().name)


def attack_glossaries(server, stop, tally):
    n = 0
    while not stop.is_set():
        n += 1
        entries = [{"source": f"término {n} {i:05d}", "targets": [f"term {n} {i:05d} " + "x" * 90]}
                   for i in range(1250)]
        body = json.dumps({"name": f"flood {n}", "source_language": "es", "target_language": "en",
                           "entries": entries}).encode()
        tally.add("glossary flood", post(server.http_port, "/v1/glossaries", body,
                                         "application/json"))


def attack_slowloris(server, stop, tally, count):
    sockets = []
    while not stop.is_set():
        while len(sockets) < count:
            try:
                s = socket.create_connection(("127.0.0.1", server.http_port), timeout=5)
                s.sendall(b"POST /translate HTTP/1.1\r\nHost: 127.0.0.1\r\n")
                sockets.append(s)
                tally.add("slowloris", "opened")
            except OSError as e:
                tally.add("slowloris", f"open failed: {type(e).__name__}")
                break
        for s in list(sockets):
            try:
                s.sendall(b"X")
            except OSError:
                sockets.remove(s)
                s.close()
                tally.add("slowloris", "cut off by the server")
        stop.wait(1.0)
    for s in sockets:
        s.close()


def hpack_literal(name, value):
    """An HPACK literal header field without indexing, new name (names and values < 127)."""
    return bytes([0, len(name)]) + name + bytes([len(value)]) + value


def frame(kind, flags, stream, payload=b""):
    return len(payload).to_bytes(3, "big") + bytes([kind, flags]) + stream.to_bytes(4, "big") + \
        payload


def attack_idle_streams(server, stop, tally, connections=10, streams=100):
    host, port = server.address.rsplit(":", 1)
    headers = b"".join(hpack_literal(n, v) for n, v in (
        (b":method", b"POST"), (b":scheme", b"http"),
        (b":path", b"/glossa.v1.Translator/Translate"), (b":authority", host.encode()),
        (b"content-type", b"application/grpc"), (b"te", b"trailers")))

    def hold(sock):
        buffered = b""
        while not stop.is_set():
            try:
                chunk = sock.recv(65536)
            except socket.timeout:
                continue
            except OSError:
                break
            if not chunk:
                tally.add("idle streams", "connection closed by the server")
                return
            buffered += chunk
            while len(buffered) >= 9 and len(buffered) >= 9 + int.from_bytes(buffered[:3], "big"):
                length = int.from_bytes(buffered[:3], "big")
                kind, flags, payload = buffered[3], buffered[4], buffered[9:9 + length]
                buffered = buffered[9 + length:]
                if kind == 4 and not flags & 1:
                    sock.sendall(frame(4, 1, 0))  # SETTINGS ACK
                elif kind == 6 and not flags & 1:
                    sock.sendall(frame(6, 1, 0, payload))  # PING ACK
                elif kind == 3:
                    tally.add("idle streams", "stream reset by the server")
                elif kind == 7:
                    tally.add("idle streams", "GOAWAY")

    threads, sockets = [], []
    for _ in range(connections):
        sock = socket.create_connection((host, int(port)), timeout=1)
        sock.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + frame(4, 0, 0))
        for k in range(streams):
            sock.sendall(frame(1, 4, 2 * k + 1, headers))  # HEADERS, END_HEADERS, no END_STREAM
        tally.add("idle streams", f"{streams} opened")
        sockets.append(sock)
        threads.append(threading.Thread(target=hold, args=(sock,), daemon=True))
        threads[-1].start()
    stop.wait()
    for sock in sockets:
        sock.close()


def attack_abandoned_uploads(server, stop, tally):
    head = (f"POST /translate_file HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Content-Type: multipart/form-data; boundary={tf.BOUNDARY}\r\n"
            f"Content-Length: {20 << 20}\r\n\r\n").encode()
    chunk = os.urandom(1 << 20)
    while not stop.is_set():
        try:
            with socket.create_connection(("127.0.0.1", server.http_port), timeout=10) as s:
                s.sendall(head + chunk)
            tally.add("abandoned uploads", "1 MB of 20 sent, closed")
        except OSError as e:
            tally.add("abandoned uploads", type(e).__name__)
        stop.wait(0.2)


def attack_key_rotation(server, stop, tally):
    while not stop.is_set():
        body = json.dumps({"q": ts.SHORT, "source": "es", "target": "en",
                           "api_key": f"{random.getrandbits(64):016x}"}).encode()
        tally.add("api_key rotation", post(server.http_port, "/translate", body,
                                           "application/json"))
        stop.wait(0.02)


ATTACKS = {"zip_bombs": attack_zip_bombs, "glossaries": attack_glossaries,
           "slowloris": attack_slowloris, "idle_streams": attack_idle_streams,
           "abandoned_uploads": attack_abandoned_uploads, "key_rotation": attack_key_rotation}


def attack(target, seconds, slow, names, out):
    """The attack process: at the lowest CPU priority, as attackers on other machines would
    take none of the server's cores; every attack a thread, for `seconds`."""
    os.nice(19)
    target.connect()
    stop, tally = threading.Event(), Tally()
    threads = [threading.Thread(target=ATTACKS[name],
                                args=(target, stop, tally, *((slow,) if name == "slowloris"
                                                             else ())), daemon=True)
               for name in names]
    for thread in threads:
        thread.start()
    time.sleep(seconds)
    stop.set()
    for thread in threads:
        thread.join(timeout=130)
    out.put({name: outcomes for name, outcomes in tally.counts.items()})


# ---------------------------------------------------------------- the run

def latency_rows(label, results):
    rows, worst = [], {}
    for path in ("/health", "/translate"):
        times = [t for p, t, s in results if p == path and s == 200]
        failed = [s for p, t, s in results if p == path and s != 200]
        worst[path] = p99(times) * 1000
        p50 = sorted(times)[len(times) // 2] * 1000 if times else 0.0
        rows.append(f"  {label:<7} {path:<11} n={len(times):<5} p50={p50:7.1f} ms  "
                    f"p99={worst[path]:7.1f} ms  max={max(times, default=0) * 1000:7.1f} ms  "
                    f"failed={len(failed)} {collections.Counter(map(str, failed)).most_common(3)}")
    return rows, worst


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="20 s of attacks, 50 slowloris")
    parser.add_argument("--seconds", type=float, default=None)
    parser.add_argument("--slowloris", type=int, default=None)
    parser.add_argument("--attacks", default=",".join(ATTACKS),
                        help="which attacks, comma-separated (default: all)")
    args = parser.parse_args()
    seconds = args.seconds or (20.0 if args.quick else 120.0)
    slow = args.slowloris or (50 if args.quick else 200)
    if not ts.SERVER or not os.path.exists(ts.SERVER):
        print("skip: set GLOSSA_SERVER to a glossa-server binary")
        return 77
    try:
        probe = socket.socket()
        probe.bind((WATCHER_ADDRESS, 0))
        probe.close()
    except OSError:
        print(f"skip: cannot bind {WATCHER_ADDRESS} (the watcher's own loopback address)")
        return 77
    ts.setUpModule()
    cgroup = MemoryCgroup()
    print("memory: " + (f"cgroup v{cgroup.version} limited to 1 GiB" if cgroup.path else
                        "no cgroup could be made here: the check is peak RSS against 1 GiB"))
    server = th.HttpServer(*SERVER_FLAGS, preexec=cgroup.enter)
    failures = []
    try:
        baseline = run_watcher(server.http_port, min(20.0, max(10.0, seconds / 4)))
        tallies = multiprocessing.Queue()
        attacker = multiprocessing.Process(target=attack, args=(
            Target(server), seconds + 3, slow, args.attacks.split(","), tallies))
        attacker.start()
        time.sleep(2)  # every attack under way
        during = run_watcher(server.http_port, seconds)
        counts = tallies.get(timeout=300)
        attacker.join()
        alive = server.proc.poll() is None
        rss = peak_rss(server.proc.pid) if alive else None
        code = server.stop()
    finally:
        if server.proc.poll() is None:
            server.stop()
    peak = cgroup.peak()
    oom = cgroup.oom_kills()
    cgroup.remove()

    print(f"\nattacks for {seconds:.0f} s (answers by attack):")
    for name, outcomes in sorted(counts.items()):
        print(f"  {name:<18} " + ", ".join(f"{k}: {v}" for k, v in outcomes.most_common()))
    base_rows, base = latency_rows("before", baseline)
    during_rows, worst = latency_rows("during", during)
    print("\nwatcher (from %s):" % WATCHER_ADDRESS)
    print("\n".join(base_rows + during_rows))
    print(f"\nserver: peak RSS {rss / 2**20:.0f} MiB" if rss else "\nserver: died",
          f", cgroup peak {peak / 2**20:.0f} MiB" if peak else "", f", OOM kills {oom}",
          f", exit code on SIGTERM {code}", sep="")

    if not alive or code != 0:
        failures.append(f"the server died or did not stop cleanly (exit {code})")
    if oom:
        failures.append(f"the server was killed for memory {oom} times")
    if (peak or rss or 0) > LIMIT_BYTES:
        failures.append(f"peak memory {(peak or rss) / 2**20:.0f} MiB is over 1 GiB")
    for path in ("/health", "/translate"):
        bound = max(3 * base[path], FLOOR_MS)
        if worst[path] > bound:
            failures.append(f"{path}: p99 {worst[path]:.1f} ms during the attacks, over "
                            f"{bound:.1f} ms (3 x {base[path]:.1f} ms, floor {FLOOR_MS} ms)")
        if any(p == path and s != 200 for p, _, s in during):
            failures.append(f"{path}: answers other than 200 during the attacks")
    rotated = counts.get("api_key rotation", {})
    if "key_rotation" in args.attacks and rotated.get("429", 0) == 0:
        failures.append("a new api_key each request was never limited (--req_limit 300)")
    for failure in failures:
        print("FAIL:", failure)
    print("PASS" if not failures else "FAIL")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
