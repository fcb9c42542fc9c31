#!/usr/bin/env python3
"""Every shell example of the given pages runs, in order, and prints what the page shows.

Each page runs in a scratch directory that holds the checkout's model_tools/, models/, proto/
and deploy/ and the build under test as build/, as a reader's clone would after building. The
reader's Hugging Face download is replaced (a page's `docs-test: instead` directive) by the
models under ../shared, which GLOSSA_SHARED names; a page that needs them is skipped without.
Servers a page starts in the background are stopped at the end of the page. The conventions:
tests/docs/markdown_blocks.py.

  examples_test.py --build BUILD_DIR README.md docs/quickstart.md
Exit 0: every block printed what its page shows; 1: one did not (both printed); 77: skipped.
"""
import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from markdown_blocks import matches, normalize, shell_blocks

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
LINKED = ["model_tools", "models", "proto", "deploy", "tests"]
BLOCK_TIMEOUT = 300
BACKGROUND_WAIT = 60


def scratch_dir(build):
    work = tempfile.mkdtemp(prefix="glossa-docs-")
    for name in LINKED:
        os.symlink(os.path.join(ROOT, name), os.path.join(work, name))
    os.symlink(os.path.abspath(build), os.path.join(work, "build"))
    return work


def environment(shared):
    env = dict(os.environ)
    # A Debian reader's python3 is /usr/bin/python3 (with grpcio, numpy, torch).
    env["PATH"] = "/usr/bin:/bin:" + env.get("PATH", "")
    env["GLOSSA_SHARED"] = shared
    env.pop("PYTHONPATH", None)
    return env


def show(label, text):
    print(f"  {label}:")
    for line in normalize(text).splitlines():
        print(f"    | {line}")


class Page:
    def __init__(self, path, work, env):
        self.path, self.work, self.env = path, work, env
        self.background = []
        self.failures = 0

    def where(self, block):
        return f"{os.path.relpath(self.path, ROOT)}:{block.line}"

    def run(self, block):
        if "skip" in block.directives:
            print(f"{self.where(block)}: skipped: {block.directives['skip']}")
            return
        code = block.directives.get("instead") or block.code
        if "instead" in block.directives:
            print(f"{self.where(block)}: runs instead of the page's block: {code}")
        if "background" in block.directives:
            self.start(block, code)
            return
        started = time.monotonic()
        try:
            done = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", code], cwd=self.work,
                                  env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  timeout=BLOCK_TIMEOUT, stdin=subprocess.DEVNULL)
            output, rc = done.stdout.decode("utf-8", "replace"), done.returncode
        except subprocess.TimeoutExpired as e:
            output, rc = (e.stdout or b"").decode("utf-8", "replace"), "timeout"
        took = time.monotonic() - started
        ok = rc == 0 and (block.expected is None or "instead" in block.directives or
                          matches(block.expected, output))
        print(f"{self.where(block)}: {'ok' if ok else 'FAILED'} ({took:.1f} s, exit {rc})")
        if not ok:
            self.failures += 1
            show("the block", code)
            if block.expected is not None:
                show("the page shows", block.expected)
            show("it printed", output)

    def start(self, block, code):
        log = tempfile.NamedTemporaryFile(prefix="glossa-docs-bg-", delete=False)
        process = subprocess.Popen(["bash", "-c", code], cwd=self.work, env=self.env,
                                   stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   start_new_session=True)
        self.background.append((process, log.name))
        deadline = time.monotonic() + BACKGROUND_WAIT
        while True:
            with open(log.name, encoding="utf-8", errors="replace") as f:
                output = f.read()
            if block.expected is None or matches(block.expected, output, whole=False):
                print(f"{self.where(block)}: ok (running in the background)")
                return
            if process.poll() is not None or time.monotonic() > deadline:
                self.failures += 1
                state = (f"exited {process.returncode}" if process.poll() is not None
                         else f"not printed within {BACKGROUND_WAIT} s")
                print(f"{self.where(block)}: FAILED ({state})")
                show("the block", code)
                show("the page shows", block.expected)
                show("it printed", output)
                return
            time.sleep(0.2)

    def stop(self):
        for process, log in self.background:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
                try:
                    process.wait(timeout=40)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait()
            os.unlink(log)


def run_page(path, build, env):
    with open(path, encoding="utf-8") as f:
        blocks = shell_blocks(f.read())
    work = scratch_dir(build)
    page = Page(path, work, env)
    try:
        for block in blocks:
            page.run(block)
    finally:
        page.stop()
        shutil.rmtree(work, ignore_errors=True)
    print(f"{os.path.relpath(path, ROOT)}: {len(blocks)} blocks, {page.failures} failed")
    return page.failures


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build", required=True, help="the build directory under test")
    parser.add_argument("--shared", default=os.path.join(ROOT, "..", "shared"))
    parser.add_argument("pages", nargs="+")
    args = parser.parse_args()
    shared = os.path.abspath(args.shared)
    pages = [os.path.join(ROOT, p) for p in args.pages]
    if not os.path.isdir(os.path.join(shared, "models")):
        needs = [p for p in pages if "$GLOSSA_SHARED" in open(p, encoding="utf-8").read()]
        if needs:
            print(f"skipped: {', '.join(os.path.relpath(p, ROOT) for p in needs)} stand in "
                  f"{shared}/models for a Hugging Face download, and it is absent")
            return 77
    env = environment(shared)
    failures = sum(run_page(page, args.build, env) for page in pages)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
