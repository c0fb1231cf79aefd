"""Normalised manufacturer key: the rule table, the migration that fills it for old rows, the
store keeping it current, and export carrying it next to the published name."""
import sqlite3

import pytest

from basecrawler import Recall, Store
from record_types.vehicle_makers import manufacturer_key, refill_manufacturer_keys
from basecrawler.recordtypes.tables import facet_filter_index, facet_index_columns, index_name
from basecrawler.store.schema import MIGRATIONS
from record_types.vehicle_recall import VEHICLE_RECALL


@pytest.mark.parametrize("published, key", [
    ("Ford", "FORD"),
    ("FORD", "FORD"),
    ("Ford Motor Company", "FORD"),
    ("FORD MOTOR CO.", "FORD"),
    ("Ford Motor Company of Canada, Ltd.", "FORD"),
    ("トヨタ自動車株式会社", "TOYOTA"),
    ("TOYOTA MOTOR NORTH AMERICA, INC.", "TOYOTA"),
    ("本田技研工業株式会社", "HONDA"),
    ("株式会社ＳＵＢＡＲＵ", "SUBARU"),           # full-width letters, legal form in front
    ("General Motors LLC", "GENERAL MOTORS"),      # an alias: suffix cutting would leave GENERAL
    ("Mercedes-Benz USA, LLC", "MERCEDES-BENZ"),
    ("Harley-Davidson Motor Company", "HARLEY-DAVIDSON"),  # no alias: suffixes cut
    ("Forest River, Inc.", "FOREST RIVER"),
    ("Motors Inc", "MOTORS"),                       # never cut down to nothing
    ("  ", None),
    (None, None),
])
def test_rule_table(published, key):
    assert manufacturer_key(published) == key


# Makers that recall in Japan (issue 21.6): the MLIT list names them in katakana or kanji, the
# other sources in Latin letters; both must give one key, so `--manufacturer Fiat` finds both.
@pytest.mark.parametrize("japanese, latin", [
    ("トヨタ", "Toyota Motor Corporation"), ("日産", "Nissan North America, Inc."), ("ホンダ", "Honda"),
    ("マツダ", "Mazda Motor Corporation"), ("スバル", "Subaru of America"), ("スズキ", "Suzuki Motor Corporation"),
    ("ダイハツ", "Daihatsu"), ("三菱", "Mitsubishi Motors North America"), ("いすゞ", "Isuzu"), ("日野", "Hino Motors"),
    ("ヤマハ", "Yamaha Motor Co., Ltd."), ("カワサキ", "Kawasaki Motors Corp., U.S.A."), ("フィアット", "Fiat"),
    ("ドゥカティ", "Ducati North America"), ("メルセデス・ベンツ", "Mercedes-Benz USA, LLC"),
    ("ビー・エム・ダブリュー", "BMW of North America, LLC"), ("フォルクスワーゲン", "Volkswagen Group of America"),
    ("アウディ", "Audi AG"), ("ボルボ", "Volvo Car USA"), ("プジョー", "Peugeot"), ("ジープ", "Jeep"),
    ("ポルシェ", "Porsche Cars North America"), ("ハーレーダビッドソン", "Harley-Davidson Motor Company"),
    ("ランドローバー", "Land Rover"), ("ルノー", "Renault"), ("テスラ", "Tesla, Inc."), ("ヒョンデ", "Hyundai"),
    ("ｽｽﾞｷ", "SUZUKI"),                                   # half-width katakana: NFKC first
    ("ビー・エム・ダブリュー株式会社", "BMW AG"), ("フィアット", "ＦＩＡＴ"),
])
def test_japanese_maker_names_share_the_latin_key(japanese, latin):
    assert manufacturer_key(japanese) == manufacturer_key(latin)
    assert manufacturer_key(japanese).isascii()            # the facet shows the Latin key


def test_kanji_rules_do_not_swallow_other_companies():
    assert manufacturer_key("三菱電機株式会社") != "MITSUBISHI"   # an electronics supplier, not the carmaker
    assert manufacturer_key("三菱ふそうトラック・バス株式会社") == "MITSUBISHI FUSO"
    assert manufacturer_key("CHEVROLET, GMC") == "CHEVROLET GMC"  # a joined list is not one maker


def test_store_writes_the_key_and_keeps_the_published_name(store):
    store.upsert("vehicle_recall", [Recall(country="US", recall_number="24V-101", recall_date="2024-02-20",
                                 source_lang="en", manufacturer_original="Ford Motor Company")], source="t")
    row = store.query("SELECT manufacturer_original, manufacturer_key FROM recalls")[0]
    assert row == {"manufacturer_original": "Ford Motor Company", "manufacturer_key": "FORD"}


def test_key_follows_a_changed_name_and_survives_a_blank_one(store):
    def upsert(name):
        store.upsert("vehicle_recall", [Recall(country="JP", recall_number="JP-1", recall_date="2024-01-01",
                                     source_lang="ja", manufacturer_original=name)], source="t")
    upsert("本田技研工業株式会社")
    upsert("トヨタ自動車株式会社")
    assert store.query("SELECT manufacturer_key FROM recalls")[0]["manufacturer_key"] == "TOYOTA"
    upsert(None)  # a blank never erases (COALESCE rule): name and key stay
    assert store.query("SELECT manufacturer_original, manufacturer_key FROM recalls")[0] == {
        "manufacturer_original": "トヨタ自動車株式会社", "manufacturer_key": "TOYOTA"}


def test_migration_fills_the_key_for_existing_rows(tmp_path):
    path = tmp_path / "old.db"
    Store(path).close()
    # An older database: the column does not exist yet and rows were written without it.
    conn = sqlite3.connect(path)
    before = MIGRATIONS.index(next(m for m in MIGRATIONS if m.__name__ == "_m005_manufacturer_key"))
    conn.execute(f"DROP INDEX [{index_name(VEHICLE_RECALL, facet_filter_index(VEHICLE_RECALL, 'manufacturer_key'))}]")
    conn.execute(f"DROP INDEX [{index_name(VEHICLE_RECALL, facet_index_columns(VEHICLE_RECALL))}]")
    conn.execute("ALTER TABLE recalls DROP COLUMN manufacturer_key")
    conn.execute("INSERT INTO recalls (source, country, recall_number, recall_date, manufacturer_original) "
                 "VALUES ('t', 'US', '1', '2024-01-01', 'FORD MOTOR CO.'), ('t', 'CA', '2', '2024-01-01', 'Ford')")
    conn.execute(f"PRAGMA user_version = {before}")
    conn.commit()
    conn.close()
    store = Store(path)
    try:
        rows = store.query("SELECT manufacturer_original, manufacturer_key FROM recalls ORDER BY id")
    finally:
        store.close()
    assert rows == [{"manufacturer_original": "FORD MOTOR CO.", "manufacturer_key": "FORD"},
                    {"manufacturer_original": "Ford", "manufacturer_key": "FORD"}]


def test_refill_keeps_the_search_index_and_its_trigger(store):
    store.upsert("vehicle_recall", [Recall(country="US", recall_number="1", recall_date="2024-01-01", source_lang="en",
                                 manufacturer_original="Ford Motor Company", summary_original="brake hose")], source="t")
    triggers = store.query("SELECT name, sql FROM sqlite_master WHERE type = 'trigger' ORDER BY name")
    store.write(lambda db: db.conn.execute("UPDATE recalls SET manufacturer_key = NULL"))
    assert store.write(lambda db: refill_manufacturer_keys(db.conn)) == 1
    assert store.query("SELECT manufacturer_key FROM recalls") == [{"manufacturer_key": "FORD"}]
    assert store.query("SELECT name, sql FROM sqlite_master WHERE type = 'trigger' ORDER BY name") == triggers
    # The index still follows later changes (its update trigger is back).
    store.write(lambda db: db.conn.execute("UPDATE recalls SET summary_original = 'fuel pump'"))
    assert store.query("SELECT rowid FROM recalls_fts WHERE recalls_fts MATCH '\"fuel pump\"'") == [{"rowid": 1}]
    assert store.query("SELECT rowid FROM recalls_fts WHERE recalls_fts MATCH '\"brake hose\"'") == []
