"""Builds the string test models with onnx.helper (graph inputs numeric: strings come from
initializers and Constant nodes, as `alma run` feeds numbers).

text_mix(): idx[4] int64 picks words (Gather from a string initializer) -> Reshape [1,4] ->
  Transpose/Reshape back -> StringNormalizer(LOWER, stopwords "the") -> LabelEncoder-2
  (keys_strings -> int64, default 7) -> Gather rows of an embedding E[8,3] -> Concat with a
  float input F[k,3] -> MatMul(W[3,2]) -> Y; alongside, the normalized words joined to a suffix
  (StringConcat), Where picking between two string tensors by a bool computed with Equal on
  strings, StringSplit of a Constant value_strings, and LabelEncoder-4 int64 -> string
  (values_tensor/default_tensor): string outputs S, P, Q, L and a count output.
tfidf_gemm(): X[2,6] int64 token ids -> TfIdfVectorizer(TFIDF, 1-2 grams, skip 1, weights) -> Gemm
  -> Y; and the same on strings: token ids -> Gather from a string vocabulary -> TfIdfVectorizer
  (pool_strings, TF) -> Gemm -> Z.
cast_roundtrip(): X float32[N] -> Cast(string) S -> Cast(float) R, -> Cast(double) D, and int64
  K -> Cast(string) -> Cast(int32) I; a CategoryMapper int64 -> string -> CategoryMapper back;
  RegexFullMatch over the numbers' text and the category names (opset 21: RegexFullMatch-20).
"""
import numpy as np
import onnx
from onnx import TensorProto as TP, helper as h, numpy_helper as nh


def _strs(a, name):
    return nh.from_array(np.array(a, dtype=object), name)


def _model(nodes, name, inputs, outputs, inits, ml=False, opset=21):
    g = h.make_graph(nodes, name, inputs, outputs, inits)
    ops = [h.make_opsetid("", opset)]
    if ml:
        ops.append(h.make_opsetid("ai.onnx.ml", 4))
    m = h.make_model(g, opset_imports=ops)
    m.ir_version = 10

    return m


def text_mix():
    words = _strs(["The", "Monday", "APPLE", "the", "Été", "banana", "über", "Zebra"], "words")
    E = nh.from_array(np.arange(24, dtype=np.float32).reshape(8, 3) * 0.25 - 2, "E")
    W = nh.from_array(np.array([[0.5, -1], [2, 0.25], [-0.75, 1]], np.float32), "W")
    shp = nh.from_array(np.array([1, 4], np.int64), "shp")
    flat = nh.from_array(np.array([4], np.int64), "flat")
    suffix = _strs(["_x"], "suffix")
    apple = _strs(["apple"], "apple")
    other = _strs(["A", "B", "C"], "other")
    lekeys = ["monday", "apple", "été", "banana", "über", "zebra"]
    nodes = [
        h.make_node("Gather", ["words", "idx"], ["picked"], axis=0),
        h.make_node("Reshape", ["picked", "shp"], ["row"]),
        h.make_node("Transpose", ["row"], ["col"], perm=[1, 0]),
        h.make_node("Reshape", ["col", "flat"], ["picked2"]),
        h.make_node("StringNormalizer", ["picked2"], ["norm"], case_change_action="LOWER", is_case_sensitive=0,
                    stopwords=["the"], locale="C.UTF-8"),
        h.make_node("LabelEncoder", ["norm"], ["ids"], domain="ai.onnx.ml", keys_strings=lekeys,
                    values_int64s=[1, 2, 3, 4, 5, 6], default_int64=7),
        h.make_node("Gather", ["E", "ids"], ["emb"], axis=0),
        h.make_node("Concat", ["emb", "F"], ["cat"], axis=0),
        h.make_node("MatMul", ["cat", "W"], ["Y"]),
        h.make_node("StringConcat", ["norm", "suffix"], ["S"]),
        h.make_node("Equal", ["norm", "apple"], ["is_apple"]),
        h.make_node("Cast", ["is_apple"], ["C"], to=TP.INT64),
        h.make_node("Slice", ["other", "s0", "s1"], ["other2"]),
        h.make_node("Shape", ["norm"], ["nshape"]),
        h.make_node("Expand", ["other2", "nshape"], ["otherx"]),
        h.make_node("Size", ["norm"], ["nn"]),
        h.make_node("Constant", [], ["sentences"], value_strings=["a b  c", "hello world", "x"]),
        h.make_node("StringSplit", ["sentences"], ["P", "PN"], delimiter=" ", maxsplit=2),
        h.make_node("LabelEncoder", ["idx"], ["L"], domain="ai.onnx.ml",
                    keys_tensor=nh.from_array(np.array([0, 1, 2, 5], np.int64)),
                    values_tensor=_strs(["zero", "one", "two", "five"], ""),
                    default_tensor=_strs(["none"], "")),
    ]
    # Where(norm == "apple", "APPLE!", norm) over however many words the normalizer kept
    nodes += [
        h.make_node("Where", ["is_apple", "bang", "norm"], ["Q"]),
    ]
    inits = [words, E, W, shp, flat, suffix, apple, other, _strs(["APPLE!"], "bang"),
             nh.from_array(np.array([1], np.int64), "s0"), nh.from_array(np.array([2], np.int64), "s1")]
    ins = [h.make_tensor_value_info("idx", TP.INT64, [4]), h.make_tensor_value_info("F", TP.FLOAT, [2, 3])]
    outs = [h.make_tensor_value_info("Y", TP.FLOAT, None), h.make_tensor_value_info("S", TP.STRING, None),
            h.make_tensor_value_info("C", TP.INT64, None), h.make_tensor_value_info("P", TP.STRING, None),
            h.make_tensor_value_info("PN", TP.INT64, None), h.make_tensor_value_info("L", TP.STRING, None),
            h.make_tensor_value_info("Q", TP.STRING, None), h.make_tensor_value_info("otherx", TP.STRING, None)]
    return _model(nodes, "text_mix", ins, outs, inits, ml=True)


def tfidf_gemm():
    vocab = _strs(["a", "b", "c", "d", "e", "f", "g"], "vocab")
    Wt = nh.from_array(np.linspace(-1, 1, 7 * 3, dtype=np.float32).reshape(7, 3), "Wt")
    Ws = nh.from_array(np.linspace(1, -1, 5 * 2, dtype=np.float32).reshape(5, 2), "Ws")
    nodes = [
        h.make_node("TfIdfVectorizer", ["X"], ["tf"], mode="TFIDF", min_gram_length=1, max_gram_length=2,
                    max_skip_count=1, ngram_counts=[0, 4], ngram_indexes=[0, 1, 2, 3, 4, 5, 6],
                    pool_int64s=[2, 3, 5, 4, 5, 6, 7, 8, 6, 7],
                    weights=[0.5, 1, 1.5, 2, 2.5, 3, 3.5]),
        h.make_node("Gemm", ["tf", "Wt"], ["Y"], alpha=0.5),
        h.make_node("Gather", ["vocab", "X"], ["toks"], axis=0),
        h.make_node("TfIdfVectorizer", ["toks"], ["tfs"], mode="TF", min_gram_length=2, max_gram_length=3,
                    max_skip_count=2, ngram_counts=[0, 0, 4], ngram_indexes=[4, 3, 2, 1, 0],
                    pool_strings=["c", "d", "d", "f", "c", "d", "e"]),
        h.make_node("Gemm", ["tfs", "Ws"], ["Z"]),
        h.make_node("TfIdfVectorizer", ["X"], ["idf"], mode="IDF", min_gram_length=1, max_gram_length=1,
                    max_skip_count=0, ngram_counts=[0], ngram_indexes=[2, 0, 1], pool_int64s=[3, 6, 0]),
    ]
    ins = [h.make_tensor_value_info("X", TP.INT64, [2, 6])]
    outs = [h.make_tensor_value_info(n, TP.FLOAT, None) for n in ("Y", "Z", "idf")]
    return _model(nodes, "tfidf_gemm", ins, outs, [vocab, Wt, Ws], opset=21)


def cast_roundtrip():
    nodes = [
        h.make_node("Cast", ["X"], ["S"], to=TP.STRING),
        h.make_node("Cast", ["S"], ["R"], to=TP.FLOAT),
        h.make_node("Cast", ["S"], ["D"], to=TP.DOUBLE),
        h.make_node("Cast", ["K"], ["KS"], to=TP.STRING),
        h.make_node("Cast", ["KS"], ["I"], to=TP.INT32),
        h.make_node("CategoryMapper", ["K"], ["CM"], domain="ai.onnx.ml", cats_strings=["cat", "dog", "emu"],
                    cats_int64s=[1, 2, 3], default_string="?"),
        h.make_node("CategoryMapper", ["CM"], ["CB"], domain="ai.onnx.ml", cats_strings=["cat", "dog", "emu"],
                    cats_int64s=[1, 2, 3], default_int64=-9),
        h.make_node("RegexFullMatch", ["S"], ["RX"], pattern=r"-?\d+(\.\d+)?(e[+-]\d+)?"),
        h.make_node("RegexFullMatch", ["CM"], ["RC"], pattern=r"[a-d][a-z]{2}|\?"),
    ]
    ins = [h.make_tensor_value_info("X", TP.FLOAT, [8]), h.make_tensor_value_info("K", TP.INT64, [5])]
    outs = [h.make_tensor_value_info("S", TP.STRING, None), h.make_tensor_value_info("R", TP.FLOAT, None),
            h.make_tensor_value_info("D", TP.DOUBLE, None), h.make_tensor_value_info("KS", TP.STRING, None),
            h.make_tensor_value_info("I", TP.INT32, None), h.make_tensor_value_info("CM", TP.STRING, None),
            h.make_tensor_value_info("CB", TP.INT64, None), h.make_tensor_value_info("RX", TP.BOOL, None),
            h.make_tensor_value_info("RC", TP.BOOL, None)]
    return _model(nodes, "cast_roundtrip", ins, outs, [], ml=True, opset=21)
