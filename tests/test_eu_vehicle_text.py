"""An EU vehicle row reads what was recalled and why, not its kind alone (issue #32: rows read
"Bus." / "Motorcycle."). Modern Safety Gate alerts put only the product's kind in
`description`, sometimes followed by a VIN range; the summary drops that lead sentence, so the
row shows the defect (the vehicle_recall type shows summary, else defect / cause)."""
import gzip

import pytest

from record_types.vehicle_recall import VEHICLE_RECALL
from sources.eu_records import vehicle_summary
from test_eu import REAL_SAMPLES, crawl, extra, fixture_site, index_xml, Site

REAL_REPORT = REAL_SAMPLES / "eu_report_10000319.xml.gz"

# SR/02285/26 of the real report 10000319 (21/08/2026), a bus whose description is "Bus.":
# every text column as stored, read against the notification in the file.
GOLDEN_BUS = {
    "recall_number": "SR/02285/26",
    "recall_date": "2026-08-21",
    "manufacturer_original": "Setra",
    "model_original": "CC 500 (S 515 HD, S 516 HD/2, S 516 HD/3, S 517 HD, S 519 HD) (410 02, 410 03, "
                      "e1*2007/46*1133*24-*27, e1*2018/858*00434*00-*03, e1*2007/46*1160*25-*28, "
                      "e1*2018/858*00436*00-*03)",
    "summary_original": None,
    "defect_cause_original": "A fault in the fuel supply control unit may prevent the vehicle from correctly "
                             "switching between the main and auxiliary fuel tanks.",
    "consequence_original": "This could cause a loss of engine power while driving or lead to fuel spilling onto "
                            "the road, increasing the risk of an accident.",
    "remedy_original": "Recall of the product from end users (by the manufacturer), in force from 21/07/2026.",
    "source_url": "https://ec.europa.eu/safety-gate-alerts/screen/webReport/alertDetail/10118583",
}


@pytest.fixture()
def real_rows(store, settings):
    if not REAL_REPORT.is_file():
        pytest.skip("real samples folder absent")
    body = gzip.decompress(REAL_REPORT.read_bytes())
    result = crawl(store, settings, Site(index_xml(("10000319", "21/08/2026", "")), {"10000319": body}))
    assert result.status == "succeeded" and store.dead_letters.open_dead_letters("eu") == []
    return {row["recall_number"]: dict(row) for row in store.query("SELECT * FROM recalls WHERE source = 'eu'")}


def test_a_real_bus_alert_is_stored_as_its_golden_record_and_its_row_reads_the_defect(real_rows):
    row = real_rows["SR/02285/26"]
    assert {key: row[key] for key in GOLDEN_BUS} == GOLDEN_BUS
    assert extra(row)["product"] == "Bus"   # the kind the description named is kept
    assert VEHICLE_RECALL.best_text(row)[1] == GOLDEN_BUS["defect_cause_original"]


def test_no_real_vehicle_row_reads_only_its_kind(real_rows):
    for number, row in real_rows.items():
        text = VEHICLE_RECALL.best_text(row)[1]
        assert text and text.rstrip(".").casefold() != (extra(row).get("product") or "").casefold(), number


def test_a_real_vin_range_after_the_kind_is_identification_not_the_summary(real_rows):
    row = real_rows["SR/02288/26"]   # description "Passenger car. VIN: ZFAEFA265TX256620 -ZFAEFA268TX298828"
    assert row["summary_original"] is None
    assert extra(row)["vehicle_identification"] == "VIN: ZFAEFA265TX256620 -ZFAEFA268TX298828"
    assert VEHICLE_RECALL.best_text(row)[1].startswith("Software inconsistency may prevent certain warning lights")


def test_the_fixture_bus_and_motorcycle_rows_read_their_defect(store, settings):
    crawl(store, settings, fixture_site())
    bus, motorcycle = store.lookup.get("vehicle_recall", {"country": "EU", "recall_number": "SR/02140/26"}), store.lookup.get("vehicle_recall", {"country": "EU", "recall_number": "SR/02101/26"})
    assert bus["summary_original"] is None and motorcycle["summary_original"] is None
    assert VEHICLE_RECALL.best_text(bus)[1] == ("A coolant hose may crack near the heater. "
                                                "Coolant could drip onto hot parts and cause a fire.")
    assert VEHICLE_RECALL.best_text(motorcycle)[1] == "The front brake hose may rub against the fork and leak."
    # The product alert of the same notification keeps the publisher's description whole.
    alert = store.lookup.get("product_alert", {"source": "eu", "country": "EU", "alert_id": "SR/02140/26"})
    assert alert["description_original"] == "Bus."


def test_a_description_saying_more_than_the_kind_stays_the_summary(store, settings):
    crawl(store, settings, fixture_site())
    legacy = store.lookup.get("vehicle_recall", {"country": "EU", "recall_number": "0061/05"})   # no product field: the description as published
    assert legacy["summary_original"].startswith("Passenger cars “Meridian - Tourer 2.0 (M 75)”")


@pytest.mark.parametrize("description, product, expected", [
    ("Bus.", "Bus", (None, None)),
    ("Motorcycle.", "motorcycle", (None, None)),
    ("Passenger car.VIN range (Fiat 500e): ZFA1–ZFA2.", "Passenger car", (None, "VIN range (Fiat 500e): ZFA1–ZFA2.")),
    ("Bus. Low-floor city bus, 12 m.", "Bus", ("Low-floor city bus, 12 m.", None)),
    ("Trailer 2.7 tons GVW (vehicle category O2)", "Trailer", ("Trailer 2.7 tons GVW (vehicle category O2)", None)),
    ("Summer tyre for passenger cars.", "Tyre", ("Summer tyre for passenger cars.", None)),
    ("Bus.", None, ("Bus.", None)),
    (None, "Bus", (None, None)),
])
def test_vehicle_summary(description, product, expected):
    assert vehicle_summary(description, product) == expected
