"""The multilingual Hugging Face families for glossa-convert: M2M100 and NLLB-200 (model_type
"m2m_100", M2M100Tokenizer or NllbTokenizer) and mBART-50 (model_type "mbart", MBart50Tokenizer).

What differs from Marian, as transformers v4.47 implements it (modeling_m2m_100.py,
modeling_mbart.py, tokenization_m2m_100.py, tokenization_nllb.py, tokenization_mbart50.py):

  - both are pre-norm, with a layer norm after the last encoder and decoder layer
    ("encoder.layer_norm", "decoder.layer_norm"); mBART adds "layernorm_embedding" after the
    embeddings. These are fixed by the model classes, whatever config.json says.
  - M2M100 positions are fairseq sinusoids computed at load (not in the checkpoint): position ids
    start at padding_idx + 1, and a pad token takes the all-zero row padding_idx. mBART positions
    are learned, with 2 extra rows: position t reads row t + 2.
  - the source is "<source language> text </s>" (NLLB with legacy_behaviour: "text </s> <source
    language>"); decoding starts with decoder_start_token_id (</s>) and the target language is
    forced as the first generated token.
  - M2M100Tokenizer maps SentencePiece pieces to ids with vocab.json; NllbTokenizer and
    MBart50Tokenizer use the SentencePiece id + 1 (fairseq's offset) after <s> <pad> </s> <unk>.
    The language codes follow the pieces, in the order of additional_special_tokens.

The model file holds the id -> piece list, the special ids that decoding drops, and the language
table (code, token, id and the ISO 639-1 / 639-3 aliases that requests may use instead).
"""

import json
import math
import os

import numpy as np

# model_type -> the traits its Hugging Face class hard-codes.
FAMILIES = {
    "m2m_100": {"normalize_before": True, "layernorm_embedding": False, "final_layer_norm": True,
                "positions": "sinusoidal", "scale_embedding_default": True},
    "mbart": {"normalize_before": True, "layernorm_embedding": True, "final_layer_norm": True,
              "positions": "learned", "scale_embedding_default": False},
}
MBART_POSITION_OFFSET = 2  # MBartLearnedPositionalEmbedding.offset

# tokenizer_class (the Fast variants share the slow ones' id layout) -> Glossa tokenizer type.
TOKENIZERS = {
    "M2M100Tokenizer": "m2m100",
    "NllbTokenizer": "nllb", "NllbTokenizerFast": "nllb",
    "MBart50Tokenizer": "mbart50", "MBart50TokenizerFast": "mbart50",
}
TOKENIZERS_OF = {"m2m_100": ("m2m100", "nllb"), "mbart": ("mbart50",)}
FAIRSEQ_SPECIALS = ["<s>", "<pad>", "</s>", "<unk>"]
SPM_FILE = "sentencepiece.bpe.model"

# ISO 639-1 -> ISO 639-3 (the macrolanguage code where there is one).
ISO639_1_TO_3 = dict(pair.split(":") for pair in """
aa:aar ab:abk af:afr ak:aka am:amh an:arg ar:ara as:asm av:ava ay:aym az:aze ba:bak be:bel bg:bul
bi:bis bm:bam bn:ben bo:bod br:bre bs:bos ca:cat ce:che ch:cha co:cos cr:cre cs:ces cu:chu cv:chv
cy:cym da:dan de:deu dv:div dz:dzo ee:ewe el:ell en:eng eo:epo es:spa et:est eu:eus fa:fas ff:ful
fi:fin fj:fij fo:fao fr:fra fy:fry ga:gle gd:gla gl:glg gn:grn gu:guj gv:glv ha:hau he:heb hi:hin
ho:hmo hr:hrv ht:hat hu:hun hy:hye hz:her ia:ina id:ind ie:ile ig:ibo ii:iii ik:ipk io:ido is:isl
it:ita iu:iku ja:jpn jv:jav ka:kat kg:kon ki:kik kj:kua kk:kaz kl:kal km:khm kn:kan ko:kor kr:kau
ks:kas ku:kur kv:kom kw:cor ky:kir la:lat lb:ltz lg:lug li:lim ln:lin lo:lao lt:lit lu:lub lv:lav
mg:mlg mh:mah mi:mri mk:mkd ml:mal mn:mon mr:mar ms:msa mt:mlt my:mya na:nau nb:nob nd:nde ne:nep
ng:ndo nl:nld nn:nno no:nor nr:nbl nv:nav ny:nya oc:oci oj:oji om:orm or:ori os:oss pa:pan pi:pli
pl:pol ps:pus pt:por qu:que rm:roh rn:run ro:ron ru:rus rw:kin sa:san sc:srd sd:snd se:sme sg:sag
si:sin sk:slk sl:slv sm:smo sn:sna so:som sq:sqi sr:srp ss:ssw st:sot su:sun sv:swe sw:swa ta:tam
te:tel tg:tgk th:tha ti:tir tk:tuk tl:tgl tn:tsn to:ton tr:tur ts:tso tt:tat tw:twi ty:tah ug:uig
uk:ukr ur:urd uz:uzb ve:ven vi:vie vo:vol wa:wln wo:wol xh:xho yi:yid yo:yor za:zha zh:zho zu:zul
""".split())
ISO639_3_TO_1 = {three: one for one, three in ISO639_1_TO_3.items()}
# Individual languages of a macrolanguage that has a 639-1 code (NLLB names these): they answer
# to the macrolanguage's 639-1 code too, which is then ambiguous where a model has several.
ISO639_3_TO_1.update({
    "arb": "ar", "ars": "ar", "ary": "ar", "arz": "ar", "acm": "ar", "acq": "ar", "aeb": "ar",
    "ajp": "ar", "apc": "ar", "pes": "fa", "prs": "fa", "npi": "ne", "ory": "or", "swh": "sw",
    "uzn": "uz", "khk": "mn", "lvs": "lv", "ltg": "lv", "zsm": "ms", "plt": "mg", "gaz": "om",
    "azj": "az", "azb": "az", "quy": "qu", "ydd": "yi", "als": "sq", "pbt": "ps", "ekk": "et",
    "cmn": "zh", "yue": "zh", "kmr": "ku", "ckb": "ku", "knc": "kr", "fuv": "ff",
})
# M2M100's few codes that are not ISO 639-1 or 639-3.
M2M100_CODE_ALIASES = {"ns": "nso"}


class FamilyError(Exception):
    """An input this module refuses; glossa-convert reports it like its own errors."""


def is_family(model_type):
    return model_type in FAMILIES


# ---------------------------------------------------------------------------
# Architecture


def architecture(model_type, cfg, config_value, pad_id):
    """The traits of the family's model class: {normalize_before, layernorm_embedding,
    final_layer_norm, scale_embedding, position_offset, positions_from_pad, positions}."""
    traits = FAMILIES[model_type]
    arch = {
        "normalize_before": traits["normalize_before"],
        "layernorm_embedding": traits["layernorm_embedding"],
        "final_layer_norm": traits["final_layer_norm"],
        "scale_embedding": config_value(cfg, "scale_embedding", "bool", traits["scale_embedding_default"]),
    }
    if traits["positions"] == "sinusoidal":
        # create_position_ids_from_input_ids: position t of a sequence without padding is
        # padding_idx + 1 + t; a pad token reads row padding_idx (zeros).
        arch.update({"position_offset": pad_id + 1, "positions_from_pad": True})
    else:
        arch.update({"position_offset": MBART_POSITION_OFFSET, "positions_from_pad": False})
    return arch


def sinusoidal_positions(num_rows, dim, padding_idx):
    """M2M100SinusoidalPositionalEmbedding.get_embedding, computed with torch as Hugging Face does
    (float32 throughout), so that every bit matches: sines in the first half, cosines in the
    second, a zero column for odd dim, row padding_idx zero."""
    try:
        import torch  # the rounding of float32 exp/sin/cos must be PyTorch's
    except ImportError:
        # numpy's float32 exp/sin/cos differ from PyTorch's in the last bits of ~10% of the values.
        raise FamilyError("model_type m2m_100: the sinusoidal positions are computed with PyTorch, as "
                          "Hugging Face computes them; run glossa-convert with a Python that has torch "
                          "(Debian: python3-torch)") from None

    half_dim = dim // 2
    if half_dim < 2:
        raise FamilyError(f"config.json: d_model={dim} is too small for M2M100's sinusoidal positions")
    scale = math.log(10000) / (half_dim - 1)
    emb = torch.exp(torch.arange(half_dim, dtype=torch.int64).float() * -scale)
    emb = torch.arange(num_rows, dtype=torch.int64).float().unsqueeze(1) * emb.unsqueeze(0)
    emb = torch.cat([torch.sin(emb), torch.cos(emb)], dim=1).view(num_rows, -1)
    if dim % 2 == 1:
        emb = torch.cat([emb, torch.zeros(num_rows, 1)], dim=1)
    emb[padding_idx, :] = 0
    return np.ascontiguousarray(emb.numpy(), dtype=np.float32)


# ---------------------------------------------------------------------------
# SentencePiece model (parsed here: Debian's Python has no sentencepiece module)


def _varint(data, pos):
    value, shift = 0, 0
    while True:
        if pos >= len(data):
            raise FamilyError(f"{SPM_FILE} is truncated")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, pos


def _fields(data):
    """(field number, wire type, value) of a protobuf message; value: int or bytes."""
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(data, pos)
        elif wire == 1:
            value, pos = data[pos:pos + 8], pos + 8
        elif wire == 2:
            size, pos = _varint(data, pos)
            value, pos = data[pos:pos + size], pos + size
        elif wire == 5:
            value, pos = data[pos:pos + 4], pos + 4
        else:
            raise FamilyError(f"{SPM_FILE}: unsupported protobuf wire type {wire}")
        if pos > len(data):
            raise FamilyError(f"{SPM_FILE} is truncated")
        yield number, wire, value


def spm_pieces(data):
    """The pieces of a serialized SentencePiece ModelProto, in id order (field 1: pieces, each
    a SentencePiece message whose field 1 is the piece text)."""
    pieces = []
    for number, wire, value in _fields(data):
        if number == 1 and wire == 2:
            text = next((v for n, w, v in _fields(value) if n == 1 and w == 2), b"")
            pieces.append(bytes(text).decode("utf-8"))
    if len(pieces) < 4:
        raise FamilyError(f"{SPM_FILE} holds {len(pieces)} pieces: not a SentencePiece model")
    return pieces


# ---------------------------------------------------------------------------
# Languages


def iso_aliases(code, style):
    """(ISO 639-1, ISO 639-3) codes a request may use for a model's language code ('' if none)."""
    if style == "nllb":  # spa_Latn
        three = code.split("_")[0]
        return ISO639_3_TO_1.get(three, ""), three
    base = code.split("_")[0]  # mbart50: es_XX; m2m100: es, ast
    base = M2M100_CODE_ALIASES.get(base, base)
    if len(base) == 2:
        return base, ISO639_1_TO_3.get(base, "")
    return ISO639_3_TO_1.get(base, ""), base


def language_code(token, style):
    """The code users give for a language token: '__es__' -> 'es'; 'spa_Latn', 'es_XX' as is."""
    if style == "m2m100":
        if not (token.startswith("__") and token.endswith("__") and len(token) > 4):
            raise FamilyError(f"M2M100 language token {token!r} is not of the form __xx__")
        return token[2:-2]
    return token


def _additional_special_tokens(model_dir, tok_cfg, read_json):
    tokens = tok_cfg.get("additional_special_tokens")
    if tokens is None:
        tokens = (read_json(model_dir, "special_tokens_map.json", required=False) or {}).get(
            "additional_special_tokens")
    if not tokens:
        raise FamilyError("tokenizer_config.json has no additional_special_tokens: the language codes "
                          "of the model are unknown")
    return [t.get("content") if isinstance(t, dict) else t for t in tokens]


def _added_tokens(tok_cfg):
    """id -> token text from tokenizer_config.json's added_tokens_decoder (transformers >= 4.34)."""
    decoder = tok_cfg.get("added_tokens_decoder") or {}
    return {int(i): (v.get("content") if isinstance(v, dict) else v) for i, v in decoder.items()}


# ---------------------------------------------------------------------------
# Tokenizer


def tokenizer_type(model_type, cfg, tok_cfg, model_dir):
    name = tok_cfg.get("tokenizer_class") or cfg.get("tokenizer_class")
    if name is None:  # older checkpoints: tell by the files
        name = "M2M100Tokenizer" if model_type == "m2m_100" and os.path.isfile(
            os.path.join(model_dir, "vocab.json")) else None
    kind = TOKENIZERS.get(name)
    if kind is None or kind not in TOKENIZERS_OF[model_type]:
        supported = ", ".join(n for n, k in TOKENIZERS.items() if k in TOKENIZERS_OF[model_type])
        raise FamilyError(f"tokenizer_config.json: unsupported tokenizer_class={json.dumps(name)} for "
                          f"model_type {model_type!r}: supported: {supported}")
    return kind


def _vocab_m2m100(model_dir, read_json):
    vocab = read_json(model_dir, "vocab.json")
    pieces = [None] * len(vocab)
    for piece, token_id in vocab.items():
        if not (isinstance(token_id, int) and 0 <= token_id < len(vocab)) or pieces[token_id] is not None:
            raise FamilyError(f"vocab.json: piece {piece!r} has a bad or repeated id {token_id!r}")
        pieces[token_id] = piece
    if pieces[:4] != FAIRSEQ_SPECIALS:
        raise FamilyError(f"vocab.json: ids 0-3 are {pieces[:4]}, expected {FAIRSEQ_SPECIALS}")
    return pieces


def _vocab_fairseq_offset(spm):
    """NllbTokenizer / MBart50Tokenizer: id = SentencePiece id + 1 after the four fairseq specials
    (SentencePiece's own <unk> <s> </s>, ids 0-2, are replaced by them)."""
    return FAIRSEQ_SPECIALS + spm[3:]


def parse_tokenizer(model_dir, model_type, cfg, tok_cfg, vocab_size, ids, read_json):
    """Returns (tokenizer header dict, unk_id, {tensor name: SentencePiece bytes}, languages)."""
    kind = tokenizer_type(model_type, cfg, tok_cfg, model_dir)
    if tok_cfg.get("sp_model_kwargs"):  # e.g. enable_sampling: a different segmentation per call
        raise FamilyError(f"tokenizer_config.json: unsupported sp_model_kwargs="
                          f"{json.dumps(tok_cfg['sp_model_kwargs'])}: Glossa runs SentencePiece with its defaults")
    spm_path = os.path.join(model_dir, SPM_FILE)
    if not os.path.isfile(spm_path):
        raise FamilyError(f"{spm_path} not found")
    with open(spm_path, "rb") as f:
        spm_bytes = f.read()
    pieces = _vocab_m2m100(model_dir, read_json) if kind == "m2m100" else _vocab_fairseq_offset(
        spm_pieces(spm_bytes))

    codes = _additional_special_tokens(model_dir, tok_cfg, read_json)
    first_code_id = len(pieces)
    added = _added_tokens(tok_cfg)
    languages = []
    for i, token in enumerate(codes):
        token_id = first_code_id + i
        if added and added.get(token_id) != token:
            raise FamilyError(f"tokenizer_config.json: added_tokens_decoder gives id {token_id} to "
                              f"{added.get(token_id)!r}, but the {kind} layout puts language token "
                              f"{token!r} there")
        code = language_code(token, kind)
        iso1, iso3 = iso_aliases(code, kind)
        languages.append({"code": code, "token": token, "id": token_id, "iso639_1": iso1, "iso639_3": iso3})
    pieces = pieces + codes
    special = set(range(4)) | {lang["id"] for lang in languages}
    if kind != "m2m100":  # <mask> ends the NLLB and mBART-50 vocabularies
        pieces.append("<mask>")
        special.add(len(pieces) - 1)
    if len(pieces) > vocab_size:
        raise FamilyError(f"the {kind} tokenizer has {len(pieces)} tokens but config.json vocab_size is "
                          f"{vocab_size}")
    # Ids past the tokenizer (M2M100's "madeupword" rows) decode as <unk> in Hugging Face: dropped.
    for extra in range(len(pieces), vocab_size):
        pieces.append(f"<unused{extra}>")
        special.add(extra)
    for key, expected in (("pad_id", 1), ("eos_id", 2)):
        if ids[key] != expected:
            raise FamilyError(f"config.json: {key.replace('_id', '_token_id')} is {ids[key]}, but the "
                              f"{kind} tokenizer puts {FAIRSEQ_SPECIALS[expected]} at {expected}")

    legacy = tok_cfg.get("legacy_behaviour", False) if kind == "nllb" else False
    if not isinstance(legacy, bool):
        raise FamilyError(f"tokenizer_config.json: legacy_behaviour must be true or false, got {json.dumps(legacy)}")
    tokenizer = {
        "type": kind,
        "source_spm": "tokenizer.source_spm",
        "target_spm": "tokenizer.target_spm",
        "source_vocab": pieces,
        "special_ids": sorted(special),
        # Where the source language token goes: before the text, or after its </s> (NLLB legacy).
        "source_language_position": "suffix" if legacy else "prefix",
        "languages": languages,
    }
    blobs = {"tokenizer.source_spm": spm_bytes, "tokenizer.target_spm": spm_bytes}
    return tokenizer, 3, blobs, languages

