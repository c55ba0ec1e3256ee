"""Writes the scikit-learn pipelines under tests/ops_ml/models/ that check_ml_ort.py runs through
alma and ONNX Runtime: small models trained here on synthetic data (our own, seeded), exported by
skl2onnx with ZipMap off (class probabilities as a float tensor, labels as int64).

usage: make_sklearn_models.py [OUT_DIR]     (python with scikit-learn and skl2onnx: .venv-ml)

Each model keeps to a few KB: few, shallow trees and few support vectors."""
import os
import sys

import numpy as np
import onnx
from skl2onnx import to_onnx
from sklearn.base import is_classifier
from sklearn.datasets import make_classification, make_regression
from sklearn.ensemble import GradientBoostingClassifier, RandomForestClassifier, RandomForestRegressor
from sklearn.impute import SimpleImputer
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.neural_network import MLPClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import MinMaxScaler, StandardScaler
from sklearn.svm import SVC, SVR

OPSETS = {"": 17, "ai.onnx.ml": 3}


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "models")
    os.makedirs(out, exist_ok=True)
    xc3, yc3 = make_classification(n_samples=300, n_features=6, n_informative=4, n_classes=3, random_state=1)
    xc2, yc2 = make_classification(n_samples=300, n_features=5, n_informative=3, random_state=2)
    xr, yr = make_regression(n_samples=300, n_features=5, noise=0.5, random_state=3)
    xc3, xc2, xr = (a.astype(np.float32) for a in (xc3, xc2, xr))
    xm = xr.copy()
    xm[::7, 1] = np.nan  # SimpleImputer has something to replace
    models = {
        "scaler_logreg3": (make_pipeline(StandardScaler(), LogisticRegression(max_iter=500)), xc3, yc3),
        "scaler_logreg2": (make_pipeline(StandardScaler(), LogisticRegression(max_iter=500)), xc2, yc2),
        "rf_classifier2": (RandomForestClassifier(n_estimators=4, max_depth=4, random_state=0), xc2, yc2),
        "rf_classifier3": (RandomForestClassifier(n_estimators=3, max_depth=3, random_state=0), xc3, yc3),
        "rf_regressor": (RandomForestRegressor(n_estimators=4, max_depth=4, random_state=0), xr, yr),
        "gb_classifier2": (GradientBoostingClassifier(n_estimators=6, max_depth=2, random_state=0), xc2, yc2),
        "gb_classifier3": (GradientBoostingClassifier(n_estimators=3, max_depth=2, random_state=0), xc3, yc3),
        "svc_rbf3": (make_pipeline(MinMaxScaler(), SVC(C=0.5, random_state=0)), xc3[:60], yc3[:60]),
        "svc_rbf2_proba": (SVC(probability=True, random_state=0), xc2[:50], yc2[:50]),
        "svr_rbf": (SVR(C=2.0), xr[:40], yr[:40]),
        "imputer_linreg": (make_pipeline(SimpleImputer(), StandardScaler(), LinearRegression()), xm, yr),
        "mlp_classifier3": (make_pipeline(StandardScaler(), MLPClassifier(hidden_layer_sizes=(8,), max_iter=300,
                                                                          random_state=0)), xc3, yc3),
    }
    import warnings

    warnings.filterwarnings("ignore")
    total = 0
    for name, (est, x, y) in models.items():
        est.fit(x, y)
        final = est.steps[-1][1] if hasattr(est, "steps") else est
        opts = {id(final): {"zipmap": False}} if is_classifier(final) else None
        onx = to_onnx(est, x[:1], target_opset=OPSETS, options=opts)
        onx.producer_name = "alma tests/ops_ml/make_sklearn_models.py (skl2onnx)"
        onnx.checker.check_model(onx)
        path = os.path.join(out, name + ".onnx")
        onnx.save(onx, path)
        size = os.path.getsize(path)
        total += size
        ops = sorted({f"{n.domain + '.' if n.domain else ''}{n.op_type}" for n in onx.graph.node})
        print(f"{name:18s} {size:7d} B  {' '.join(ops)}")
    print(f"total {total} B")


if __name__ == "__main__":
    main()
