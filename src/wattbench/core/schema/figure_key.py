"""The key of a figure over a level's trials (``TrialsBlock.figures``): the figure's name and, for a
figure measured at a power boundary, the boundary.

``FigureKey.parse`` and ``FigureKey.text`` are the one parser and writer of its persisted form,
``name@boundary`` (``output_tokens_per_s_per_kw@accelerator``), or the plain ``name`` for a figure
without a boundary (``ttft_p99_ms``) and in files whose run measured one boundary and kept plain
names. ``FigureKey.lookup`` is the one read of a trials block's entry by key, those older files
included. Every reader and writer of a trial figure's key goes through here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Container, Mapping, TypeVar

SEPARATOR = "@"
T = TypeVar("T")


@dataclass(frozen=True)
class FigureKey:
    """A figure (``j_per_output_token``) at a boundary (``accelerator``; None: a figure that has no
    boundary, or one read from a file that kept plain names)."""

    figure: str
    boundary: str | None = None

    @classmethod
    def parse(cls, text: str) -> FigureKey:
        """``name@boundary`` or ``name`` (an empty boundary reads as none)."""
        name, _, boundary = text.partition(SEPARATOR)
        return cls(name, boundary or None)

    @classmethod
    def at(cls, figure: str, boundary: str | None, boundary_figures: Container[str]) -> FigureKey:
        """The key of ``figure`` measured at ``boundary``: with the boundary when the figure is one
        of ``boundary_figures`` (those a boundary has, ``results.headline.BOUNDARY_FIGURES``), plain
        otherwise (a latency or token figure is the same at every boundary)."""
        return cls(figure, boundary if (boundary and figure in boundary_figures) else None)

    def text(self) -> str:
        """The persisted form: ``name@boundary``, or ``name`` without a boundary."""
        return f"{self.figure}{SEPARATOR}{self.boundary}" if self.boundary else self.figure

    def __str__(self) -> str:
        return self.text()

    def lookup(self, figures: Mapping[str, T]) -> T | None:
        """This key's entry of ``figures`` (a trials block's): the entry at the boundary, else, when
        no key of the block names a boundary (a run that measured one boundary kept plain names),
        the plain name's; None when it has none."""
        entry = figures.get(self.text())
        if entry is None and self.boundary and not any(SEPARATOR in k for k in figures):
            entry = figures.get(self.figure)
        return entry
