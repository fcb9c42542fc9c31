#!/usr/bin/python3
"""The model catalogue fixture: one directory of many small *.glossa files with distinct pairs.

    /usr/bin/python3 tests/python/catalogue_models.py DIR    # builds DIR (or finds it built)

DIR holds:
  - 40 random-weight bilingual models (glossa-make-shape --shape tiny-marian --pairs, about 5 MB
    each), named <source>-<target>: xx-en and en-xx for ten languages (so that any two of them
    join through English), en-es, and 19 pairs without English;
  - the demo model (Spanish -> English, real translations) as es-en-demo.glossa, a symbolic link
    to models/opus-mt-es-en-bible.glossa (a copy where links cannot be made);
  - m2m-en-ja-ko.glossa: a random-weight M2M100 (glossa-make-shape --shape custom --model_type
    m2m_100 --languages en,ja,ko, converted by glossa-convert), the only model for ja and ko.

The random models translate nonsense (up to 32 tokens), deterministically, and each differently.
build() writes into DIR.partial and renames it, with a stamp naming the recipe and the hashes of
the tools that made it: a later build() with the same recipe and tools returns at once.
"""

import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
TOOLS = os.path.join(REPO, "model_tools")
MAKE_SHAPE = os.path.join(TOOLS, "glossa-make-shape")
CONVERT = os.path.join(TOOLS, "glossa-convert")
PYTHON = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable

PIVOT = "en"
LANGUAGES = ("de", "fr", "it", "pt", "nl", "sv", "pl", "cs", "ro", "fi")
NO_ENGLISH = ("de-fr", "fr-de", "it-pt", "pt-it", "nl-sv", "sv-nl", "pl-cs", "cs-pl", "ro-fi",
              "fi-ro", "de-it", "it-de", "fr-pt", "pt-fr", "sv-fi", "fi-sv", "cs-ro", "ro-cs",
              "nl-de")
PAIRS = (tuple(f"{x}-en" for x in LANGUAGES) + tuple(f"en-{x}" for x in LANGUAGES) + ("en-es",) +
         NO_ENGLISH)
DEMO_NAME = "es-en-demo"
MULTILINGUAL_NAME = "m2m-en-ja-ko"
MULTILINGUAL_LANGUAGES = ("en", "ja", "ko")
MULTILINGUAL_FLAGS = ("--shape", "custom", "--model_type", "m2m_100", "--tokenizer", "m2m100",
                      "--d_model", "64", "--layers", "1", "--heads", "2", "--ffn", "128",
                      "--vocab_size", "16109", "--max_length", "32", "--init_std", "0.1",
                      "--languages", ",".join(MULTILINGUAL_LANGUAGES))
STAMP = "catalogue.json"


def recipe(seed, demo_model):
    """What the directory is made of: equal recipes, equal directories."""
    tools = hashlib.sha256()
    for path in (MAKE_SHAPE, CONVERT, os.path.join(TOOLS, "glossa_model.py"),
                 os.path.join(TOOLS, "glossa_families.py")):
        with open(path, "rb") as f:
            tools.update(f.read())
    return {"pairs": list(PAIRS), "seed": seed, "multilingual": list(MULTILINGUAL_FLAGS),
            "demo": os.path.abspath(demo_model), "tools": tools.hexdigest()}


def _run(args):
    result = subprocess.run([PYTHON, *args], capture_output=True, text=True, timeout=600)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed ({result.returncode}):\n{result.stdout}"
                           f"{result.stderr}")
    return result.stdout


def build(directory, demo_model, seed=1, templates=None, log=print):
    """Makes (or finds made) the catalogue in `directory`; returns its absolute path."""
    directory = os.path.abspath(directory)
    wanted = recipe(seed, demo_model)
    try:
        with open(os.path.join(directory, STAMP), encoding="utf-8") as f:
            if json.load(f) == wanted:
                return directory
    except (OSError, ValueError):
        pass
    start = time.monotonic()
    partial = directory + ".partial"
    shutil.rmtree(partial, ignore_errors=True)
    os.makedirs(partial)
    template_flags = ("--templates", templates) if templates else ()
    _run([MAKE_SHAPE, "--shape", "tiny-marian", "--pairs", ",".join(PAIRS), "--seed", str(seed),
          "--glossa_dir", partial, *template_flags])
    bilingual_s = time.monotonic() - start
    hf_dir = os.path.join(partial, MULTILINGUAL_NAME + ".hf")
    _run([MAKE_SHAPE, *MULTILINGUAL_FLAGS, "--seed", str(seed), "--output", hf_dir,
          *template_flags])
    _run([CONVERT, "--input", hf_dir, "--output",
          os.path.join(partial, MULTILINGUAL_NAME + ".glossa"), "--name", MULTILINGUAL_NAME])
    shutil.rmtree(hf_dir)
    demo = os.path.join(partial, DEMO_NAME + ".glossa")
    try:
        os.symlink(os.path.abspath(demo_model), demo)
    except OSError:
        shutil.copyfile(demo_model, demo)
    with open(os.path.join(partial, STAMP), "w", encoding="utf-8") as f:
        json.dump(wanted, f, indent=1)
    shutil.rmtree(directory, ignore_errors=True)
    os.rename(partial, directory)
    log(f"catalogue_models: {len(PAIRS)} bilingual models in {bilingual_s:.1f} s, "
        f"{len(PAIRS) + 2} models in {time.monotonic() - start:.1f} s -> {directory}")
    return directory


def read_header(path):
    """The JSON header of a Glossa model file (format in model_tools/glossa_model.py)."""
    with open(path, "rb") as f:
        magic, _, _, size = struct.unpack("<8sIIQ", f.read(24))
        if magic != b"GLOSSAMF":
            raise ValueError(f"{path} is not a Glossa model file")
        return json.loads(f.read(size))


def models(directory):
    """name -> {"path", "languages": (source, target) or the multilingual model's set,
    "multilingual": bool} for every *.glossa in directory, read from the files' headers."""
    out = {}
    for entry in sorted(os.listdir(directory)):
        if not entry.endswith(".glossa"):
            continue
        path = os.path.join(directory, entry)
        header = read_header(path)
        codes = [lang["code"] for lang in header["tokenizer"].get("languages") or []]
        if codes:
            out[entry[:-len(".glossa")]] = {"path": path, "languages": frozenset(codes),
                                           "multilingual": True}
        else:
            out[entry[:-len(".glossa")]] = {
                "path": path, "multilingual": False,
                "languages": (header["source_language"], header["target_language"])}
    return out


def main(argv):
    if len(argv) != 1:
        print(f"usage: {os.path.basename(sys.argv[0])} DIR", file=sys.stderr)
        return 2
    demo = os.environ.get("GLOSSA_MODEL") or os.path.join(REPO, "models",
                                                          "opus-mt-es-en-bible.glossa")
    directory = build(argv[0], demo)
    found = models(directory)
    print(f"{directory}: {len(found)} models")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
