#!/usr/bin/env python3
"""Check `kvscope export fp8-table` against an independent implementation: ml_dtypes' float8_e4m3fn and
float8_e5m2 (Google's, used by JAX).

usage: check-fp8.py DIR_E4M3 DIR_E5M2

- values.npy: every code's value equals ml_dtypes' decode of that byte (NaN where it is NaN).
- codes.npy: for every f16 bit pattern, where ml_dtypes' float32 -> float8 cast (round to nearest even)
  gives a finite value, kvscope chose the same code; where the cast gives Inf or NaN for a finite or
  infinite input (ml_dtypes does not saturate), kvscope chose +-max (it saturates, as vLLM's KV-cache
  write does); NaN inputs get 0x7F.
"""
import sys

import ml_dtypes
import numpy as np

FORMATS = {"e4m3": (ml_dtypes.float8_e4m3fn, 0x7E), "e5m2": (ml_dtypes.float8_e5m2, 0x7B)}


def check(name, folder):
    dt, max_code = FORMATS[name]
    values = np.load(f"{folder}/values.npy")
    codes = np.load(f"{folder}/codes.npy")
    assert values.shape == (256,) and values.dtype == np.float32, values.dtype
    assert codes.shape == (65536,) and codes.dtype == np.uint8, codes.dtype
    want = np.arange(256, dtype=np.uint8).view(dt).astype(np.float32)
    same = (values == want) | (np.isnan(values) & np.isnan(want))
    assert same.all(), f"{name}: values differ at codes {np.nonzero(~same)[0][:8]}"
    x = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.float16).astype(np.float32)
    cast = x.astype(dt)
    finite = np.isfinite(cast.astype(np.float32))
    ref = cast.view(np.uint8)
    bad = finite & (codes != ref)
    assert not bad.any(), f"{name}: {bad.sum()} codes differ from ml_dtypes, first at f16 {np.nonzero(bad)[0][:8]}"
    nan = np.isnan(x)
    assert (codes[nan] == 0x7F).all(), f"{name}: NaN inputs not 0x7F"
    sat = ~finite & ~nan
    sign = np.where(np.signbit(x[sat]), 0x80, 0).astype(np.uint8)
    assert (codes[sat] == (sign | max_code)).all(), f"{name}: out-of-range inputs do not saturate"
    print(f"{name}: 256 values and 65536 codes agree with ml_dtypes {ml_dtypes.__version__} "
          f"({finite.sum()} cast, {sat.sum()} saturated, {nan.sum()} NaN)")


if __name__ == "__main__":
    check("e4m3", sys.argv[1])
    check("e5m2", sys.argv[2])
