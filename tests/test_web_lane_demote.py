"""A reader lane's query that has run longer than its lane's `LANE_DEMOTE_AFTER_S` finishes at
the heavy lane's CPU priority, and its thread gets its priority back after
(basecrawler/reading/web/limits.py `deadline`)."""
import os
import sqlite3
import threading

import pytest

from basecrawler.reading.web import limits

COUNTING = ("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < :n) "
            "SELECT nice_now() FROM (SELECT count(*) FROM c)")


def _conn():
    conn = sqlite3.connect(":memory:")
    conn.create_function("nice_now", 0, lambda: os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))
    return conn


def _in_thread(fn):
    out = []
    thread = threading.Thread(target=lambda: out.append(fn()))
    thread.start()
    thread.join()
    return out[0]


@pytest.fixture(autouse=True)
def _renice():
    if not limits.renice_allowed():
        pytest.skip("this process may not give a thread its priority back")


def test_a_query_past_the_lane_time_runs_on_at_the_heavy_priority_and_is_restored():
    def run():
        conn = _conn()
        me = threading.get_native_id()
        before = os.getpriority(os.PRIO_PROCESS, me)
        with limits.deadline(conn, 20, demote_after=0.0):
            during = conn.execute(COUNTING, {"n": 2_000_000}).fetchone()[0]
        return before, during, os.getpriority(os.PRIO_PROCESS, me)
    before, during, after = _in_thread(run)
    assert during == before + limits.LANE_NICE["heavy"]
    assert after == before


def test_a_quick_query_and_a_lane_without_demotion_keep_their_priority():
    def run():
        conn = _conn()
        before = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
        with limits.deadline(conn, 20, demote_after=10.0):
            quick = conn.execute(COUNTING, {"n": 200_000}).fetchone()[0]
        with limits.deadline(conn, 20, limits.LANE_DEMOTE_AFTER_S.get(None)):
            light = conn.execute(COUNTING, {"n": 2_000_000}).fetchone()[0]
        return before, quick, light
    before, quick, light = _in_thread(run)
    assert quick == before and light == before
    assert limits.LANE_DEMOTE_AFTER_S["search"] < limits.SEARCH_TIME_LIMIT_MS / 1000
