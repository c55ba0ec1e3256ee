"""Writes the bad (and a few good) models and data files used by the CLI bad-input tests (e2e.py).

usage: make_bad_models.py OUTDIR
Everything is built with onnx.helper / numpy from a fixed seed, so the files are the same each run.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

OPSET = [h.make_opsetid("", 13)]


def model(nodes, inputs, outputs, inits=(), opset=None, check=True, name="g"):
    g = h.make_graph(nodes, name, inputs, outputs, list(inits))
    m = h.make_model(g, opset_imports=opset or OPSET, producer_name="alma-e2e")
    m.ir_version = 8
    if check:
        onnx.checker.check_model(m)
    return m


def vi(name, dtype, shape):
    return h.make_tensor_value_info(name, dtype, shape)


def main():
    d = sys.argv[1]
    os.makedirs(d, exist_ok=True)
    rng = np.random.default_rng(1234)

    def save(name, m):
        with open(os.path.join(d, name), "wb") as f:
            f.write(m.SerializeToString() if hasattr(m, "SerializeToString") else m)

    def npy(name, a):
        np.save(os.path.join(d, name), a)

    # A valid model: y = relu(x + w), x: float32 [batch, 4].
    w = nh.from_array(np.arange(4, dtype=np.float32), "w")
    good = model([h.make_node("Add", ["x", "w"], ["s"], name="add"), h.make_node("Relu", ["s"], ["y"], name="relu")],
                 [vi("x", T.FLOAT, ["batch", 4])], [vi("y", T.FLOAT, ["batch", 4])], [w])
    save("good.onnx", good)
    npy("x_ok.npy", rng.standard_normal((2, 4)).astype(np.float32))
    npy("x_f64.npy", rng.standard_normal((2, 4)))
    npy("x_i64.npy", np.arange(8, dtype=np.int64).reshape(2, 4))
    npy("x_badshape.npy", rng.standard_normal((2, 5)).astype(np.float32))
    npy("x_badrank.npy", rng.standard_normal((2, 4, 1)).astype(np.float32))
    with open(os.path.join(d, "x_corrupt.npy"), "wb") as f:
        f.write(b"\x93NUMPY\x01\x00\x20\x00{'descr': '<f4', 'shape': (2,4)}")

    # Not models at all.
    save("empty.onnx", b"")
    save("random.onnx", rng.integers(0, 256, 4096, dtype=np.uint8).tobytes())
    save("text.onnx", b"this is not a model, just some text\n" * 20)
    big = nh.from_array(rng.standard_normal((64, 256)).astype(np.float32), "big")
    full = model([h.make_node("MatMul", ["x", "big"], ["y"], name="mm")], [vi("x", T.FLOAT, [1, 64])],
                 [vi("y", T.FLOAT, [1, 256])], [big]).SerializeToString()
    save("truncated.onnx", full[: len(full) // 2])
    save("truncated_tail.onnx", full[:-3])
    # Valid protobufs that are not ModelProtos.
    save("tensorproto.onnx", nh.from_array(np.arange(100, dtype=np.float32), "t"))
    save("graphproto.onnx", good.graph)
    save("nodeproto.onnx", h.make_node("Relu", ["a"], ["b"], name="r"))

    # Graph-level errors.
    save("unknown_op.onnx", model([h.make_node("FrobnicateXYZ", ["x"], ["y"], name="frob")],
                                  [vi("x", T.FLOAT, [2])], [vi("y", T.FLOAT, [2])], check=False))
    save("custom_domain.onnx", model([h.make_node("MyOp", ["x"], ["y"], name="myop", domain="com.example")],
                                     [vi("x", T.FLOAT, [2])], [vi("y", T.FLOAT, [2])],
                                     opset=OPSET + [h.make_opsetid("com.example", 1)], check=False))
    save("cycle.onnx", model([h.make_node("Relu", ["b"], ["a"], name="first"),
                              h.make_node("Relu", ["a"], ["b"], name="second")],
                             [vi("x", T.FLOAT, [2])], [vi("a", T.FLOAT, [2])], check=False))
    save("dangling.onnx", model([h.make_node("Relu", ["nowhere"], ["y"], name="orphan")],
                                [vi("x", T.FLOAT, [2])], [vi("y", T.FLOAT, [2])], check=False))
    save("dup_output.onnx", model([h.make_node("Relu", ["x"], ["y"], name="r1"),
                                   h.make_node("Neg", ["x"], ["y"], name="r2")],
                                  [vi("x", T.FLOAT, [2])], [vi("y", T.FLOAT, [2])], check=False))
    save("no_opset.onnx", model([h.make_node("Relu", ["x"], ["y"], name="r")], [vi("x", T.FLOAT, [2])],
                                [vi("y", T.FLOAT, [2])], opset=[h.make_opsetid("com.example", 1)], check=False))
    save("future_opset.onnx", model([h.make_node("Relu", ["x"], ["y"], name="r")], [vi("x", T.FLOAT, [2])],
                                    [vi("y", T.FLOAT, [2])], opset=[h.make_opsetid("", 99)], check=False))
    save("domains.onnx", model([h.make_node("Relu", ["x"], ["y"], name="r")], [vi("x", T.FLOAT, [2])],
                               [vi("y", T.FLOAT, [2])], opset=[h.make_opsetid("ai.onnx.ml", 3), h.make_opsetid("", 17),
                                                                h.make_opsetid("com.microsoft", 1)]))
    save("bad_perm.onnx", model([h.make_node("Transpose", ["x"], ["y"], name="tp", perm=[0, 0])],
                                [vi("x", T.FLOAT, [2, 3])], [vi("y", T.FLOAT, [3, 2])], check=False))
    save("bad_reshape.onnx", model([h.make_node("Reshape", ["x", "shape"], ["y"], name="rs")],
                                   [vi("x", T.FLOAT, [2, 3])], [vi("y", T.FLOAT, [4, 4])],
                                   [nh.from_array(np.array([4, 4], dtype=np.int64), "shape")], check=False))
    save("string_input.onnx", model([h.make_node("Identity", ["x"], ["y"], name="id")],
                                    [vi("x", T.STRING, [2])], [vi("y", T.STRING, [2])], check=False))
    save("huge_input.onnx", model([h.make_node("Relu", ["x"], ["y"], name="r")],
                                  [vi("x", T.FLOAT, [1 << 20, 1 << 20, 1 << 20])],
                                  [vi("y", T.FLOAT, [1 << 20, 1 << 20, 1 << 20])], check=False))
    # an initializer whose raw_data is shorter than its shape needs
    short_init = nh.from_array(np.zeros(16, dtype=np.float32), "w")
    short_init.raw_data = short_init.raw_data[:10]
    save("short_initializer.onnx", model([h.make_node("Add", ["x", "w"], ["y"], name="add")],
                                         [vi("x", T.FLOAT, [16])], [vi("y", T.FLOAT, [16])], [short_init],
                                         check=False))

    # Out-of-range indices. Constant ones may be caught while loading; input ones at run time.
    data = nh.from_array(np.arange(12, dtype=np.float32).reshape(4, 3), "data")
    save("gather_oob_const.onnx", model(
        [h.make_node("Gather", ["data", "idx"], ["y"], name="gather_const", axis=0)],
        [vi("x", T.FLOAT, [1])], [vi("y", T.FLOAT, [2, 3])],
        [data, nh.from_array(np.array([0, 9], dtype=np.int64), "idx")], check=False))
    gather_in = model([h.make_node("Gather", ["data", "idx"], ["y"], name="gather_in", axis=0)],
                      [vi("idx", T.INT64, [3])], [vi("y", T.FLOAT, [3, 3])], [data])
    save("gather_input.onnx", gather_in)
    npy("idx_ok.npy", np.array([0, 3, -1], dtype=np.int64))
    npy("idx_oob.npy", np.array([0, 1, 99], dtype=np.int64))
    npy("idx_oob_neg.npy", np.array([-5, 0, 1], dtype=np.int64))
    npy("idx_i32.npy", np.array([0, 1, 2], dtype=np.int32))
    ge = model([h.make_node("GatherElements", ["data", "idx"], ["y"], name="ge", axis=1)],
               [vi("idx", T.INT64, [4, 3])], [vi("y", T.FLOAT, [4, 3])], [data])
    save("gather_elements_input.onnx", ge)
    npy("ge_oob.npy", np.full((4, 3), 7, dtype=np.int64))

    def slice_model(name, starts, ends, axes=None, steps=None, out_shape=None):
        inits = [nh.from_array(np.array(starts, dtype=np.int64), "starts"),
                 nh.from_array(np.array(ends, dtype=np.int64), "ends")]
        ins = ["x", "starts", "ends"]
        if axes is not None:
            inits.append(nh.from_array(np.array(axes, dtype=np.int64), "axes"))
            ins.append("axes")
        if steps is not None:
            inits.append(nh.from_array(np.array(steps, dtype=np.int64), "steps"))
            ins.append("steps")
        save(name, model([h.make_node("Slice", ins, ["y"], name="slice")], [vi("x", T.FLOAT, [4, 6])],
                         [vi("y", T.FLOAT, out_shape)], inits, check=False))

    i64max, i64min = np.iinfo(np.int64).max, np.iinfo(np.int64).min
    # out-of-range starts/ends are clamped by the ONNX spec: this one must work, giving [4, 5]
    slice_model("slice_clamp.onnx", [-100, 1], [1000, i64max], [0, 1], None, [4, 5])
    slice_model("slice_clamp_neg_step.onnx", [i64max, i64max], [i64min, i64min], [0, 1], [-1, -2], [4, 3])
    slice_model("slice_step0.onnx", [0], [2], [1], [0], [4, 2])
    slice_model("slice_bad_axis.onnx", [0], [2], [5], None, [4, 2])
    slice_model("slice_dup_axis.onnx", [0, 0], [2, 2], [1, 1], None, [4, 2])

    # External data: missing file, file too short, path escaping the model's directory.
    def ext_model(name, location, offset=0, length=None):
        t = nh.from_array(np.ones(256, dtype=np.float32), "w")
        t.ClearField("raw_data")
        t.data_location = T.EXTERNAL
        for k, v in (("location", location), ("offset", str(offset))) + ((("length", str(length)),) if length else ()):
            e = t.external_data.add()
            e.key, e.value = k, v
        save(name, model([h.make_node("Add", ["x", "w"], ["y"], name="add")], [vi("x", T.FLOAT, [256])],
                         [vi("y", T.FLOAT, [256])], [t], check=False))

    ext_model("ext_missing.onnx", "no_such_weights.bin")
    ext_model("ext_short.onnx", "short_weights.bin")
    with open(os.path.join(d, "short_weights.bin"), "wb") as f:
        f.write(b"\0" * 100)  # 1024 needed
    ext_model("ext_offset.onnx", "full_weights.bin", offset=1000)
    ext_model("ext_ok.onnx", "full_weights.bin", offset=0, length=1024)
    with open(os.path.join(d, "full_weights.bin"), "wb") as f:
        f.write(np.full(256, 2.0, dtype=np.float32).tobytes())
    ext_model("ext_escape.onnx", "../../etc/passwd")
    ext_model("ext_absolute.onnx", "/etc/passwd")
    ext_model("ext_bad_length.onnx", "full_weights.bin", offset=0, length=12)

    # Symbolic links and special files as external data: a link leading out of the model's
    # directory (to a file, or a directory link on the way) must be refused before any byte of the
    # target is read; a link that stays inside is fine; a FIFO must be refused, not block forever.
    outside = os.path.join(os.path.dirname(os.path.abspath(d)), "e2e_outside")
    os.makedirs(outside, exist_ok=True)
    with open(os.path.join(outside, "secret.bin"), "wb") as f:
        f.write(np.full(256, 7.0, dtype=np.float32).tobytes())

    def link(name, target):
        p = os.path.join(d, name)
        if os.path.lexists(p):
            os.remove(p)
        os.symlink(target, p)

    link("link_out.bin", os.path.join(outside, "secret.bin"))
    ext_model("ext_link_file.onnx", "link_out.bin")
    link("link_dir", outside)
    ext_model("ext_link_dir.onnx", "link_dir/secret.bin")
    link("link_root", "/")
    ext_model("ext_link_root.onnx", "link_root/etc/passwd")
    link("link_in.bin", "full_weights.bin")
    ext_model("ext_link_inside.onnx", "link_in.bin")
    fifo = os.path.join(d, "fifo_weights.bin")
    if os.path.lexists(fifo):
        os.remove(fifo)
    os.mkfifo(fifo)
    ext_model("ext_fifo.onnx", "fifo_weights.bin")
    os.makedirs(os.path.join(d, "weights_dir"), exist_ok=True)
    ext_model("ext_directory.onnx", "weights_dir")

    # Two inputs sharing the symbolic dim "batch": binding it to 2 and 3 must be refused.
    save("shared_batch.onnx", model([h.make_node("Add", ["a", "b"], ["y"], name="add")],
                                    [vi("a", T.FLOAT, ["batch", 4]), vi("b", T.FLOAT, ["batch", 4])],
                                    [vi("y", T.FLOAT, ["batch", 4])]))
    npy("a2.npy", np.ones((2, 4), dtype=np.float32))
    npy("b3.npy", np.ones((3, 4), dtype=np.float32))

    # Output names that need sanitizing when written as files.
    save("odd_names.onnx", model([h.make_node("Relu", ["x"], ["out/relu:0"], name="r"),
                                  h.make_node("Neg", ["x"], ["out relu 0"], name="n")],
                                 [vi("x", T.FLOAT, [3])],
                                 [vi("out/relu:0", T.FLOAT, [3]), vi("out relu 0", T.FLOAT, [3])]))
    # A convolution over any image size (tf2onnx writes [N, H, W, C] fully symbolic): INT8_STATIC
    # through `alma run` must calibrate at the given input's size, not with unknown dims set to 1.
    save("dyn_conv.onnx", model([h.make_node("Conv", ["x", "w"], ["y"], name="conv", kernel_shape=[3, 3])],
                                [vi("x", T.FLOAT, ["n", 3, "h", "w"])], [vi("y", T.FLOAT, ["n", 4, "oh", "ow"])],
                                [nh.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w")]))
    npy("dyn_conv_x.npy", rng.standard_normal((1, 3, 8, 8)).astype(np.float32))
    with open(os.path.join(d, "not_a_dir"), "w") as f:
        f.write("a file\n")
    print(f"wrote bad-input fixtures to {d}")


if __name__ == "__main__":
    main()
