#!/usr/bin/python3
"""Writes the seed corpora of the fuzz targets into tests/fuzz/corpus/<target>/.

    /usr/bin/python3 tests/fuzz/make_seeds.py          # from the repository root

Deterministic, small (a few KB per target), and meaningful: tiny but complete model files (a
two-layer config, a hand-made 8-piece SentencePiece model, vocabulary, tensors with an alias),
requests as the wire bytes of glossa.v1.TranslateRequest, sentences from the demo model's domain,
and TSV/JSONL/text lines. Protocol buffers are encoded by hand here so that the script needs
nothing beyond numpy and model_tools/glossa_model.py. Fuzzing adds to the build tree's copy of the
corpus, never to these files.
"""

import json
import os
import shutil
import struct
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "model_tools"))
import glossa_model  # noqa: E402


# --- protobuf wire format, enough for these messages ------------------------------------------

def varint(n):
    n &= (1 << 64) - 1  # negative int32/int64: two's complement, ten bytes
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field_varint(number, value):
    return varint(number << 3) + varint(value)


def field_bytes(number, data):
    if isinstance(data, str):
        data = data.encode("utf-8")
    return varint(number << 3 | 2) + varint(len(data)) + data


def field_float(number, value):
    return varint(number << 3 | 5) + struct.pack("<f", value)


# --- a tiny SentencePiece model (sentencepiece_model.proto) ------------------------------------

NORMAL, UNKNOWN, CONTROL = 1, 2, 3
UNIGRAM = 1


def spm_model(pieces):
    """pieces: [(piece, score, type)]. Identity normaliser, unigram model."""
    out = b""
    for piece, score, kind in pieces:
        out += field_bytes(1, field_bytes(1, piece) + field_float(2, score) + field_varint(3, kind))
    trainer = (field_varint(3, UNIGRAM) + field_varint(4, len(pieces)) + field_varint(40, 0) +
               field_varint(41, 1) + field_varint(42, 2))
    normalizer = (field_bytes(1, "identity") + field_varint(3, 1) + field_varint(4, 1) +
                  field_varint(5, 1))
    return out + field_bytes(2, trainer) + field_bytes(3, normalizer)


SPM_PIECES = [("<unk>", 0.0, UNKNOWN), ("<s>", 0.0, CONTROL), ("</s>", 0.0, CONTROL),
              ("\u2581Hola", -1.0, NORMAL), ("\u2581a", -2.0, NORMAL), ("a", -3.0, NORMAL),
              ("b", -3.0, NORMAL), ("\u2581", -4.0, NORMAL)]
# Marian's vocabulary: its own ids, </s> first.
VOCAB = ["</s>", "<unk>", "\u2581Hola", "\u2581a", "a", "b", "\u2581", "<pad>"]


def tiny_header(**config_overrides):
    config = {
        "architecture": "marian", "d_model": 8, "encoder_layers": 1, "decoder_layers": 1,
        "encoder_attention_heads": 2, "decoder_attention_heads": 2, "encoder_ffn_dim": 16,
        "decoder_ffn_dim": 16, "activation": "swish", "normalize_before": False,
        "layernorm_embedding": False, "final_layer_norm": False, "scale_embedding": True,
        "layer_norm_eps": 1e-05, "max_position_embeddings": 32, "source_vocab_size": len(VOCAB),
        "target_vocab_size": len(VOCAB), "shared_vocab": True, "pad_id": 7, "eos_id": 0,
        "unk_id": 1, "decoder_start_id": 7, "bad_words_ids": [[7]],
    }
    config.update(config_overrides)
    return {
        "format_version": 1, "name": "tiny", "source_language": "es", "target_language": "en",
        "dtype": "float32", "converter": "make_seeds.py", "config": config,
        "generation": {"num_beams": 2, "max_length": 16, "length_penalty": 1.0,
                       "early_stopping": False, "forced_eos_token_id": 0},
        "tokenizer": {"type": "marian", "source_spm": "tokenizer.source_spm",
                      "target_spm": "tokenizer.target_spm", "source_vocab": VOCAB},
    }


def tiny_tensors():
    spm = spm_model(SPM_PIECES)
    rng = np.random.default_rng(0)
    return {
        "tokenizer.source_spm": spm,
        "tokenizer.target_spm": spm,
        "encoder.embed_tokens.weight": rng.standard_normal((len(VOCAB), 8)).astype(np.float32),
        "final_logits_bias": np.zeros((1, len(VOCAB)), np.float32),
        "encoder.layers.0.fc1.weight": rng.standard_normal((2, 8)).astype(np.float32),
    }


def complete_tensors(d=8, ffn=16, positions=32, vocab=len(VOCAB)):
    """Every tensor of a one-layer Marian model for tiny_header(): Model::Load takes it, and the
    fuzz target translates with it."""
    rng = np.random.default_rng(1)

    def normal(*shape):
        return (0.5 * rng.standard_normal(shape)).astype(np.float32)

    tensors = {k: v for k, v in tiny_tensors().items() if k.startswith("tokenizer.")}
    tensors["encoder.embed_tokens.weight"] = normal(vocab, d)
    tensors["final_logits_bias"] = normal(vocab)
    for side in ("encoder", "decoder"):
        tensors[f"{side}.embed_positions.weight"] = normal(positions, d)
        attentions = ["self_attn"] + (["encoder_attn"] if side == "decoder" else [])
        prefix = f"{side}.layers.0."
        for attention in attentions:
            for proj in ("q_proj", "k_proj", "v_proj", "out_proj"):
                tensors[f"{prefix}{attention}.{proj}.weight"] = normal(d, d)
                tensors[f"{prefix}{attention}.{proj}.bias"] = normal(d)
        for norm in [f"{a}_layer_norm" for a in attentions] + ["final_layer_norm"]:
            tensors[f"{prefix}{norm}.weight"] = np.ones(d, np.float32)
            tensors[f"{prefix}{norm}.bias"] = np.zeros(d, np.float32)
        tensors[f"{prefix}fc1.weight"], tensors[f"{prefix}fc1.bias"] = normal(ffn, d), normal(ffn)
        tensors[f"{prefix}fc2.weight"], tensors[f"{prefix}fc2.bias"] = normal(d, ffn), normal(d)
    return tensors


def write(directory, name, data):
    with open(os.path.join(directory, name), "wb") as f:
        f.write(data)


def model_seeds(directory, scratch):
    def model(name, header, tensors, aliases=None):
        path = os.path.join(scratch, name)
        glossa_model.write_model(path, header, tensors, aliases)
        with open(path, "rb") as f:
            data = f.read()
        write(directory, name, data)
        return data

    tied = {"decoder.embed_tokens.weight": "encoder.embed_tokens.weight",
            "lm_head.weight": "encoder.embed_tokens.weight"}
    full = model("tiny.glossa", tiny_header(), tiny_tensors(), tied)
    separate = tiny_header(shared_vocab=False, target_vocab_size=4, pad_id=3, decoder_start_id=3,
                           bad_words_ids=[], activation="gelu_new", normalize_before=True)
    separate["tokenizer"]["target_vocab"] = ["</s>", "<unk>", "\u2581a", "<pad>"]
    separate["generation"] = {"num_beams": 1, "max_length": 4, "forced_eos_token_id": None}
    model("separate-vocab.glossa", separate, tiny_tensors())
    model("no-tensors.glossa", {"format_version": 1, "config": {}}, {})
    model("complete.glossa", tiny_header(), complete_tensors(), tied)
    # A file cut inside a tensor, and one cut inside the header.
    write(directory, "truncated-tensor.glossa", full[:len(full) - 20])
    write(directory, "truncated-header.glossa", full[:100])


def request(model=None, texts=(), options=None, source_language=None, target_language=None):
    out = b""
    if model is not None:
        out += field_bytes(1, model)
    for text in texts:
        out += field_bytes(2, text)
    if options is not None:
        o = b""
        for number, kind, value in options:
            o += {"f": field_float, "v": field_varint, "b": field_bytes}[kind](number, value)
        out += field_bytes(3, o)
    if source_language is not None:
        out += field_bytes(4, source_language)
    if target_language is not None:
        out += field_bytes(5, target_language)
    return out


def request_seeds(directory):
    seeds = {
        "one-text": request(texts=["Y dijo Dios: Sea la luz; y fue la luz."]),
        "named-model": request("opus-mt-es-en", ["En el principio creó Dios los cielos y la tierra.",
                                                 "", "Hola"]),
        "other-model": request("es-en", ["Buenos días"]),
        "unknown-model": request("fr-en", ["Bonjour"]),
        "beam-options": request("opus-mt-es-en", ["Y vió Dios que la luz era buena."],
                                [(1, "v", 4), (2, "f", 0.6), (3, "v", 64), (4, "v", 2),
                                 (5, "v", 1)]),
        "sampling": request(None, ["Y fue la tarde y la mañana un día."],
                            [(1, "v", 1), (6, "f", 0.8), (7, "v", 40), (8, "f", 0.9),
                             (9, "v", 1234)]),
        "sampling-without-temperature": request(None, ["a"], [(7, "v", 5), (8, "f", 0.5)]),
        "invalid-utf8": request(texts=[b"caf\xe9 \xed\xa0\x80"]),
        "too-many-hypotheses": request(None, ["b"], [(1, "v", 2), (4, "v", 3)]),
        "huge-beam": request(None, ["b"], [(1, "v", 1 << 31)]),
        "long-text": request(texts=["la " * 600]),
        "controls": request(None, ["Y fue la tarde y la mañana un día."],
                            [(1, "v", 4), (10, "f", 1.3), (11, "v", 3), (12, "v", 5),
                             (13, "b", "And the evening"), (14, "v", 1)]),
        "controls-sampling": request(None, ["Y vió Dios que la luz era buena."],
                                     [(6, "f", 0.8), (10, "f", 0.7), (11, "v", 1),
                                      (13, "b", b"The \xff")]),
        "languages": request(None, ["Hola"], None, "spa", "en"),
        "wrong-language": request(None, ["Hola"], None, "es", "fr"),
        "language-not-utf8": request(None, ["Hola"], None, b"\xff\xfe", "e\u0301n"),
        "auto": request(None, ["Y dijo Dios: Sea la luz; y fue la luz.", "", "abc",
                               "And God said, Let there be light."], None, "auto", "en"),
        "auto-invalid-utf8": request(None, [b"caf\xe9 con leche y pan"], None, "auto", "en"),
        "routed-pair": request(None, ["Buenos días"], None, "es", "en"),
        "empty": b"",
    }
    for name, data in seeds.items():
        write(directory, name + ".pb", data)


def tokenizer_seeds(directory):
    texts = {
        "genesis": "En el principio creó Dios los cielos y la tierra.",
        "punctuation": "Y añadió: ¿Quién dijera á Abraham que Sara había de dar de mamar á hijos?",
        "spaces": "  tabs\tand\nnew lines  \u00a0 \u3000 ",
        "mixed-scripts": "Ελληνικά русский 日本語 العربية 🙂 e\u0301",
        "control": "\x00\x01\x7f<unk></s><pad>\u2581",
        "invalid-utf8": b"caf\xe9 \xc0\xaf \xed\xa0\x80 \xf4\x90\x80\x80",
    }
    for name, text in texts.items():
        write(directory, name + ".txt", text if isinstance(text, bytes) else text.encode("utf-8"))
    # Read as int16 ids by DecodeTarget: in the vocabulary, specials, negative, past the end.
    ids = [4, 5, 6, 0, 1, 15314, 15315, -1, 32767, -32768, 200, 17]
    write(directory, "ids.bin", struct.pack("<%dh" % len(ids), *ids))


def batch_seeds(directory):
    def opts(fmt, column=1, output_column=0, src_field=False, output_field=False):
        b = fmt | (column - 1) << 2 | output_column << 4
        return bytes([b | (0x40 if src_field else 0) | (0x80 if output_field else 0)])

    text = "Hola mundo\r\n\nEn el principio\ncaf\u00e9 sin final".encode("utf-8")
    tsv = "id1\tHola\tx\r\nid2\t\t\n\nsolo\nid3\ty\u00e9\tz\tw".encode("utf-8")
    jsonl = ('{"id":1,"text":"Hola","n":1.5,"x":[1,{"y":null}]}\n'
             '{"text":"caf\\u00e9 \\ud83d\\ude00","translation":"old"}\r\n'
             '[1,2]\n{"text":3}\n{"src":"s","text":"t"}\n\n{"id":2}').encode("utf-8")
    seeds = {
        "text": opts(0) + text,
        "text-invalid-utf8": opts(0) + b"caf\xe9\n\xed\xa0\x80\n",
        "tsv": opts(1, column=2) + tsv,
        "tsv-output-column": opts(1, column=2, output_column=3) + tsv,
        "jsonl": opts(2) + jsonl,
        "jsonl-fields": opts(2, src_field=True, output_field=True) + jsonl,
    }
    for name, data in seeds.items():
        write(directory, name, data)


def crlf(text):
    return text.replace("\n", "\r\n")


# Markdown seeds have no .md suffix: the repository's link check would read them as its pages.
DOCUMENT_SEEDS = {
    "document_txt": {
        "lines.txt": "\ufeffHola mundo.\n  Con sangr\u00eda  \n\n\tY sin salto final",
        "crlf.txt": crlf("Primera l\u00ednea\n\nSegunda\n"),
        "invalid-utf8.txt": b"caf\xe9\n",
    },
    "document_md": {
        "blocks": "---\ntitle: Gu\u00eda\n---\n# T\u00edtulo #\n\nUn p\u00e1rrafo que\n"
                     "sigue con `c\u00f3digo` y [un enlace](https://ejemplo.com/a_(b)) y "
                     "![imagen](i.png \"t\").\n\n> Cita\n> larga.\n\n- uno\n- [x] dos\n"
                     "  sigue\n1) tres\n\n| a | b |\n|---|:-:|\n| c \\| d | `e|f` |\n\n"
                     "```js\nvar x;\n```\n~~~~\nno\n~~~~\n\n    indentado\n\n"
                     "<div>\nHTML\n</div>\n<!-- nota\n-->\n[ref]: https://x.org\n"
                     "Ver https://x.org. <b>negrita</b> y \\*escape\\*\nSetext\n===\n***\n",
        "crlf-unclosed": crlf("> Texto con `comilla\n> sin cerrar [y corchete\n\n```\nabierto\n"),
    },
    "document_srt": {
        "cues.srt": "1\n00:00:01,000 --> 00:00:04,000\nHola, \u00bfc\u00f3mo est\u00e1s\n"
                    "esta ma\u00f1ana?\n\n2\n00:00:05,000 --> 00:00:07,500 X1:40\n"
                    "<i>Muy bien</i>, {\\an8}gracias.\n\n3\n00:00:08,000 --> 00:00:09,000\n",
        "crlf-no-final-newline.srt": crlf("1\n00:00:01,000 --> 00:00:02,000\n<b>Adi\u00f3s</b>\n"
                                          "a todos")[:-1],
        "no-timing.srt": "1\nsin tiempos\n\n\n2\n00:00:01,000 --> 00:00:02,000\n< no es <etiqueta",
    },
    "document_vtt": {
        "cues.vtt": "WEBVTT - Ejemplo\nKind: captions\n\nNOTE un comentario\n\nSTYLE\n"
                    "::cue { color: red }\n\nREGION\nid:r1\n\nintro\n"
                    "00:00.000 --> 00:02.000 align:start\n<v Ana>Buenos d\u00edas</v>\n\n"
                    "00:02.500 --> 00:05.000\n<c.amarillo>Hoy</c> hablamos <00:03.000>de\n"
                    "traducci\u00f3n &amp; m\u00e1s.\n",
        "bom-crlf.vtt": "\ufeff" + crlf("WEBVTT\n\n1\n00:01.000 --> 00:02.000\nUna l\u00ednea\n"),
    },
    "document_html": {
        "page.html": "<!DOCTYPE html>\n<html><head><title>P\u00e1gina</title></head><body>\n"
                     "<p>Hola &amp; adi&oacute;s <b>mundo</b>.</p><pre>c\u00f3digo</pre>\n"
                     "<script>var a = '<p>';</script></body></html>\n",
        "fragment.html": "  <ul><li>uno<li>dos &lt;3</ul> texto suelto ",
    },
}


# multipart: the Content-Type line, then the body (multipart_fuzz.cc).
MULTIPART_CT = "multipart/form-data; boundary=XyZ\n"
MULTIPART_SEEDS = {
    "upload": MULTIPART_CT + crlf(
        "--XyZ\nContent-Disposition: form-data; name=\"file\"; filename=\"a.txt\"\n"
        "Content-Type: text/plain\n\nHola mundo.\n--XyZ\n"
        "Content-Disposition: form-data; name=\"source\"\n\nes\n--XyZ\n"
        "Content-Disposition: form-data; name=\"target\"\n\nen\n--XyZ--\n"),
    "quoted-preamble": "multipart/form-data; boundary=\"a b\"\n" + crlf(
        "preamble\n--a b  \nContent-Disposition: form-data; name=\"f\\\"x\"; "
        "filename*=UTF-8''ni%C3%B1o.srt\n\n\n--a b--epilogue"),
    "unterminated": MULTIPART_CT + crlf(
        "--XyZ\nContent-Disposition: form-data; name=\"file\"; filename=\"a.txt\n\nx"),
}


def multipart_seeds(directory):
    for name, text in MULTIPART_SEEDS.items():
        write(directory, name, text.encode("utf-8"))


# office_xml: a byte that picks the dialect (0 Word, 1 DrawingML, 2 SpreadsheetML, 3
# OpenDocument), then the XML (office_xml_fuzz.cc).
WORD_XML = ("<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"yes\"?>\n<w:document><w:body>"
            "<w:p><w:pPr><w:jc w:val=\"center\"/></w:pPr><w:r><w:t xml:space=\"preserve\">Vi la "
            "</w:t></w:r><w:proofErr/><w:r><w:rPr><w:b/></w:rPr><w:t>casa</w:t></w:r>"
            "<w:hyperlink r:id=\"r1\"><w:r><w:t>r&#237;o</w:t></w:r></w:hyperlink><w:r><w:tab/>"
            "<w:t>&amp; fin.</w:t></w:r></w:p><w:p><w:ins><w:r><w:t>Nuevo</w:t></w:r></w:ins></w:p>"
            "</w:body></w:document>")
OFFICE_XML_SEEDS = {
    "word.xml": "\x00" + WORD_XML,
    "slide.xml": "\x01<p:sld><a:p><a:r><a:rPr lang=\"es\"/><a:t>Hola </a:t></a:r><a:r>"
                 "<a:rPr i=\"1\"/><a:t>mundo</a:t></a:r><a:br/><a:endParaRPr/></a:p></p:sld>",
    "strings.xml": "\x02<sst><si><t>Uno</t></si><si><r><t>Dos </t></r><r><rPr><b/></rPr><t>tres"
                   "</t></r></si></sst>",
    "content.xml": "\x03<office:text><text:h>T\u00edtulo</text:h><text:p>Vi<text:s text:c=\"2\"/>la "
                   "<text:span text:style-name=\"T1\">casa</text:span> y <text:a xlink:href=\"x\">"
                   "el r\u00edo</text:a>.<text:line-break/></text:p></office:text>",
}


def zip_bytes(entries):
    """A zip archive of (name, text, stored) entries, with a fixed date: the same bytes each run."""
    import io
    import zipfile
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        for name, text, stored in entries:
            info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_STORED if stored else zipfile.ZIP_DEFLATED
            z.writestr(info, text.encode("utf-8"))
    return out.getvalue()


# document_zip: a byte that picks the format (0 .docx, 1 .pptx, 2 .xlsx, 3 .odt, 4 .odp, 5 .epub;
# server/files/office.cc's order), then the file (document_zip_fuzz.cc).
ZIP_SEEDS = {
    "a.docx": b"\x00" + zip_bytes([("[Content_Types].xml", "<Types/>", False),
                                   ("word/document.xml", WORD_XML, False)]),
    "a.xlsx": b"\x02" + zip_bytes([("xl/workbook.xml", "<workbook/>", False),
                                   ("xl/sharedStrings.xml", OFFICE_XML_SEEDS["strings.xml"][1:],
                                    False)]),
    "a.odt": b"\x03" + zip_bytes([("mimetype", "application/vnd.oasis.opendocument.text", True),
                                  ("content.xml", OFFICE_XML_SEEDS["content.xml"][1:], False)]),
    "a.epub": b"\x05" + zip_bytes([("mimetype", "application/epub+zip", True),
                                   ("META-INF/container.xml", "<container/>", False),
                                   ("c1.xhtml", "<html><body><p>Hola <b>mundo</b>.</p></body>"
                                    "</html>", False)]),
}

INLINE_TAG_SEEDS = {
    "nested": "Vi <b>la <i>casa</i></b> y <a href=\"x?a=1&amp;b=2\">el r&#237;o</a>.<br/>",
    "placeholders": "<x0/>Hola <g1>mundo</g1> &lt;3 <g3>fin</g4></g3> <g2>",
    "unclosed": "</i>texto <b>sin cerrar &amp &#xZZ; <img src=a>",
}


def fill_with(seeds):
    def fill(directory):
        for name, data in seeds.items():
            write(directory, name, data if isinstance(data, bytes) else data.encode("utf-8"))
    return fill


def document_seeds(target):
    def fill(directory):
        for name, text in DOCUMENT_SEEDS[target].items():
            write(directory, name, text if isinstance(text, bytes) else text.encode("utf-8"))
    return fill


def main():
    corpus = os.path.join(HERE, "corpus")
    scratch = os.path.join(corpus, ".scratch")
    for target, fill in [("model_file", None), ("request", request_seeds),
                         ("tokenizer", tokenizer_seeds), ("batch_formats", batch_seeds),
                         ("multipart", multipart_seeds),
                         ("office_xml", fill_with(OFFICE_XML_SEEDS)),
                         ("document_zip", fill_with(ZIP_SEEDS)),
                         ("inline_tags", fill_with(INLINE_TAG_SEEDS))] + \
            [(target, document_seeds(target)) for target in DOCUMENT_SEEDS]:
        directory = os.path.join(corpus, target)
        shutil.rmtree(directory, ignore_errors=True)
        os.makedirs(directory)
        if fill is None:
            os.makedirs(scratch, exist_ok=True)
            try:
                model_seeds(directory, scratch)
            finally:
                shutil.rmtree(scratch)
        else:
            fill(directory)
    total = sum(os.path.getsize(os.path.join(d, f))
                for d, _, files in os.walk(corpus) for f in files)
    print(f"seeds written to {corpus}: {total} bytes")


if __name__ == "__main__":
    main()
