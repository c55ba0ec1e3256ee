"""numpy side of the .npy interop test (tests/unit/npy_test.c).

gen DIR:   writes np_<dtype>.npy (values as npy_test.c expects) plus Fortran-order, v2, v3 and
           big-endian variants.
check DIR: loads alma_<dtype>.npy written by npy_test and compares with the same values.
"""
import os
import sys

import numpy as np

DTYPES = ["f2", "f4", "f8", "i1", "u1", "i2", "u2", "i4", "u4", "i8", "u8", "b1"]


def values(dt):
    i = np.arange(24)
    if dt == "b1":
        v = i % 7 == 0
    elif dt[0] == "u":
        v = i
    elif dt[0] == "f":
        v = (i - 5) * 0.5
    else:
        v = i - 5
    return v.astype(dt).reshape(2, 3, 4)


def write_version(path, arr, version):
    with open(path, "wb") as f:
        np.lib.format.write_array(f, arr, version=version)


def main():
    mode, d = sys.argv[1], sys.argv[2]
    os.makedirs(d, exist_ok=True)
    if mode == "gen":
        for dt in DTYPES:
            np.save(os.path.join(d, f"np_{dt}.npy"), values(dt))
        np.save(os.path.join(d, "np_f4_fortran.npy"), np.asfortranarray(values("f4")))
        write_version(os.path.join(d, "np_f4_v2.npy"), values("f4"), (2, 0))
        write_version(os.path.join(d, "np_f4_v3.npy"), values("f4"), (3, 0))
        np.save(os.path.join(d, "np_f8_be.npy"), values("f8").astype(">f8"))
    else:
        bad = 0
        for dt in DTYPES:
            a = np.load(os.path.join(d, f"alma_{dt}.npy"))
            e = values(dt)
            if a.dtype != e.dtype or a.shape != e.shape or not np.array_equal(a, e):
                print(f"alma_{dt}.npy: got {a.dtype} {a.shape} {a.ravel()[:6]}, expected {e.dtype} {e.shape}")
                bad += 1
        print(f"numpy read {len(DTYPES) - bad}/{len(DTYPES)} alma-written files correctly")
        sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
