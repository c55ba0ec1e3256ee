"""Result objects: the fields of alma's results JSON (docs/json.md) as attributes."""
import json
import math

from . import _lib


def _clean(x):
    """NaN/inf -> None, as alma writes them (JSON has no NaN)."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    return x


class Result:
    """One row: a conversion at one batch size. Every JSON field is an attribute (r.latency_ms,
    r.check, r.error, r.traceback, ...); missing ones read as None."""

    def __init__(self, d):
        self._d = d

    def __getattr__(self, k):
        if k.startswith("_"):
            raise AttributeError(k)
        return self._d.get(k)

    def to_dict(self):
        return dict(self._d)

    @property
    def ok(self):
        return self._d.get("status") == "ok"

    @property
    def throughput(self):
        """Samples per second: timed samples / inference time (throughput_samples_per_s)."""
        return self._d.get("throughput_samples_per_s")

    @property
    def median_ms(self):
        lat = self._d.get("latency_ms") or {}
        return lat.get("p50")

    @property
    def check_passed(self):
        c = self._d.get("check") or {}
        return bool(c.get("performed")) and bool(c.get("passed"))

    def __repr__(self):
        if self.ok:
            return (f"<Result {self.conversion}: ok, median {self.median_ms:.4g} ms, "
                    f"{self.throughput:.4g} samples/s>")
        return f"<Result {self.conversion}: {self.status}: {self.error}>"


class Results:
    """Every row of one benchmark_model call, with the machine, model, data and config."""

    def __init__(self, doc):
        self._doc = _clean(doc)
        self._rows = [Result(r) for r in self._doc.get("results", [])]

    def __iter__(self):
        return iter(self._rows)

    def __len__(self):
        return len(self._rows)

    def __getitem__(self, key):
        if isinstance(key, str):
            for r in self._rows:
                if r.conversion == key:
                    return r
            raise KeyError(key)
        return self._rows[key]

    def __getattr__(self, k):
        if k.startswith("_"):
            raise AttributeError(k)
        return self._doc.get(k)

    @property
    def n_failed(self):
        return sum(1 for r in self._rows if r.status != "ok")

    def to_dict(self, include_raw=True):
        d = json.loads(json.dumps(self._doc))
        if not include_raw:
            for r in d.get("results", []):
                r.pop("raw_ms", None)
        return d

    def to_json(self, include_raw=False, indent=2):
        return json.dumps(self.to_dict(include_raw), indent=indent)

    def save_json(self, path, include_raw=False):
        with open(path, "w") as f:
            f.write(self.to_json(include_raw) + "\n")

    def save_csv(self, path):
        """alma's CSV (docs/json.md), written by the library."""
        _lib.with_results(self.to_json(include_raw=False), lambda h: _lib.check(
            _lib.lib().alma_results_save_csv(h, str(path).encode()), f"writing '{path}'"))

    def print(self, summary_only=False, include_traceback=True, file=None):
        """alma's text report, the CLI's: a block per conversion, then the summary table (to `file`,
        default sys.stdout)."""
        _lib.print_results(self.to_json(include_raw=False), file=file, summary_only=summary_only,
                           include_traceback=include_traceback)


def display_all_results(results, summary_only=False, include_traceback=True, file=None):
    """Prints every result the way `alma bench` does."""
    results.print(summary_only=summary_only, include_traceback=include_traceback, file=file)
