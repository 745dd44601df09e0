"""Exponential backoff for retrying a failing source (a server scrape, a sensor read)."""

from __future__ import annotations

from dataclasses import dataclass

from wattbench.core.secret_scope import clip


@dataclass
class Backoff:
    """After the n-th consecutive failure, wait ``min(cap_s, base_s × factor^(n-1))``.

    ``ready(now_ns)`` says whether a new attempt is due; ``failure(now_ns, error)`` and
    ``success()`` record the outcome. ``errors`` counts every failed attempt (never reset).
    """

    base_s: float = 1.0
    cap_s: float = 60.0
    factor: float = 2.0
    consecutive: int = 0
    errors: int = 0
    last_error: str | None = None
    next_try_ns: int = 0

    def __post_init__(self) -> None:
        if self.base_s <= 0 or self.cap_s < self.base_s or self.factor < 1:
            raise ValueError("backoff needs base_s > 0, cap_s >= base_s, factor >= 1")

    def ready(self, now_ns: int) -> bool:
        return now_ns >= self.next_try_ns

    def delay_s(self) -> float:
        if self.consecutive == 0:
            return 0.0
        return min(self.cap_s, self.base_s * self.factor ** (self.consecutive - 1))

    def failure(self, now_ns: int, error: str) -> float:
        self.consecutive += 1
        self.errors += 1
        self.last_error = clip(error, 500)
        d = self.delay_s()
        self.next_try_ns = now_ns + int(d * 1e9)
        return d

    def success(self) -> None:
        self.consecutive = 0
        self.next_try_ns = 0

    @property
    def up(self) -> bool:
        return self.consecutive == 0
