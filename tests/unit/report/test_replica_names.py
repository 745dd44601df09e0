"""A replica's row is named by what tells it apart from the level's other replicas, so the row
stays one line at 80 columns (``report.tables.target_name``); never the URL's credentials or path."""

from __future__ import annotations

from wattbench.report.tables import target_name


def test_one_host_names_ports():
    urls = ["http://127.0.0.1:8001/v1", "http://127.0.0.1:8002/v1"]
    assert [target_name(u, urls) for u in urls] == ["↳ :8001", "↳ :8002"]


def test_one_port_names_hosts_by_their_first_name_where_that_is_unique():
    urls = ["http://gpu-a.cluster.example.com:8000/v1", "http://gpu-b.cluster.example.com:8000/v1"]
    assert [target_name(u, urls) for u in urls] == ["↳ gpu-a", "↳ gpu-b"]
    same_first = ["http://node.rack1.example.com:8000", "http://node.rack2.example.com:8000"]
    assert [target_name(u, same_first) for u in same_first] == ["↳ node.rack1.example.com",
                                                                  "↳ node.rack2.example.com"]
    ips = ["http://10.0.0.5:8000", "http://10.0.0.6:8000"]  # an address is never cut at its first dot
    assert [target_name(u, ips) for u in ips] == ["↳ 10.0.0.5", "↳ 10.0.0.6"]


def test_otherwise_host_and_port_and_never_credentials():
    urls = ["http://user:s3cretpassword@10.0.0.5:8000/v1", "http://10.0.0.6:9000/v1"]
    names = [target_name(u, urls) for u in urls]
    assert names == ["↳ 10.0.0.5:8000", "↳ 10.0.0.6:9000"]
    assert "s3cret" not in "".join(names) and "user" not in "".join(names)
    assert target_name("http://[::1]:8001/v1") == "↳ [::1]:8001"
    v6 = ["http://[::1]:8001", "http://[::2]:8001"]
    assert [target_name(u, v6) for u in v6] == ["↳ [::1]:8001", "↳ [::2]:8001"]
