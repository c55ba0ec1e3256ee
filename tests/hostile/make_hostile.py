"""Writes adversarial ONNX models and data files for hostile_test.py into OUTDIR.

usage: make_hostile.py OUTDIR            the models and data hostile_test.py uses
       make_hostile.py --corpus OUTDIR   small seeds for the fuzzer (tests/fuzz): nesting at and
                                         around every limit, external data references, many ops

The models are encoded here, field by field, in protobuf's wire format (only the standard
library is needed): the onnx package refuses to build or serialize some of them (messages nested
thousands deep), and each one must be exactly the hostile shape it is named after.
"""
import os
import struct
import sys

# ---- protobuf wire format --------------------------------------------------------------------


def varint(v):
    out = bytearray()
    v &= (1 << 64) - 1
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def key(field, wt):
    return varint(field << 3 | wt)


def f_varint(field, v):
    return key(field, 0) + varint(v)


def f_bytes(field, data):
    if isinstance(data, str):
        data = data.encode()
    return key(field, 2) + varint(len(data)) + data


# ---- onnx.proto messages (field numbers from onnx.proto) ---------------------------------------
FLOAT, BOOL = 1, 9
ATTR_INT, ATTR_GRAPH = 2, 5


def opset(version, domain=""):
    return f_bytes(1, domain) + f_varint(2, version)


def tensor_type(elem, dims):
    shape = b"".join(f_bytes(1, f_varint(1, d)) for d in dims)
    return f_bytes(1, f_varint(1, elem) + f_bytes(2, shape))  # TypeProto.tensor_type


def value_info(name, type_proto=None):
    return f_bytes(1, name) + (f_bytes(2, type_proto) if type_proto is not None else b"")


def node(op, inputs, outputs, name="", attrs=(), domain=None):
    m = b"".join(f_bytes(1, i) for i in inputs) + b"".join(f_bytes(2, o) for o in outputs)
    if name:
        m += f_bytes(3, name)
    m += f_bytes(4, op)
    m += b"".join(f_bytes(5, a) for a in attrs)
    if domain is not None:
        m += f_bytes(7, domain)
    return m


def attr_graph(name, graph):
    return f_bytes(1, name) + f_varint(20, ATTR_GRAPH) + f_bytes(6, graph)


def attr_int(name, v):
    return f_bytes(1, name) + f_varint(20, ATTR_INT) + f_varint(3, v)


def graph(nodes, inputs, outputs, name="g", initializers=()):
    return (b"".join(f_bytes(1, n) for n in nodes) + f_bytes(2, name) + b"".join(f_bytes(5, t) for t in initializers)
            + b"".join(f_bytes(11, i) for i in inputs) + b"".join(f_bytes(12, o) for o in outputs))


def model(g, version=13, ir=8):
    return f_varint(1, ir) + f_bytes(8, opset(version)) + f_bytes(7, g)


def scalar_bool():
    return tensor_type(BOOL, [])


# ---- the hostile models --------------------------------------------------------------------------


def nested_if(depth):
    """If inside If inside If ... `depth` levels of subgraphs, each branch a graph of one If."""
    leaf = graph([node("Identity", ["x"], ["y"])], [], [value_info("y")], name="leaf")
    inner = leaf
    for i in range(depth - 1):
        inner = graph([node("If", ["c"], ["y"], name="if%d" % i, attrs=[attr_graph("then_branch", inner),
                                                                      attr_graph("else_branch", leaf)])],
                      [], [value_info("y")], name="level%d" % i)
    top = graph([node("If", ["c"], ["y"], name="top", attrs=[attr_graph("then_branch", inner),
                                                           attr_graph("else_branch", leaf)])],
                [value_info("c", scalar_bool()), value_info("x", tensor_type(FLOAT, [1]))],
                [value_info("y", tensor_type(FLOAT, [1]))])
    return model(top)


def nested_if_lean(depth):
    """The crash from the audit: a ~29 KB file, one then_branch per level (no else)."""
    inner = graph([], [], [], name="")
    for _ in range(depth):
        inner = graph([node("If", ["c"], ["y"], attrs=[attr_graph("then_branch", inner)])], [], [], name="")
    return model(graph([node("If", ["c"], ["y"], attrs=[attr_graph("then_branch", inner)])],
                       [value_info("c", scalar_bool())], [value_info("y")]))


def nested_sequence_type(depth):
    """A graph input whose type is sequence(sequence(...(float))) `depth` levels deep."""
    t = tensor_type(FLOAT, [1])
    for _ in range(depth):
        t = f_bytes(4, f_bytes(1, t))  # TypeProto.sequence_type { elem_type }
    return model(graph([node("Identity", ["x"], ["y"])], [value_info("x", t)], [value_info("y")]))


def identity_chain(n):
    nodes = [node("Identity", ["x" if i == 0 else "t%d" % (i - 1)], ["t%d" % i if i < n - 1 else "y"]) for i in range(n)]
    return model(graph(nodes, [value_info("x", tensor_type(FLOAT, [4]))], [value_info("y", tensor_type(FLOAT, [4]))]))


def identity_chain_shuffled(n):
    """The same chain with its nodes in reverse file order: the loader must sort it."""
    nodes = [node("Identity", ["x" if i == 0 else "t%d" % (i - 1)], ["t%d" % i if i < n - 1 else "y"]) for i in range(n)]
    nodes.reverse()
    return model(graph(nodes, [value_info("x", tensor_type(FLOAT, [4]))], [value_info("y", tensor_type(FLOAT, [4]))]))


def wide_split(n):
    outs = ["o%d" % i for i in range(n)]
    return model(graph([node("Split", ["x"], outs, name="split", attrs=[attr_int("axis", 0)])],
                       [value_info("x", tensor_type(FLOAT, [n]))], [value_info(o) for o in outs]))


def many_values(n):
    """n Add nodes all reading the graph input and one shared initializer: many names, many uses."""
    w = f_varint(1, 4) + f_varint(2, FLOAT) + f_bytes(8, "w") + f_bytes(9, struct.pack("<4f", 1, 2, 3, 4))
    nodes = [node("Add", ["x", "w"], ["a%d" % i]) for i in range(n)]
    nodes.append(node("Sum", ["a%d" % i for i in range(min(n, 1000))], ["y"]))
    return model(graph(nodes, [value_info("x", tensor_type(FLOAT, [4]))], [value_info("y", tensor_type(FLOAT, [4]))],
                       initializers=[w]))


def hostile_names():
    """Names holding a terminal escape sequence, CR/LF, a NUL-free control byte and invalid UTF-8."""
    xin = "x\x1b]0;owned\x07\x1b[31mRED\r\nFAKE LINE"
    yout = b"y\xff\xfe\xc3(\x80"
    # yout must stay raw bytes: its fields are built by hand
    n1 = node("Identity", [xin], ["mid"], name="n\x1b[2J\x08\x7f")
    n2 = b"".join([f_bytes(1, "mid"), f_bytes(2, yout), f_bytes(4, "Relu")])
    g = (f_bytes(1, n1) + f_bytes(1, n2) + f_bytes(2, "g") + f_bytes(11, value_info(xin, tensor_type(FLOAT, [1, 4])))
         + f_bytes(12, f_bytes(1, yout) + f_bytes(2, tensor_type(FLOAT, [1, 4]))))
    return model(g)


def huge_shape_model():
    """Identity on a float input with a symbolic shape, so --input may ask for any shape."""
    dims = f_bytes(1, f_bytes(2, "n")) + f_bytes(1, f_bytes(2, "m"))
    t = f_bytes(1, f_varint(1, FLOAT) + f_bytes(2, dims))
    return model(graph([node("Identity", ["x"], ["y"])], [value_info("x", t)], [value_info("y")]))


def npy(shape_text, descr="<f4", payload=b""):
    header = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, shape_text)
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + payload


def external_initializer(name, location, offset=None, length=None, dims=(4,)):
    """A float TensorProto whose data lives in an external file (data_location = EXTERNAL)."""
    entries = [("location", location)] + ([("offset", str(offset))] if offset is not None else []) + \
        ([("length", str(length))] if length is not None else [])
    t = b"".join(f_varint(1, d) for d in dims) + f_varint(2, FLOAT) + f_bytes(8, name)
    t += b"".join(f_bytes(13, f_bytes(1, k) + f_bytes(2, v)) for k, v in entries) + f_varint(14, 1)
    return t


def loop_nest(depth):
    """Loop bodies inside Loop bodies, each reading an outer-scope value."""
    body = graph([node("Identity", ["outer"], ["v_out"])], [value_info("i", tensor_type(7, [])),
                                                          value_info("cond", scalar_bool())],
                 [value_info("cond_out"), value_info("v_out")], name="body0")
    for k in range(depth):
        body = graph([node("Identity", ["cond"], ["cond_out"]),
                      node("Loop", ["", "cond"], ["v_out"], attrs=[attr_graph("body", body)])],
                     [value_info("i", tensor_type(7, [])), value_info("cond", scalar_bool())],
                     [value_info("cond_out"), value_info("v_out")], name="body%d" % (k + 1))
    top = graph([node("Loop", ["n", "c"], ["y"], attrs=[attr_graph("body", body)])],
                [value_info("n", tensor_type(7, [])), value_info("c", scalar_bool()),
                 value_info("outer", tensor_type(FLOAT, [2]))], [value_info("y")])
    return model(top)


OPS = ["Abs", "Add", "ArgMax", "AveragePool", "BatchNormalization", "Cast", "Ceil", "Clip", "Concat", "Conv",
       "ConvTranspose", "Div", "Einsum", "Elu", "Equal", "Erf", "Exp", "Expand", "Flatten", "Gather", "GatherND",
       "Gemm", "GlobalAveragePool", "GRU", "If", "InstanceNormalization", "LayerNormalization", "LeakyRelu", "Log",
       "Loop", "LSTM", "MatMul", "Max", "MaxPool", "Mul", "NonZero", "Pad", "Pow", "QuantizeLinear", "Range",
       "ReduceMean", "Relu", "Reshape", "Resize", "Scan", "ScatterND", "Shape", "Sigmoid", "Slice", "Softmax",
       "Split", "Sqrt", "Squeeze", "Sub", "Tanh", "Tile", "TopK", "Transpose", "Unsqueeze", "Where"]


def corpus(out):
    seeds = {}
    for k in (1, 2, 3, 5, 8, 16, 32, 63, 64, 65, 86):
        seeds["nest_if_%d" % k] = nested_if(k)
    seeds["nest_if_lean_1000"] = nested_if_lean(1000)
    for k in (1, 2, 3, 8, 50, 300):
        seeds["nest_seq_type_%d" % k] = nested_sequence_type(k)
    for k in (1, 2, 4, 20):
        seeds["nest_loop_%d" % k] = loop_nest(k)
    x = value_info("x", tensor_type(FLOAT, [4]))
    for i, (loc, off, ln) in enumerate([("w.bin", None, None), ("w.bin", 16, 16), ("w.bin", 2 ** 62, 16),
                                        ("../w.bin", None, None), ("/etc/passwd", None, None), ("sub/./w.bin", 0, 99),
                                        ("", None, None), ("w.bin", -1, None)]):
        seeds["external_%d" % i] = model(graph([node("Add", ["x", "w"], ["y"])], [x], [value_info("y")],
                                               initializers=[external_initializer("w", loc, off, ln)]))
    for op in OPS:
        seeds["op_" + op] = model(graph([node(op, ["x", "x"], ["y"], name=op.lower(), attrs=[attr_int("axis", 0)])],
                                        [x], [value_info("y", tensor_type(FLOAT, [4]))]))
    seeds["names"] = hostile_names()
    seeds["chain_200"] = identity_chain(200)
    seeds["split_300"] = wide_split(300)
    os.makedirs(out, exist_ok=True)
    for name, data in seeds.items():
        with open(os.path.join(out, "gen_%s.onnx" % name), "wb") as f:
            f.write(data)
    print("wrote %d fuzz seeds to %s" % (len(seeds), out))


def main():
    if sys.argv[1] == "--corpus":
        return corpus(sys.argv[2])
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    files = {
        "nested_if_3000.onnx": nested_if_lean(3000),
        "nested_if_100.onnx": nested_if(100),
        "nested_if_64.onnx": nested_if(64),
        "nested_if_60.onnx": nested_if(60),
        "nested_seq_type_5000.onnx": nested_sequence_type(5000),
        "nested_seq_type_40.onnx": nested_sequence_type(40),
        "chain_100k.onnx": identity_chain(100000),
        "chain_small.onnx": identity_chain(3),
        "chain_100k_reversed.onnx": identity_chain_shuffled(100000),
        "split_100k.onnx": wide_split(100000),
        "many_values_50k.onnx": many_values(50000),
        "hostile_names.onnx": hostile_names(),
        "symbolic.onnx": huge_shape_model(),
        # npy files whose headers claim shapes whose element counts overflow 64 bits
        "huge_shape.npy": npy("(4294967296, 4294967296, 16)"),
        "huge_shape2.npy": npy("(9223372036854775807, 2)"),
        "x_4.npy": npy("(4,)", payload=struct.pack("<4f", 1, -2, 3, -4)),
    }
    for name, data in files.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)
    print("wrote %d files to %s" % (len(files), out))


if __name__ == "__main__":
    main()
