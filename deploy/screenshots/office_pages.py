#!/usr/bin/python3
"""Pictures of a Word document before and after translation, for the README: makes a one-page
.docx with python-docx (a heading, four paragraphs of the shared Spanish corpus with bold, italic
and underlined words mid-sentence, and a 2x3 table, its first row bold), translates it through
a running glossa-server's file API (POST /translate_file, then GET the translatedFileUrl), and
has LibreOffice render the first page of each to PNG. Writes, in --out:
    docx-before.docx  docx-before.png  docx-after.docx  docx-after.png

Run by hand (not by ctest), with /usr/bin/python3 (Debian's python3-docx) and LibreOffice
(`soffice`: Debian's libreoffice-writer-nogui), against a server with an es->en model:
    build/glossa-server --model models/opus-mt-es-en-bible.glossa --listen 127.0.0.1:0 \
        --http_listen 127.0.0.1:8080 --metrics_listen "" &
    /usr/bin/python3 deploy/screenshots/office_pages.py --server http://127.0.0.1:8080
"""

import argparse
import io
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import urllib.error
import urllib.parse
import urllib.request

try:
    import docx
    from docx.shared import Pt
except ImportError as e:
    sys.exit(f"office_pages.py: needs python3-docx (run with /usr/bin/python3): {e}")

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
BOUNDARY = "glossa-office-pages-5b1e"
TIMEOUT_S = 120


def corpus_lines(shared):
    path = os.path.join(shared, "corpus", "dev.es")
    with open(path, encoding="utf-8") as f:
        return [line.strip() for line in f if line.strip()]


def pick(lines, count, fewest_words, longest, taken):
    """The first `count` lines of at least fewest_words words and at most longest characters,
    not already taken."""
    out = []
    for line in lines:
        if line not in taken and len(line.split()) >= fewest_words and len(line) <= longest:
            out.append(line)
            taken.add(line)
            if len(out) == count:
                return out
    sys.exit(f"office_pages.py: the corpus has too few lines of {fewest_words}+ words")


def marked_pieces(line, marks):
    """The line as [(text, mark)]: each mark ("bold", "italic", "underline") on one word of four
    letters or more near its place in the sentence (marks spread evenly), mark None elsewhere."""
    words = line.split(" ")
    at = {}
    for k, mark in enumerate(marks):
        want = len(words) * (k + 1) // (len(marks) + 1)
        for i in sorted(range(1, len(words) - 1), key=lambda i: abs(i - want)):
            if i not in at and sum(c.isalpha() for c in words[i]) >= 4:
                at[i] = mark
                break
    pieces, plain = [], []
    for i, word in enumerate(words):
        if i in at:
            pieces.append((" ".join(plain) + " " if plain else "", None))
            pieces.append((word, at[i]))
            plain = [""]  # the space after the marked word
        else:
            plain.append(word)
    pieces.append((" ".join(plain), None))
    return [(text, mark) for text, mark in pieces if text]


def make_docx(lines):
    taken = set()
    heading = pick(lines, 1, 5, 60, taken)[0]
    paragraphs = pick(lines, 4, 12, 130, taken)
    header = pick(lines, 3, 4, 45, taken)  # short lines: the model is poor at single words
    cells = pick(lines, 3, 6, 60, taken)
    document = docx.Document()
    document.styles["Normal"].font.size = Pt(12)
    document.add_heading(heading, level=1)
    for line, marks in zip(paragraphs, (["bold"], ["italic"], ["underline"],
                                        ["bold", "italic", "underline"])):
        p = document.add_paragraph()
        for text, mark in marked_pieces(line, marks):
            run = p.add_run(text)
            if mark:
                setattr(run, mark, True)
    table = document.add_table(rows=2, cols=3)
    table.style = "Table Grid"
    for cell, text in zip(table.rows[0].cells, header):
        cell.text = ""
        cell.paragraphs[0].add_run(text).bold = True
    for cell, text in zip(table.rows[1].cells, cells):
        cell.text = text
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def translate(server, data, file_name, source, target):
    """The translated file's bytes, through POST /translate_file and GET translatedFileUrl."""
    body = b""
    for name, value in (("source", source), ("target", target)):
        body += (f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n'
                 f"{value}\r\n").encode()
    body += (f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="file"; '
             f'filename="{file_name}"\r\nContent-Type: application/octet-stream\r\n\r\n'
             ).encode() + data + f"\r\n--{BOUNDARY}--\r\n".encode()
    request = urllib.request.Request(
        server.rstrip("/") + "/translate_file", data=body, method="POST",
        headers={"Content-Type": f"multipart/form-data; boundary={BOUNDARY}"})
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
            answer = json.load(response)
    except urllib.error.HTTPError as e:
        sys.exit(f"office_pages.py: POST /translate_file: HTTP {e.code}: {e.read()[:500]!r}")
    except urllib.error.URLError as e:
        sys.exit(f"office_pages.py: no glossa-server at {server}: {e.reason}")
    if "translatedFileUrl" not in answer:
        sys.exit(f"office_pages.py: POST /translate_file answered {answer}")
    # The download from the server asked, whatever host name the answer's URL has.
    url = urllib.parse.urlparse(answer["translatedFileUrl"])
    with urllib.request.urlopen(server.rstrip("/") + url.path, timeout=TIMEOUT_S) as response:
        return response.read()


def render_png(path, profile):
    """LibreOffice's picture of the document's first page, written beside it."""
    run = subprocess.run(
        ["soffice", f"-env:UserInstallation={profile}", "--headless", "--convert-to", "png",
         "--outdir", os.path.dirname(path), path],
        capture_output=True, text=True, timeout=TIMEOUT_S)
    png = os.path.splitext(path)[0] + ".png"
    if run.returncode != 0 or not os.path.isfile(png):
        sys.exit(f"office_pages.py: soffice made no {png}:\n{run.stdout}{run.stderr}")
    return png


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server", default="http://127.0.0.1:8080",
                        help="HTTP base URL of a running glossa-server (default: %(default)s)")
    parser.add_argument("--out", default=HERE, help="folder for the files (default: %(default)s)")
    parser.add_argument("--shared", default=os.path.join(REPO, "..", "shared"),
                        help="the shared data folder holding corpus/dev.es (default: %(default)s)")
    parser.add_argument("--source", default="es", help="source language (default: es)")
    parser.add_argument("--target", default="en", help="target language (default: en)")
    args = parser.parse_args()
    if not shutil.which("soffice"):
        sys.exit("office_pages.py: needs LibreOffice's soffice on PATH "
                 "(Debian: libreoffice-writer-nogui)")

    before = make_docx(corpus_lines(args.shared))
    after = translate(args.server, before, "docx-before.docx", args.source, args.target)
    os.makedirs(args.out, exist_ok=True)
    written = []
    with tempfile.TemporaryDirectory(prefix="glossa-office-pages-") as tmp:
        profile = pathlib.Path(tmp, "profile").as_uri()
        for name, data in (("docx-before.docx", before), ("docx-after.docx", after)):
            path = os.path.join(args.out, name)
            with open(path, "wb") as f:
                f.write(data)
            written += [path, render_png(path, profile)]
    for path in written:
        print(f"{path}\t{os.path.getsize(path)} bytes")


if __name__ == "__main__":
    main()
