"""Writes the committed scikit-learn pipelines with string features (tests/ops_string/models/):
skl_ordinal.onnx: OrdinalEncoder on two string columns -> LogisticRegression (skl2onnx emits
  ArrayFeatureExtractor + LabelEncoder on strings, then LinearClassifier);
skl_onehot.onnx: OneHotEncoder(handle_unknown="ignore") -> LogisticRegression (OneHotEncoder with
  cats_strings). Both take X: string [N, 2]; labels int64, probabilities float (zipmap off).

usage: .venv-ml/bin/python make_skl_models.py   (scikit-learn and skl2onnx)"""
import os

import numpy as np
import onnx
from skl2onnx import convert_sklearn
from skl2onnx.common.data_types import StringTensorType
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import OneHotEncoder, OrdinalEncoder

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "models")
os.makedirs(OUT, exist_ok=True)
rng = np.random.default_rng(0)
X = np.stack([np.array(["red", "green", "blue", "über"])[rng.integers(0, 4, 80)],
              np.array(["s", "m", "l"])[rng.integers(0, 3, 80)]], axis=1)
y = ((X[:, 0] == "red") | (X[:, 1] == "l")).astype(int) + (X[:, 0] == "über").astype(int)
for name, enc in (("skl_ordinal", OrdinalEncoder()), ("skl_onehot", OneHotEncoder(handle_unknown="ignore"))):
    pipe = Pipeline([("e", enc), ("lr", LogisticRegression())]).fit(X, y)
    m = convert_sklearn(pipe, initial_types=[("X", StringTensorType([None, 2]))],
                        options={LogisticRegression: {"zipmap": False}}, target_opset={"": 17, "ai.onnx.ml": 3})
    onnx.save(m, os.path.join(OUT, name + ".onnx"))
    print("wrote", name)
