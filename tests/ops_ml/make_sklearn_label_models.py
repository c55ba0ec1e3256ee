"""Writes the scikit-learn classifiers under tests/ops_ml/models_labels/ that check_ml_skl.py runs
through alma and ONNX Runtime: small models trained here on synthetic data (our own, seeded),
exported by skl2onnx in two forms:

- str_*: classifiers trained on string class labels, ZipMap off ({"zipmap": False}): the label
  output is a string tensor (classlabels_strings on LinearClassifier, SVMClassifier,
  TreeEnsembleClassifier), the probabilities a float tensor;
- zipmap_*: skl2onnx's default export, labels int64 or string, probabilities through ZipMap as a
  sequence of maps (seq(map(int64|string, float))).

usage: make_sklearn_label_models.py [OUT_DIR]     (python with scikit-learn and skl2onnx: .venv-ml)

Each model keeps to a few KB: few, shallow trees and few support vectors."""
import os
import sys
import warnings

import numpy as np
import onnx
from skl2onnx import to_onnx
from sklearn.datasets import make_classification
from sklearn.ensemble import GradientBoostingClassifier, RandomForestClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC, LinearSVC
from sklearn.tree import DecisionTreeClassifier

OPSETS = {"": 17, "ai.onnx.ml": 3}


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                             "models_labels")
    os.makedirs(out, exist_ok=True)
    xc3, yc3 = make_classification(n_samples=300, n_features=6, n_informative=4, n_classes=3, random_state=11)
    xc2, yc2 = make_classification(n_samples=300, n_features=5, n_informative=3, random_state=12)
    xc3, xc2 = xc3.astype(np.float32), xc2.astype(np.float32)
    names3 = np.array(["setosa", "versicolor", "virginica"])
    names2 = np.array(["no", "yes"])
    s3, s2 = names3[yc3], names2[yc2]
    models = {
        # string labels, ZipMap off
        "str_logreg2": (make_pipeline(StandardScaler(), LogisticRegression(max_iter=500)), xc2, s2, False),
        "str_logreg3": (make_pipeline(StandardScaler(), LogisticRegression(max_iter=500)), xc3, s3, False),
        "str_linearsvc2": (LinearSVC(random_state=0), xc2, s2, None),  # no probabilities: no zipmap option
        "str_linearsvc3": (LinearSVC(random_state=0), xc3, s3, None),
        "str_svc2": (SVC(C=0.5, random_state=0), xc2[:40], s2[:40], False),
        "str_svc3_proba": (SVC(probability=True, random_state=0), xc3[:45], s3[:45], False),
        "str_dtree2": (DecisionTreeClassifier(max_depth=3, random_state=0), xc2, s2, False),
        "str_dtree3": (DecisionTreeClassifier(max_depth=3, random_state=0), xc3, s3, False),
        "str_rf3": (RandomForestClassifier(n_estimators=3, max_depth=3, random_state=0), xc3, s3, False),
        "str_gb2": (GradientBoostingClassifier(n_estimators=4, max_depth=2, random_state=0), xc2, s2, False),
        "str_gb3": (GradientBoostingClassifier(n_estimators=3, max_depth=2, random_state=0), xc3, s3, False),
        # skl2onnx's default: ZipMap
        "zipmap_logreg3_str": (make_pipeline(StandardScaler(), LogisticRegression(max_iter=500)), xc3, s3, True),
        "zipmap_logreg2_int": (LogisticRegression(max_iter=500), xc2, yc2, True),
        "zipmap_rf2_str": (RandomForestClassifier(n_estimators=3, max_depth=3, random_state=0), xc2, s2, True),
        "zipmap_rf3_int": (RandomForestClassifier(n_estimators=3, max_depth=3, random_state=0), xc3, yc3, True),
        "zipmap_gb3_str": (GradientBoostingClassifier(n_estimators=3, max_depth=2, random_state=0), xc3, s3, True),
        "zipmap_svc3_proba_int": (SVC(probability=True, random_state=0), xc3[:45], yc3[:45], True),
    }
    warnings.filterwarnings("ignore")
    total = 0
    for name, (est, x, y, zipmap) in models.items():
        est.fit(x, y)
        final = est.steps[-1][1] if hasattr(est, "steps") else est
        opts = {id(final): {"zipmap": False}} if zipmap is False else None
        onx = to_onnx(est, x[:1], target_opset=OPSETS, options=opts)
        onx.producer_name = "alma tests/ops_ml/make_sklearn_label_models.py (skl2onnx)"
        onnx.checker.check_model(onx)
        path = os.path.join(out, name + ".onnx")
        onnx.save(onx, path)
        size = os.path.getsize(path)
        total += size
        ops = sorted({f"{n.domain + '.' if n.domain else ''}{n.op_type}" for n in onx.graph.node})
        print(f"{name:22s} {size:7d} B  {' '.join(ops)}")
    print(f"total {total} B")


if __name__ == "__main__":
    main()
