"""The scheduler's job, a manual run and the translation worker write one database at the
same time: no `database is locked` reaches the user and nothing is lost."""
import os
import subprocess
import sys

from basecrawler import Store
from basecrawler.pipeline.registry import discover
from basecrawler.testing import fast_settings

from .universe import REPLAY_DIR, clean_reference


def test_scheduler_job_manual_run_and_translator_at_once(tmp_path):
    from translate.fakeserver import FakeLibreTranslate

    db = str(tmp_path / "busy.db")
    store = Store(db)
    # Give the translator work from the start.
    discover()["au"](store, settings=fast_settings(db, replay_dir=str(REPLAY_DIR)), mode="full").run()
    references = {source_id: clean_reference(tmp_path, source_id) for source_id in discover()}

    with FakeLibreTranslate(delay_s=0.02) as server:
        env = {**os.environ, "BASECRAWLER_DB": db, "BASECRAWLER_REPLAY_DIR": str(REPLAY_DIR),
               "BASECRAWLER_LADDER_BACKOFFS": "0,0,0,0", "BASECRAWLER_TRANSIENT_RETRY_DELAY": "0",
               "BASECRAWLER_TRANSLATE_BACKEND": "libretranslate", "BASECRAWLER_LIBRETRANSLATE_URL": server.url,
               "BASECRAWLER_TRANSLATE_BATCH": "3"}
        commands = {
            "scheduler": [sys.executable, "-m", "basecrawler", "schedule", "--once", "--mode", "full"],
            "manual": [sys.executable, "-m", "basecrawler", "run", "--source", "ca", "--source", "eu", "--mode", "full"],
            "translator": [sys.executable, "-m", "basecrawler", "translate"],
        }
        processes = {name: subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                     for name, cmd in commands.items()}
        outputs = {name: p.communicate(timeout=300) for name, p in processes.items()}
        codes = {name: p.returncode for name, p in processes.items()}
        # A last translation pass for rows the crawls added after the translator finished.
        subprocess.run(commands["translator"], env=env, capture_output=True, text=True, timeout=300, check=True)

    for name, (out, err) in outputs.items():
        assert "database is locked" not in out + err, f"{name}: {err[-1500:]}"
        assert "Traceback" not in err, f"{name}: {err[-1500:]}"
    assert codes == {"scheduler": 0, "manual": 0, "translator": 0}, {n: outputs[n][1][-800:] for n in codes}
    assert store.scalar("PRAGMA integrity_check") == "ok"
    for source_id, reference in references.items():
        stored = {(r["country"], r["recall_number"]) for r in store.query(
            "SELECT country, recall_number FROM recalls WHERE source = ?", [source_id])}
        assert stored == set(reference), source_id
    assert store.scalar("SELECT COUNT(*) FROM recalls WHERE translated_at IS NULL") == 0
    store.close()
