"""The client's send gate: at most ``per_turn`` requests start per loop turn, the rest in the next
turns in the order they asked; a request cancelled while it waits takes no place."""

from __future__ import annotations

import asyncio

import pytest

from wattbench.load.client import SENDS_PER_TURN, SendGate


def _admissions(n: int, per_turn: int, cancel: set[int] = frozenset()) -> list[tuple[int, int]]:
    """n requests ask in one turn; returns (request, loop turn it was admitted in), admission order."""
    out: list[tuple[int, int]] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()
        turn = [0]

        def tick() -> None:  # counts the loop's turns: re-armed once per turn
            turn[0] += 1
            loop.call_soon(tick)

        loop.call_soon(tick)
        gate = SendGate(per_turn)

        async def ask(i: int) -> None:
            await gate.enter()
            out.append((i, turn[0]))

        tasks = [asyncio.ensure_future(ask(i)) for i in range(n)]
        await asyncio.sleep(0)  # every task asks in this turn
        for i in cancel:
            tasks[i].cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    asyncio.run(main())
    return out


def test_a_batch_up_to_the_bound_starts_in_one_turn():
    got = _admissions(8, 8)
    assert [i for i, _ in got] == list(range(8))
    assert len({t for _, t in got}) == 1  # the 8 streams freed by one step all start in one turn


def test_past_the_bound_the_rest_start_in_later_turns_in_order():
    got = _admissions(7, 3)
    assert [i for i, _ in got] == list(range(7))  # the order they asked
    turns = [t for _, t in got]
    per_turn = {t: turns.count(t) for t in turns}
    assert sorted(per_turn.values(), reverse=True) == [3, 3, 1]
    assert turns[0] < turns[3] < turns[6]  # a later batch in a later turn, never the same


def test_a_request_cancelled_while_waiting_takes_no_place():
    got = _admissions(6, 2, cancel={2})
    assert [i for i, _ in got] == [0, 1, 3, 4, 5]
    turns = [t for _, t in got]
    assert max(turns.count(t) for t in turns) == 2
    assert turns[2] == turns[3] and turns[1] < turns[2]  # 3 and 4 share the second turn: 2 took nothing


def test_the_default_bound_and_a_bad_one():
    assert SENDS_PER_TURN == 8
    with pytest.raises(ValueError):
        SendGate(0)
