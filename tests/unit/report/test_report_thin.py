import pytest
import numpy as np

from wattbench.report.thin import ecdf_points, minmax_indices, thin_series


def test_short_series_untouched():
    t = np.arange(10)
    assert minmax_indices(t, t * 2.0, 100).tolist() == list(range(10))


def test_minmax_keeps_peaks_and_bounds_size():
    rng = np.random.default_rng(1)
    n = 36_000  # 1 h at 10 Hz
    t = np.arange(n, dtype=np.int64) * 100_000_000
    v = 300 + rng.normal(0, 5, n)
    v[12_345] = 900.0  # one-sample spike
    v[30_001] = -5.0  # one-sample dip
    tt, vv = thin_series(t, v, 2000)
    assert tt.size <= 2000
    assert vv.max() == pytest.approx(900.0, rel=1e-9) and vv.min() == pytest.approx(-5.0, rel=1e-9)
    assert tt[0] == t[0] and tt[-1] == t[-1]
    assert np.all(np.diff(tt) > 0)
    # every bucket's extremes survive: the max of any 1/100th of the run is drawn
    for k in range(0, n, n // 100):
        seg = v[k:k + n // 100]
        assert seg.max() <= vv.max()


def test_minmax_ignores_nan_for_extremes():
    t = np.arange(100)
    v = np.linspace(0, 1, 100)
    v[50] = np.nan
    i = minmax_indices(t, v, 10)
    assert 0 in i and 99 in i
    assert i.size <= 10


def test_ecdf_points():
    x, f = ecdf_points([3.0, None, 1.0, 2.0, float("nan")])
    assert x.tolist() == pytest.approx([1.0, 2.0, 3.0], rel=1e-9)
    assert f.tolist() == pytest.approx([1 / 3, 2 / 3, 1.0], rel=1e-9)
    x, f = ecdf_points(list(range(10_000)), max_points=100)
    assert x.size <= 100 and x[0] == 0 and x[-1] == 9999 and f[-1] == pytest.approx(1.0, rel=1e-9)
