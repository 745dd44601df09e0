import pytest

from tests.fakes.report_runs import write_run


@pytest.fixture(scope="session")
def report_run_dir(tmp_path_factory):
    return write_run(tmp_path_factory.mktemp("run") / "run-a")


@pytest.fixture(scope="session")
def report_noenergy_dir(tmp_path_factory):
    return write_run(tmp_path_factory.mktemp("run") / "run-b", energy=False, run_id="run-noenergy", slo=False)


@pytest.fixture(scope="session")
def report_batched_dir(tmp_path_factory):
    return write_run(tmp_path_factory.mktemp("run") / "run-c", batched_telemetry=True, run_id="run-batched",
                     node_label="declared", seed=3)
