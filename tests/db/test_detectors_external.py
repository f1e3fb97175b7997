"""The goals on other projects' test cases (../shared/bench/detectors_external beside the repository).

The set lives outside the repository (its README says where each group comes
from); this test skips when it is absent. `scripts/bench_detectors.py` prints
the same figures per source.
"""

from __future__ import annotations

import pathlib
from typing import Any

import psycopg
import pytest

from tests.detector_scoring import unescape_copy_text

EXTERNAL = pathlib.Path(__file__).resolve().parents[2].parent / "shared" / "bench" / "detectors_external"
CLAIMED = EXTERNAL / "detectors_external.tsv"
GOALS = {"pii": (0.95, 0.90), "secret": (0.95, 0.90)}  # precision, recall

pytestmark = pytest.mark.skipif(not CLAIMED.is_file(), reason=f"external benchmark not found in {EXTERNAL}")


@pytest.mark.parametrize("detector", sorted(GOALS))
def test_external_precision_and_recall(db_conn: psycopg.Connection[Any], detector: str) -> None:
    rows = [line.split("\t", 3) for line in CLAIMED.read_text(encoding="utf-8").split("\n")[1:] if line]
    labelled = [(exp == "1", unescape_copy_text(text)) for det, exp, _src, text in rows if det == detector]
    got = db_conn.execute(
        f"SELECT memgov.contains_{detector}(t) FROM unnest(%s::text[]) WITH ORDINALITY AS c(t, n) ORDER BY n",
        [[text for _, text in labelled]],
    ).fetchall()
    tp = sum(1 for (e, _), (a,) in zip(labelled, got, strict=True) if e and a)
    fp = sum(1 for (e, _), (a,) in zip(labelled, got, strict=True) if not e and a)
    fn = sum(1 for (e, _), (a,) in zip(labelled, got, strict=True) if e and not a)
    precision, recall = tp / (tp + fp), tp / (tp + fn)
    want_precision, want_recall = GOALS[detector]
    assert precision >= want_precision and recall >= want_recall, (
        f"{detector}: precision {precision:.3f}, recall {recall:.3f}"
    )
