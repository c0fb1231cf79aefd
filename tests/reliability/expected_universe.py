"""What the replay set (fixtures/replay) says, written by hand from the payloads — not from a run
of the parsers. The reliability suite compares stored records with this, so a parser that drops,
swaps or misreads a field fails here even when every run of it agrees with every other.

Per source: recall number -> (recall_date, manufacturer_original, model_original,
affected_units, model_year). `None` = the payload carries no value for it. Where a value is
derived (joined, summed, converted) the comment says from what.
"""
from __future__ import annotations

FIELDS = ("recall_date", "manufacturer_original", "model_original", "affected_units", "model_year")

# ---- us: data.transportation.gov list (the unfiltered one, ...DES_35896068800545b4.body: 12 rows)
# date = report_received_date, manufacturer = manufacturer, units = potentially_affected
# ("1,117" for 24V655000). Model and model year come from the detail answers
# api.nhtsa.gov/GET_recalls_campaignNumber_..._<number>_*.body: the distinct `Model` values in
# alphabetical order, joined ", "; the year range of `ModelYear`, 9999 ("unknown") left out.
# 24V704000 and 24V705000: the detail answers 404 -> no model, no year.
US = {
    "24V655000": ("2024-08-27", "General Motors, LLC", "SIERRA 1500, SILVERADO 1500", 1117, "2023-2024"),
    "24V661000": ("2024-08-29", "Blue Bird Body Company", "VISION", 87, "2024"),
    "24V672000": ("2024-09-03", "Tesla, Inc.", "MODEL 3", 1900, "2021-2023"),
    "24V680000": ("2024-09-06", "Harley-Davidson Motor Company", "FLHTK, FLTRK", 65641, "2023"),
    "24V688000": ("2024-09-10", "Nissan North America, Inc.", "ROGUE", 712000, "2014-2020"),
    "24V690000": ("2024-09-11", "Forest River, Inc.", "CHEROKEE", 312, "2023-2024"),       # + a 9999 row
    "24V698000": ("2024-09-13", "Toyota Motor Engineering & Manufacturing", "SEQUOIA, TUNDRA", 11870, "2024"),
    "24V701000": ("2024-09-19", "Ford Motor Company", "AVIATOR, EXPLORER, POLICE INTERCEPTOR UTILITY", 248550,
                  "2020-2022"),
    "24V702000": ("2024-09-20", "Thule Inc.", "WINGBAR EVO", 2700, None),                  # only year 9999
    "24V703000": ("2024-09-24", "Honda (American Honda Motor Co.)", "ACCORD, CIVIC, ILX", 96310, "2018-2020"),
    "24V704000": ("2024-09-25", "Mercedes-Benz USA, LLC", None, 1402, None),                # detail 404
    "24V705000": ("2024-09-27", "Kia America, Inc.", None, 41870, None),                    # detail 404
}

# ---- ca: opendatatc.tc.canada.ca/GET_vrdb_full_monthly.csv_*.body (the 60-day file is a subset)
# One record per RECALL_NUMBER_NUM; rows of one number are joined in file order: distinct
# MAKE_NAME_NM and MODEL_NAME_NM joined ", ", YEAR as a range; UNIT_AFFECTED_NBR is repeated on
# each row ("2,700.00" x3 -> 2700; 1989045's second row is blank). RECALL_DATE_DTE is the date;
# 2008217's "2008-02-30" is no date -> stored as unknown (1970-01-01, date_unknown = 1).
CA = {
    "1989045": ("1989-03-22", "CHRYSLER, DODGE", "NEW YORKER, DYNASTY", 4512, "1989"),
    "1997118": ("1997-06-16", "FORD", "WINDSTAR", 27, "1998"),
    "2008217": ("1970-01-01", "HARLEY-DAVIDSON", "FLHTCU", 1146, "2007"),
    "2012099": ("2012-03-05", "MAZDA", "MAZDA3, MAZDA5", 52390, "2011-2012"),     # rows 9 and 11: not adjacent
    "2015072": ("2015-04-08", "KIA", "FORTE", 866, "2014"),
    "2019385": ("2019-08-29", "CHEVROLET, GMC", "SILVERADO 1500, SIERRA 1500, SILVERADO 1500 LD", 2700, "2019-2020"),
    "2024301": ("2024-05-14", "FORD", "MAVERICK", 12418, "2022-2023"),
    "2024302": ("2024-05-21", "HYUNDAI", "ELANTRA", 3105, "2021"),
    "2024310": ("2024-06-03", "FREIGHTLINER", "CASCADIA", 41, "2024"),
}
CA_DATE_UNKNOWN = {"2008217"}

# ---- au: www.vehiclerecalls.gov.au/GET_recalls_rec-0060NN_*.body (23 detail pages; the three
# browse pages list them). "Original publish date" DD/MM/YYYY; "Make"; "Models" (one per line,
# joined ", "); "Year range" "A - B" (-> "A-B", or "A" when A = B). The pages state no unit count.
AU = {
    "REC-006024": ("2024-04-15", "Ford", "Ranger", None, "2019"),
    "REC-006025": ("2024-04-18", "Toyota", "Corolla, Corolla Hatch", None, "2018-2020"),
    "REC-006026": ("2024-04-21", "Mitsubishi", "Triton", None, "2017"),
    "REC-006027": ("2024-04-24", "Kia", "Sportage", None, "2021-2022"),
    "REC-006028": ("2024-04-27", "Isuzu", "D-MAX, MU-X", None, "2020-2022"),
    "REC-006029": ("2024-04-30", "Mazda", "CX-5", None, "2019-2020"),
    "REC-006030": ("2024-05-03", "Hyundai", "i30, i30 N", None, "2018"),
    "REC-006031": ("2024-05-06", "Ford", "Ranger", None, "2017-2019"),
    "REC-006032": ("2024-05-09", "Toyota", "Corolla, Corolla Hatch", None, "2021"),
    "REC-006033": ("2024-05-12", "Mitsubishi", "Triton", None, "2020-2021"),
    "REC-006034": ("2024-05-15", "Kia", "Sportage", None, "2019-2021"),
    "REC-006035": ("2024-05-18", "Isuzu", "D-MAX, MU-X", None, "2018-2019"),
    "REC-006036": ("2024-05-21", "Mazda", "CX-5", None, "2017"),
    "REC-006037": ("2024-05-24", "Hyundai", "i30, i30 N", None, "2021-2023"),
    "REC-006038": ("2024-05-27", "Ford", "Ranger", None, "2020"),
    "REC-006039": ("2024-05-30", "Toyota", "Corolla, Corolla Hatch", None, "2019-2020"),
    "REC-006040": ("2024-06-02", "Mitsubishi", "Triton", None, "2018-2020"),
    "REC-006041": ("2024-06-05", "Kia", "Sportage", None, "2017-2018"),
    "REC-006042": ("2024-06-08", "Isuzu", "D-MAX, MU-X", None, "2021"),
    "REC-006043": ("2024-06-11", "Mazda", "CX-5", None, "2020-2022"),
    "REC-006044": ("2024-06-14", "Hyundai", "i30, i30 N", None, "2019"),
    "REC-006045": ("2024-06-17", "Ford", "Ranger", None, "2018-2019"),
    "REC-006046": ("2024-06-20", "Toyota", "Corolla, Corolla Hatch", None, "2017-2019"),
}

# ---- eu: ec.europa.eu weekly reports (detail_xml_10000201 / 10000204 / 10000205 / 15). Only the
# vehicle alerts (category "Motor vehicles" or a vehicle part such as tyres, floor mats,
# automotive accessories) are recalls; toys, baby carriers, clothing are not. <caseNumber> is the
# number, the report's <report_date> DD/MM/YYYY the date (SR/02101/26 is in 10000204 of
# 14/08/2026 and again in 10000205 of 21/08: the first report's date stays). Manufacturer =
# <brand> without markup ("Unknown" and empty -> none); model = <name> "(" <type_numberOfModel> ")".
# The 2005 report (detail_xml_15) has empty brand/name: both come from the <description>
# "Meridian - Tourer 2.0 (M 75)" and "Grip-Tex". No unit counts, no model years.
EU = {
    "0061/05": ("2005-02-18", "Meridian", "Tourer 2.0 (M 75)", None, None),
    "0063/05": ("2005-02-18", None, "Grip-Tex", None, None),
    "SR/01901/26": ("2026-07-24", "Volkswagen", "Golf (e1*2018/858*00012*01 (CD1))", None, None),
    "SR/01907/26": ("2026-07-24", None, "Road & Rail 4S (205/55 R16 91V)", None, None),   # brand "Unknown"
    "SR/02101/26": ("2026-08-14", "Kestrel Motorcycles", "Ridge 700 (e4*168/2013*00777*00)", None, None),
    "SR/02109/26": ("2026-08-14", "VoltMax", "Boost 12 (VM-B12)", None, None),
    "SR/02140/26": ("2026-08-21", "Carro", "Urbano 12 (e9*2018/858*00999*02)", None, None),
}

# ---- jp: www.mlit.go.jp list PDFs, authored in fixtures/jp/make_fixtures.py (DUCATI, HONDA,
# SUZUKI, SMALL_BATCH; the small batch is served as a scan, read by OCR). Date = リコール開始日
# (single-recall layout) or 届出日 (small batch), 令和6年 = 2024. Manufacturer = 車名, model = the
# 通称名 of the vehicle rows joined "、", units = 合計 (or the sum of 対象台数: 5402 is 37 + 21
# over two rows). The PDFs state no model year.
JP = {
    "外-3456": ("2024-09-07", "ドゥカティ", "パニガーレV4、パニガーレV4 S、ストリートファイターV4", 3012, None),
    "4526": ("2024-09-06", "ホンダ", "GB350、GB350S", 12313, None),
    "4498": ("2024-08-10", "スズキ", "ジムニー", 4213, None),
    "外-3471": ("2024-08-02", "フィアット", "フィアット500", 12, None),
    "5402": ("2024-08-09", "三菱ふそう", "キャンター", 58, None),
    "外-3478": ("2024-08-20", "BMW", "X7 xDrive40d", 64, None),
    "5415": ("2024-08-28", "いすゞ", "エルフ", 8, None),
}

# The sources these expectations were written for. A source added later is not listed: its
# clean replay run is still the reference every faulty run must match (test_faults), and
# tests/test_every_source.py checks its run; add its table here to pin its values too.
EXPECTED = {"us": ("US", US), "ca": ("CA", CA), "au": ("AU", AU), "eu": ("EU", EU), "jp": ("JP", JP)}


def expected_records(source_id: str) -> dict:
    """{(country, recall_number): {field: value}} as the payloads state it."""
    country, table = EXPECTED[source_id]
    return {(country, number): dict(zip(FIELDS, values)) for number, values in table.items()}


def differences(source_id: str, stored: dict) -> list[str]:
    """Where `stored` ({(country, number): row}, e.g. universe.records()) departs from the
    payloads: missing or extra recall numbers, and every field that differs. Nothing for a
    source without a hand-written table (see EXPECTED)."""
    if source_id not in EXPECTED:
        return []
    expected = expected_records(source_id)
    problems = [f"{source_id}: missing {key}" for key in sorted(set(expected) - set(stored))]
    problems += [f"{source_id}: not in the payload {key}" for key in sorted(set(stored) - set(expected))]
    for key in sorted(set(expected) & set(stored)):
        for field, value in expected[key].items():
            if stored[key][field] != value:
                problems.append(f"{source_id} {key[1]} {field}: stored {stored[key][field]!r}, payload says {value!r}")
    if source_id == "ca":
        for number in CA_DATE_UNKNOWN:
            key = ("CA", number)
            if key in stored and stored[key]["date_unknown"] != 1:
                problems.append(f"ca {number}: an impossible date is not marked unknown")
    return problems
