"""The web view's process hands Python's lock on sooner than Python's default (issue #34.6
last line, web/limits.py `share_pythons_lock`): the event loop's thread renders every page
and takes the lock back after each query, so a turn of 5 ms held by an SQL thread's Python
was time a reader's page waited. Set by the guard's start-up, in the server's own process."""
import asyncio
import sys

import pytest

from basecrawler.reading.web import limits


def test_a_turn_is_shorter_than_pythons_default():
    assert limits.SWITCH_INTERVAL_S < 0.005


def test_the_web_views_start_up_shortens_the_turn(tmp_path):
    pytest.importorskip("datasette", reason="the web extra (basecrawler[web]) is not installed")
    from datasette.app import Datasette

    from basecrawler import Store
    from basecrawler.reading.browse import WEB_DIR, build_metadata

    path = str(tmp_path / "turns.db")
    Store(path).close()
    before = sys.getswitchinterval()
    sys.setswitchinterval(0.005)   # Python's default, whatever the test process had
    try:
        async def start():
            ds = Datasette([path], metadata=build_metadata(path), plugins_dir=str(WEB_DIR / "plugins"),
                           template_dir=str(WEB_DIR / "templates"))
            await ds.invoke_startup()
        asyncio.run(start())
        assert sys.getswitchinterval() == pytest.approx(limits.SWITCH_INTERVAL_S)
    finally:
        sys.setswitchinterval(before)
