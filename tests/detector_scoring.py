"""Scoring a detector against labelled lines: shared by the detector tests and
``scripts/bench_detectors.py``, so that both count precision and recall alike."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass
class Score:
    """A confusion matrix; precision and recall are 1.0 where nothing was flagged or expected."""

    tp: int = 0
    fp: int = 0
    fn: int = 0
    tn: int = 0

    def add(self, expected: bool, actual: bool) -> None:
        if expected and actual:
            self.tp += 1
        elif expected:
            self.fn += 1
        elif actual:
            self.fp += 1
        else:
            self.tn += 1

    @property
    def precision(self) -> float:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else 1.0

    @property
    def recall(self) -> float:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else 1.0


def unescape_copy_text(field: str) -> str:
    """Undo COPY text-format escapes (backslash n, t, r and a doubled backslash)."""
    out: list[str] = []
    chars = iter(field)
    for char in chars:
        if char == "\\":
            nxt = next(chars, "")
            out.append({"n": "\n", "t": "\t", "r": "\r"}.get(nxt, nxt))
        else:
            out.append(char)
    return "".join(out)
