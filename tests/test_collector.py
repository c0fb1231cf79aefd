"""A run collects garbage less often and leaves the process's thresholds as it found them."""
import gc
import threading

from basecrawler import BaseCrawler, Store
from basecrawler.pipeline.collector import RUN_THRESHOLDS, fewer_collections


class Seen(BaseCrawler):
    source = "tst"
    country = "US"

    def fetch(self):
        self.during = gc.get_threshold()
        yield {"recall_number": "1", "recall_date": "2024-01-01"}

    def parse(self, raw):
        return raw


def test_a_run_raises_the_thresholds_and_puts_them_back(tmp_path):
    before = gc.get_threshold()
    crawler = Seen(Store(tmp_path / "s.db"), mode="full")
    assert crawler.run().counts.new == 1
    assert crawler.during[0] == max(RUN_THRESHOLDS[0], before[0])
    assert gc.get_threshold() == before


def test_overlapping_runs_restore_once_the_last_one_ends():
    before = gc.get_threshold()
    first_in, release = threading.Event(), threading.Event()

    def other():
        with fewer_collections():
            first_in.set()
            release.wait(5)

    thread = threading.Thread(target=other)
    thread.start()
    first_in.wait(5)
    with fewer_collections():
        pass
    assert gc.get_threshold()[0] == max(RUN_THRESHOLDS[0], before[0])   # the other run is still going
    release.set()
    thread.join(5)
    assert gc.get_threshold() == before
