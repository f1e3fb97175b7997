"""The compiled settings (memgov.policy_settings): what the policy sets, and
nothing it leaves out, so that SQL's defaults apply to the rest."""

from __future__ import annotations

from memgov_pg.compiler import compile_policy
from memgov_pg.policy import load_policy


def settings(text: str) -> dict[str, object]:
    return compile_policy(load_policy('version: "1.0.0"\nrules: []\n' + text)).settings()


def test_unset_feedback_and_retention_settings_are_absent() -> None:
    got = settings("")
    assert got["feedback"] == {} and got["retention"] == {}
    # the compiler's own settings are always written out
    assert got["risk_thresholds"] == {"low_max": "0.30", "medium_max": "0.60", "high_max": "0.80"}
    assert got["mode"] == "enforce" and got["on_policy_miss"] == "require_approval"


def test_set_settings_are_written_as_the_policy_says() -> None:
    got = settings(
        "feedback: {confirm_delta: 0.05, reject_delete_below: 0.0}\n"
        "retention: {schedule: '0 3 * * *', batch_size: 10, confidence_grace: 2 weeks}\n"
    )
    assert got["feedback"] == {"confirm_delta": "0.05", "reject_delete_below": "0.0"}
    assert got["retention"] == {"schedule": "0 3 * * *", "batch_size": 10, "confidence_grace": "2 weeks"}
