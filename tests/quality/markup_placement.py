#!/usr/bin/python3
"""Inline tags placed by alignment, on a tagged test set built from the shared dev set.

A word-translation dictionary is learnt from the shared training corpus (Dice coefficient of
sentence co-occurrence; independent of the model). A case is a dev line with one source word w
(its first such word, or with --pick N its N+1th), marked <b>, <i> or <a href>, whose dictionary translation d(w) occurs exactly once in the model's
translation of the line. The case is a hit when the tagged translation's element holds d(w) and at
most three words. The same cases are scored as markup that cuts the sentence (the pieces before,
inside and after the element translated apart): a hit when the element's piece holds d(w); that
row also counts the lines whose joined pieces differ from the whole line's translation.

With --server (glossa-server's binary), the cases go through the file API as a Word document
instead (chosen on the lines' translations sentence by sentence, as the server translates a
paragraph): each line a paragraph whose marked word is a bold, italic or underlined run
(python3-docx writes it), translated by POST /translate_file on a greedy server, and read back
with python3-docx; a hit is a paragraph whose runs in the marked formatting hold d(w) and at most
three words.

Prints JSON; exit 1 when the placement rate is below --min_rate, 77 without ../shared (or, with
--server, without python3-docx).
"""
import argparse
import collections
import json
import os
import re
import subprocess
import sys

WORD = re.compile(r"[^\W\d_]+", re.UNICODE)


def words(text):
    return [w.lower() for w in WORD.findall(text)]


def dictionary(es_path, en_path, min_count=5, min_dice=0.3):
    ces, cen, pair = collections.Counter(), collections.Counter(), collections.Counter()
    with open(es_path, encoding="utf-8") as fes, open(en_path, encoding="utf-8") as fen:
        for es, en in zip(fes, fen):
            s, t = set(words(es)), set(words(en))
            ces.update(s)
            cen.update(t)
            pair.update((a, b) for a in s for b in t)
    best = {}
    for (a, b), c in pair.items():
        if ces[a] < min_count or cen[b] < min_count:
            continue
        dice = 2.0 * c / (ces[a] + cen[b])
        if dice >= min_dice and dice > best.get(a, ("", 0.0))[1]:
            best[a] = (b, dice)
    return {a: b for a, (b, _) in best.items()}


def translate(binary, model, lines, extra=()):
    cmd = [binary, "--model", model, "--beam_size", "1"] + list(extra)
    out = subprocess.run(cmd, input="\n".join(lines) + "\n", capture_output=True, text=True,
                         check=True).stdout
    result = out.split("\n")[:len(lines)]
    assert len(result) == len(lines), (len(result), len(lines))
    return result


TAGS = [("<b>", "</b>"), ("<i>", "</i>"), ('<a href="#n">', "</a>")]
ELEMENT = re.compile(r"<(b|i|a)\b[^>]*>(.*?)</\1>")


def cases(dev, translations, d, pick=0):
    out = []
    for n, (line, mt) in enumerate(zip(dev, translations)):
        mt_words = words(mt)
        tokens = line.split(" ")
        eligible = 0
        for k, token in enumerate(tokens):
            w = words(token)
            if len(w) != 1 or len(w[0]) < 4 or w[0] not in d:
                continue
            if words(line).count(w[0]) != 1 or mt_words.count(d[w[0]]) != 1:
                continue
            eligible += 1
            if eligible <= pick:
                continue
            m = re.search(r"[^\W\d_]+", token)  # the word, without its punctuation
            start, end = TAGS[n % len(TAGS)]
            tagged = token[:m.start()] + start + m.group(0) + end + token[m.end():]
            out.append({"line": n, "tagged": " ".join(tokens[:k] + [tagged] + tokens[k + 1:]),
                        "before": " ".join(tokens[:k] + [token[:m.start()]]).strip(),
                        "inside": m.group(0),
                        "after": " ".join([token[m.end():]] + tokens[k + 1:]).strip(),
                        "target": d[w[0]]})
            break  # one case per line
    return out


DOCX_MARKS = ["bold", "italic", "underline"]


def start_server(binary, model):
    """A greedy glossa-server on free ports; (process, HTTP port)."""
    proc = subprocess.Popen([binary, "--model", model, "--listen", "127.0.0.1:0",
                             "--http_listen", "127.0.0.1:0", "--metrics_listen", "",
                             "--default_beam_size", "1"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for line in proc.stdout:
        m = re.search(r"HTTP on http://[^:]+:(\d+)/", line)
        if m:
            return proc, int(m.group(1))
    raise RuntimeError("glossa-server did not start")


def translate_docx(port, data):
    """POST /translate_file, then the download: the translated .docx's bytes."""
    import http.client
    boundary = "markup-placement-7c1e"
    body = b"".join(
        f"--{boundary}\r\nContent-Disposition: form-data; name=\"{k}\"\r\n\r\n{v}\r\n".encode()
        for k, v in (("source", "es"), ("target", "en")))
    body += (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; "
             f"filename=\"cases.docx\"\r\n\r\n").encode() + data + f"\r\n--{boundary}--\r\n".encode()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=1800)
    conn.request("POST", "/translate_file", body,
                 {"Content-Type": f"multipart/form-data; boundary={boundary}"})
    answer = json.loads(conn.getresponse().read())
    url = answer["translatedFileUrl"]
    conn.request("GET", url[url.index("/download_file/"):])
    return conn.getresponse().read()


def docx_hits(server, model, test):
    """Per case: whether the translated paragraph's marked runs hold its target."""
    import io
    import docx
    document = docx.Document()
    for i, c in enumerate(test):
        p = document.add_paragraph()
        before = c["before"] + (" " if c["before"] and not c["before"].endswith(" ") else "")
        p.add_run(before)
        setattr(p.add_run(c["inside"]), DOCX_MARKS[i % 3], True)
        p.add_run(c["after"] if c["after"][:1] in ",.;:!?)»\"'" else " " + c["after"])
    out = io.BytesIO()
    document.save(out)
    proc, port = start_server(server, model)
    try:
        translated = docx.Document(io.BytesIO(translate_docx(port, out.getvalue())))
    finally:
        proc.terminate()
        proc.wait()
    hits = []
    for i, (c, p) in enumerate(zip(test, translated.paragraphs)):
        inside = words(" ".join(r.text for r in p.runs if getattr(r, DOCX_MARKS[i % 3])))
        hits.append(c["target"] in inside and 0 < len(inside) <= 3)
    return hits


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--translate", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--shared", required=True)
    ap.add_argument("--min_rate", type=float, default=0.0)
    ap.add_argument("--pick", type=int, default=0,
                    help="mark a line's eligible word number PICK + 1 (0: the first)")
    ap.add_argument("--server", default="",
                    help="glossa-server: place the marks through /translate_file in a .docx")
    args = ap.parse_args()
    corpus = os.path.join(args.shared, "corpus")
    if not os.path.exists(os.path.join(corpus, "dev.es")):
        print("skipped: needs ../shared/corpus")
        return 77
    d = dictionary(os.path.join(corpus, "train.es"), os.path.join(corpus, "train.en"))
    with open(os.path.join(corpus, "dev.es"), encoding="utf-8") as f:
        dev = [line.rstrip("\n") for line in f]
    # The server translates a document's paragraphs sentence by sentence: its cases are chosen on
    # that translation, so that d(w) occurs once in what the paragraph becomes.
    plain = translate(args.translate, args.model, dev,
                      ["--split_sentences"] if args.server else [])
    test = cases(dev, plain, d, args.pick)
    if args.server:
        try:
            import docx  # noqa: F401
        except ImportError:
            print("skipped: needs python3-docx")
            return 77
        hits = docx_hits(args.server, args.model, test)
        n = max(1, len(test))
        print(json.dumps({"cases": len(test), "dev_lines": len(dev),
                          "docx_runs_on_the_words_translating_the_marked_word":
                              round(sum(hits) / n, 4)}, indent=1))
        if len(test) < 50 or sum(hits) / n < args.min_rate:
            print(f"FAILED: placement rate {sum(hits) / n:.4f} below {args.min_rate}")
            return 1
        return 0
    tagged = translate(args.translate, args.model, [c["tagged"] for c in test], ["--inline_tags"])
    hits = well_formed = same_text = 0
    for c, out in zip(test, tagged):
        m = ELEMENT.search(out)
        stripped = re.sub(r"<[^>]*>", "", out)
        same_text += stripped == plain[c["line"]]
        well_formed += m is not None
        inside = words(m.group(2)) if m else []
        hits += c["target"] in inside and len(inside) <= 3
    pieces = [p for c in test for p in (c["before"], c["inside"], c["after"])]
    cut = translate(args.translate, args.model, pieces)
    cut_hits = cut_changed = 0
    for i, c in enumerate(test):
        before, inside, after = cut[3 * i:3 * i + 3]
        cut_hits += c["target"] in words(inside)
        joined = " ".join(p for p in (before, inside, after) if p)
        cut_changed += joined != plain[c["line"]]
    n = max(1, len(test))
    report = {"cases": len(test), "dev_lines": len(dev), "dictionary_entries": len(d),
              "placed_on_the_words_translating_the_marked_word": round(hits / n, 4),
              "element_present": round(well_formed / n, 4),
              "text_without_tags_equals_the_plain_translation": round(same_text / n, 4),
              "cut_sentence_rate": round(cut_hits / n, 4),
              "cut_sentence_lines_changed": round(cut_changed / n, 4)}
    print(json.dumps(report, indent=1))
    if len(test) < 50 or hits / n < args.min_rate:
        print(f"FAILED: placement rate {hits / n:.4f} below {args.min_rate} or too few cases")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
