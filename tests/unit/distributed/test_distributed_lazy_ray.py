"""Nothing Ray-related is imported unless a distributed run is asked for."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SRC = str(Path(__file__).resolve().parents[3] / "src")


def test_importing_wattbench_and_distributed_does_not_import_ray():
    code = (
        "import sys, wattbench, wattbench.distributed.run, wattbench.distributed.actors, "
        "wattbench.distributed.executor, "
        "wattbench.distributed.merge, wattbench.load.targets, wattbench.accounting; "
        "print('ray' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env={"PYTHONPATH": SRC, "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_missing_ray_is_a_user_error(monkeypatch):
    import builtins

    import pytest

    from wattbench.distributed.run import _ray
    from wattbench.core.errors import UserError

    real = builtins.__import__

    def no_ray(name, *a, **kw):
        if name == "ray" or name.startswith("ray."):
            raise ImportError("No module named 'ray'")
        return real(name, *a, **kw)

    monkeypatch.setattr(builtins, "__import__", no_ray)
    with pytest.raises(UserError, match=r"wattbench\[ray\]"):
        _ray()
