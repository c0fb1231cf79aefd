"""The web view serves each watch's Atom feed from the outbox, and offers "watch this search"."""
from __future__ import annotations

import asyncio
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest

from basecrawler.store.core import Store
from basecrawler.watch import repository
from basecrawler.watch.delivery import deliver
from basecrawler.watch.model import Watch
from watchkit import food_listeria_set, store_alerts

datasette_app = pytest.importorskip("datasette.app")
PLUGINS = Path(__file__).resolve().parents[1] / "basecrawler" / "reading" / "web" / "plugins"


def test_feed_route_and_watch_this_search(tmp_path, monkeypatch):
    monkeypatch.setenv("BASECRAWLER_WATCH_FEED_DIR", str(tmp_path / "feeds"))
    db = str(tmp_path / "web.db")
    store = Store(db)
    repository.add(store, Watch(name="food", channel="feed", record_type="product_alert", facets=(("category", "Food"),),
                                text="Listeria", options={"as_soon_as_seen": True}), now="2000-01-01T00:00:00+00:00")
    store_alerts(store, food_listeria_set())
    deliver(store)
    store.close()

    async def fetch():
        ds = datasette_app.Datasette([db], plugins_dir=str(PLUGINS), template_dir=str(PLUGINS.parent / "templates"))
        feed = await ds.client.get("/-/watch/food.atom")
        missing = await ds.client.get("/-/watch/nope.atom")
        this = await ds.client.get("/-/watch-this?table=product_alerts&_search=Listeria&category=Food")
        return feed, missing, this
    feed, missing, this = asyncio.run(fetch())
    assert feed.status_code == 200 and feed.headers["content-type"].startswith("application/atom+xml")
    entries = ET.fromstring(feed.content).findall("{http://www.w3.org/2005/Atom}entry")
    assert len(entries) == 3 and missing.status_code == 404
    assert "--text Listeria" in this.text and "--filter category=Food" in this.text and "이 검색 감시하기" in this.text
