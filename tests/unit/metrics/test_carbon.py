import json

import pytest

from wattbench.core.errors import UserError
from wattbench.metrics.carbon import (IntensitySeries, annual_tonnes, carbon_g, carbon_g_per_million_tokens,
                                      carbon_g_per_request, window_intensity)
from wattbench.metrics.carbon_series import parse_carbon_intensity

S = 1_000_000_000
WALL0 = 1_790_000_000  # 2026-09-21T…Z, a whole second


def test_formulas_and_undefined():
    # 3.6 MJ = 1 kWh at 400 g/kWh, PUE 1.5 -> 600 g
    assert carbon_g(3.6e6, 400.0, pue=1.5) == pytest.approx(600.0)
    assert carbon_g_per_million_tokens(3.6e6, 2_000_000, 400.0) == pytest.approx(200.0)
    assert carbon_g_per_request(3.6e6, 8, 400.0) == pytest.approx(50.0)
    assert carbon_g(None, 400.0) is None and carbon_g(1.0, None) is None
    assert carbon_g_per_million_tokens(1.0, 0, 400.0) is None
    assert carbon_g_per_request(1.0, 0, 400.0) is None
    # 1 kW all year at 500 g/kWh: 8760 kWh * 0.5 kg = 4.38 t
    assert annual_tonnes(1000.0, 500.0) == pytest.approx(4.38)
    assert annual_tonnes(None, 500.0) is None


def test_intensity_change_mid_run_gives_energy_weighted_value():
    """Hourly series 300 then 100 g/kWh; the window straddles the change with 3x the power after it."""
    series = IntensitySeries((WALL0 - 3600.0, WALL0 + 0.0, WALL0 + 3600.0), (300.0, 300.0, 100.0), "t")
    anchor_wall, anchor_mono = WALL0 * S, 5 * S  # mono 5 s <-> wall WALL0
    change_mono = anchor_mono + 3600 * S

    def energy(a, b):  # 100 W before the change, 300 W after
        before = max(0, min(b, change_mono) - a) / S
        after = max(0, b - max(a, change_mono)) / S
        return 100.0 * before + 300.0 * after

    t0, t1 = change_mono - 10 * S, change_mono + 10 * S
    g, why = window_intensity(series, t0, t1, anchor_wall, anchor_mono, energy)
    assert why is None
    # energy-weighted: (1000 J * 300 + 3000 J * 100) / 4000 J = 150, not the time-weighted 200
    assert g == pytest.approx(150.0)
    # outside the series' span (last point holds one median step = 1 h): None with a reason
    g2, why2 = window_intensity(series, change_mono + 3599 * S, change_mono + 3601 * S, anchor_wall, anchor_mono,
                                energy)
    assert g2 is None and "covers" in why2
    assert window_intensity(IntensitySeries.constant(42.0), 0, 1, 0, 0, energy) == (pytest.approx(42.0, rel=1e-9), None)


def test_parse_number_and_electricity_maps_csv_and_json(tmp_path):
    assert parse_carbon_intensity("350").g_per_kwh == pytest.approx((350.0,), rel=1e-9)
    assert parse_carbon_intensity(None) is None
    csv_path = tmp_path / "DE_2026_hourly.csv"
    csv_path.write_text(
        "Datetime (UTC),Country,Zone Name,Zone Id,Carbon Intensity gCO₂eq/kWh (direct),"
        "Carbon Intensity gCO₂eq/kWh (LCA)\n"
        "2026-12-01 01:00:00,Germany,Germany,DE,310.5,380\n"
        "2026-12-01 00:00:00,Germany,Germany,DE,300.25,370\n", encoding="utf-8")
    s = parse_carbon_intensity(str(csv_path))
    assert s.g_per_kwh == pytest.approx((300.25, 310.5), rel=1e-9)  # sorted by time, the first intensity column
    assert s.wall_s[1] - s.wall_s[0] == pytest.approx(3600.0, rel=1e-9)
    js = tmp_path / "history.json"
    js.write_text(json.dumps({"zone": "DE", "history": [
        {"zone": "DE", "carbonIntensity": 302, "datetime": "2026-12-01T00:00:00.000Z", "isEstimated": False},
        {"zone": "DE", "carbonIntensity": 290, "datetime": "2026-12-01T01:00:00.000Z", "isEstimated": True}]}))
    s2 = parse_carbon_intensity(str(js))
    assert s2.g_per_kwh == pytest.approx((302.0, 290.0), rel=1e-9) and s2.wall_s[0] == s.wall_s[0]


@pytest.mark.parametrize("content,msg", [
    ("time,carbon_intensity\n2026-12-01T00:00:00Z,abc\n", ":2: the intensity 'abc' is not a number"),
    ("time,carbon_intensity\n2026-12-01T00:00:00Z,-5\n", "must be a number of gCO2e/kWh >= 0"),
    ("when,value\n1,2\n", "the header has no time column"),
    ("time,carbon_intensity\nyesterday,5\n", "'yesterday' is neither a date-time"),
    ("time,carbon_intensity\n100,5\n100,6\n", "rows 2 and 3 give the same time"),
    ("time,carbon_intensity\n", "the file has no rows"),
    ('{"zone": "DE"}', "expected a list of rows"),
    ("[{\"carbonIntensity\": 3}]", "needs a time"),
    ("[1, 2", "not valid JSON"),
])
def test_bad_files_one_line(tmp_path, content, msg):
    p = tmp_path / "ci.csv"
    p.write_text(content)
    with pytest.raises(UserError) as e:
        parse_carbon_intensity(str(p))
    assert msg in str(e.value) and "\n" not in str(e.value) and str(p) in str(e.value)


def test_bad_number_or_missing_file():
    with pytest.raises(UserError, match="neither a number"):
        parse_carbon_intensity("/nonexistent/ci.csv")
    with pytest.raises(UserError, match=">= 0"):
        parse_carbon_intensity("-3")
