"""Run the `hc` source over one hostile file in this process, capped at CAP_MB of address space
(resource.setrlimit), and print the run's counts and dead-letter kinds as JSON: a test starts it
as a child process so a protection that fails cannot take the machine down.

    python tests/hostile_round2_child.py FILE DB CAP_MB
"""
from __future__ import annotations

import json
import resource
import sys


def main(path: str, db: str, cap_mb: int) -> None:
    cap = cap_mb << 20
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    import httpx

    from basecrawler import Store
    from basecrawler.testing import fast_settings
    from sources.hc import FILE_PATH, HealthCanadaAlertsCrawler

    body = open(path, "rb").read()

    def handler(request):
        if request.url.path != FILE_PATH:
            return httpx.Response(404)
        return httpx.Response(200, content=body, headers={"content-type": "application/json"})

    store = Store(db)
    result = HealthCanadaAlertsCrawler(store, settings=fast_settings(db), transport=httpx.MockTransport(handler)).run()
    letters = [letter["kind"] for letter in store.dead_letters.open_dead_letters("hc")]
    stored = sorted(row["alert_id"] for row in store.query("SELECT alert_id FROM product_alerts WHERE source = 'hc'"))
    # VmHWM, not ru_maxrss: Linux carries ru_maxrss across exec (a large parent's peak would show).
    peak_mb = int(next(line.split()[1] for line in open("/proc/self/status") if line.startswith("VmHWM"))) // 1024
    print(json.dumps({"status": result.status, "error": result.error, "counts": vars(result.counts),
                      "letters": letters, "stored": stored, "peak_mb": peak_mb, "line": result.summary_line()}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
