"""A load actor's job crosses to Ray without its targets' secrets (``distributed.messages.seal``):
the job — which Ray may keep in its object store, in shared memory, a file under ``/tmp`` or spilled
to disk, when it is large — holds no piece of the key, a secret header, the query string or a
secret body field; the targets travel whole beside it, and the actor's ``unseal`` gives back the
very job that was sealed."""

from __future__ import annotations

import pickle

import pytest

from wattbench.core.errors import WattbenchError
from wattbench.core.load_types import LevelSpec
from wattbench.core.redact import BasicCredential
from wattbench.core.target import TargetSpec
from wattbench.distributed.messages import ClosedJob, OpenJob, seal, timed, unseal
from wattbench.load.plan import WorkerPlan
from wattbench.workload.base import RequestSpec

KEY = "sk-SEALEDkey7Qw3Zp9Lm2X"
SIG = "SIGsealed/9a+Zt81xq"
HDR = "hdr-SEALED-token-88a2"
BODY = "body-SEALED-api-2f5k"


def _targets() -> list[TargetSpec]:
    return [TargetSpec(base_url="http://a:1/v1", model="m", api_key=KEY, query=f"api-version=1&sig={SIG}",
                       headers={"X-Api-Key": HDR}, extra_body={"api_key": BODY, "ignore_eos": True}),
            TargetSpec(base_url="http://b:2/v1", model="m", api_key=BasicCredential("user:pw-SEALED-url-31"))]


def _pieces(blob: bytes) -> list[str]:
    text = blob.decode("latin-1")
    return [s for s in (KEY, SIG, HDR, BODY, "pw-SEALED-url-31") for i in range(len(s) - 7) if s[i:i + 8] in text]


def _req(i: int) -> RequestSpec:
    return RequestSpec(prompt="a b c", max_tokens=4)


def test_a_closed_and_an_open_job_are_sent_without_their_secrets_and_come_back_whole():
    targets = _targets()
    closed = timed(ClosedJob(index=0, n=2, spec=LevelSpec(index=0, mode="concurrency", value=2, num_requests=4),
                             targets=targets, routes=[0, 1], request_factory=_req), 123, 7)
    plan = WorkerPlan(0, 1, "rate", targets[0], targets=targets, arrivals=[(0, 0.0, _req(0), False)], routes=[1])
    opened = timed(OpenJob(plan), 456, 8)
    assert _pieces(pickle.dumps(closed)) and _pieces(pickle.dumps(opened))  # unsealed, the secrets are in them
    for job in (closed, opened):
        sealed, whole = seal(job)
        assert not _pieces(pickle.dumps(sealed))  # what Ray may store holds nothing of them
        back = unseal(pickle.loads(pickle.dumps(sealed)), pickle.loads(pickle.dumps(whole)))
        assert back == job  # every field, the targets' secrets and the public parts alike
        assert sealed.t0_node_ns == job.t0_node_ns and sealed.run == job.run
    sealed, whole = seal(opened)
    assert sealed.plan.target.base_url == "http://a:1/v1" and sealed.plan.target.extra_body == {}
    assert whole[0].query.endswith(SIG) and whole[0].api_key == KEY
    # a job sent whole (in-process) needs nothing back; a count that does not match is refused in one line
    assert unseal(closed, None) is closed
    with pytest.raises(WattbenchError, match="same wattbench version"):
        unseal(seal(closed)[0], whole[:1])
