"""The worker pool's placement rule (gcfkit.transports.placement) without processes: which
queued result starts on which worker, at which moment. The pool's real-process tests
(tests/test_offload_lanes.py, tests/test_offload_memory.py) keep a few scenarios end to end.
"""

from __future__ import annotations

from gcfkit.transports.placement import (
    IN_PROCESS_BYTES,
    Start,
    Waiting,
    answers_here,
    place,
)

PATIENCE = 0.05


def test_a_result_goes_home_when_its_home_is_idle() -> None:
    plan = place([Waiting(1, "a", 0.0)], ["b", "a"], {"a": 3, "b": 0}, {}, 0.0, PATIENCE)
    assert plan.starts == (Start(0, "a", False),)


def test_a_session_without_a_home_takes_the_idle_worker_home_to_fewest() -> None:
    plan = place([Waiting(1, None, 0.0)], ["a", "b"], {"a": 2, "b": 1}, {}, 0.0, PATIENCE)
    assert plan.starts == (Start(0, "b", False),)


def test_a_busy_home_is_waited_for_until_patience_runs_out() -> None:
    waiting = [Waiting(1, "a", 10.0)]
    early = place(waiting, ["b"], {"b": 0}, {"a": 2}, 10.01, PATIENCE)
    assert early.starts == () and early.wake == 10.0 + PATIENCE
    late = place(waiting, ["b"], {"b": 0}, {"a": 2}, 10.0 + PATIENCE, PATIENCE)
    assert late.starts == (Start(0, "b", False),)  # a move: "b" becomes its home


def test_a_home_busy_with_the_same_sessions_result_sends_the_next_stray() -> None:
    plan = place([Waiting(1, "a", 0.0)], ["b"], {"b": 0}, {"a": 1}, 1.0, PATIENCE)
    assert plan.starts == (Start(0, "b", True),)


def test_a_sessions_results_start_in_order() -> None:
    waiting = [Waiting(1, "a", 0.0), Waiting(1, "a", 0.0), Waiting(2, None, 0.0)]
    plan = place(waiting, ["b"], {"b": 0}, {"a": 3}, 0.0, PATIENCE)
    # The second result of session 1 waits behind the first; session 2 goes meanwhile.
    assert plan.starts == (Start(2, "b", False),)
    assert plan.wake == PATIENCE


def test_a_start_in_the_same_pass_moves_the_home_for_the_next_result() -> None:
    """Session 1's first result moves to "b" (its home "a" is busy past patience); its
    second, in the same pass, sees "b" as its home, busy with its own result: stray on "c"."""
    waiting = [Waiting(1, "a", 0.0), Waiting(1, "a", 0.0)]
    plan = place(waiting, ["b", "c"], {"b": 0, "c": 1}, {"a": 2}, 1.0, PATIENCE)
    assert plan.starts == (Start(0, "b", False), Start(1, "c", True))


def test_no_idle_worker_starts_nothing_and_sets_no_wake() -> None:
    plan = place([Waiting(1, "a", 0.0), Waiting(None, None, 0.0)], [], {}, {"a": 1}, 9.0, 0.05)
    assert plan.starts == () and plan.wake is None


def test_requests_of_no_session_never_wait_for_each_other() -> None:
    waiting: list[Waiting[str]] = [Waiting(None, None, 0.0), Waiting(None, None, 0.0)]
    plan = place(waiting, ["a", "b"], {"a": 0, "b": 0}, {}, 0.0, PATIENCE)
    assert plan.starts == (Start(0, "a", False), Start(1, "b", False))


def test_a_result_not_big_is_answered_here_unless_its_session_waits_on_a_worker() -> None:
    assert answers_here(IN_PROCESS_BYTES, queued=False)
    assert not answers_here(IN_PROCESS_BYTES + 1, queued=False)
    assert not answers_here(100, queued=True)  # behind its session's result waiting for a worker
