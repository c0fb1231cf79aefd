"""EU Safety Gate: one notification → its records. Every notification is a `product_alert`;
one in a vehicle category (see `VEHICLE_CATEGORY_EXAMPLES`) is also a `vehicle_recall`. Both
carry the case number, so they are shown as the same alert.
"""
from __future__ import annotations

import re

from sources.eu_text import measures_as_sentences, names_from_description, split_danger, split_measures

# ---- vehicle filter ---------------------------------------------------------------------
# Word boundaries matter: "carrier" and "Childcare" contain "car", "Toys" can name cars.
_VEHICLE_WORDS = re.compile(
    r"\b(motor\s+vehicles?|vehicles?|cars?|automotive|tyres?|tires?|motorcycles?|trailers?)\b", re.IGNORECASE)
_NOT_VEHICLE_WORDS = re.compile(r"\b(toys?|childcare|child\s+care)\b", re.IGNORECASE)

# The filter's contract: category text → kept? Real categories seen in the 2005, 2022 and
# 2026 reports plus the vehicle ones named in the issue. tests/test_eu.py checks every row.
VEHICLE_CATEGORY_EXAMPLES: dict[str, bool] = {
    "Motor vehicles": True,
    "Other - Car floor mats": True,
    "Other - Tyres": True,
    "Other - Automotive accessories": True,
    "Other - Car seat covers": True,
    "Other - Vehicle parts": True,
    "Toys": False,
    "Other - Toy cars": False,
    "Childcare articles and children's equipment": False,
    "Other - Baby carrier": False,
    "Hobby/sports equipment": False,
    "Electrical appliances and equipment": False,
    "Clothing, textiles and fashion items": False,
    "Protective equipment": False,
    "Machinery": False,
    "Lighting chains": False,
    "Decorative articles": False,
    "Carpets": False,
    "Other - Scar treatment products": False,
    "": False,
}


def is_vehicle_category(category: str | None) -> bool:
    """True for a Safety Gate category that is about vehicles, their parts or accessories."""
    if not category:
        return False
    return bool(_VEHICLE_WORDS.search(category)) and not _NOT_VEHICLE_WORDS.search(category)


# A modern alert's description of a vehicle is its kind alone ("Bus.", "Passenger car."),
# sometimes followed by the VIN range of the vehicles concerned.
_LEAD_SENTENCE_RE = re.compile(r"^\s*([^.]{1,80})\.\s*")
_IDENTIFICATION_RE = re.compile(r"^(VIN|chassis)\b", re.IGNORECASE)


def vehicle_summary(description: str | None, product: str | None) -> tuple[str | None, str | None]:
    """(summary, identification) of a vehicle notification. A lead sentence that only repeats
    the product's kind is dropped — the kind is in `extra.product`, and a row reading "Bus."
    says nothing — and a VIN range after it is identification, not a summary. With nothing
    left the summary is empty, so a row shows the defect (the type shows summary, else cause)."""
    if not description or not product:
        return description, None
    lead = _LEAD_SENTENCE_RE.match(description)
    if lead is None or lead.group(1).strip().casefold() != product.strip().casefold():
        return description, None
    rest = description[lead.end():].strip() or None
    if rest and _IDENTIFICATION_RE.match(rest):
        return None, rest
    return rest, None


def vehicle_recall_fields(raw: dict) -> dict:
    """A notification in a vehicle category → the fields of a `vehicle_recall`."""
    danger = split_danger(raw.get("danger"))
    measures = split_measures(raw.get("measures"))
    brand, name, model_type = raw.get("brand"), raw.get("name"), raw.get("type_numberOfModel")
    names_guessed = False
    if not brand and not name and not model_type:
        brand, name = names_from_description(raw.get("description"))
        names_guessed = bool(brand or name)
    model = name
    if model_type and model_type != name:
        model = f"{name} ({model_type})" if name else model_type
    dates = [m["entry_into_force"] for m in measures if m.get("entry_into_force")]
    summary, identification = vehicle_summary(raw.get("description"), raw.get("product"))
    extra = {
        "category": raw.get("category"), "product": raw.get("product"), "name": raw.get("name"),
        "type_numberOfModel": model_type, "barcode": raw.get("barcode"), "batchNumber": raw.get("batchNumber"),
        "riskType": raw.get("riskType"), "level": raw.get("level"), "type": raw.get("type"),
        "notifyingCountry": raw.get("notifyingCountry"), "countryOfOrigin": raw.get("countryOfOrigin"),
        "pictures": raw.get("pictures"), "companyRecallCode": raw.get("companyRecallCode"),
        "productionDates": raw.get("productionDates"), "URLrecall": raw.get("URLrecall"),
        "onlineTrader": raw.get("onlineTrader"), "compliance": danger["compliance"],
        "measures": measures or None, "entry_into_force": min(dates) if dates else None,
        "report_id": raw.get("report_id"), "report_reference": raw.get("report_reference"),
        "report_date": raw.get("report_date"), "report_week": raw.get("report_week"),
        "report_addendum": raw.get("report_addendum"),
        "names_from_description": names_guessed or None,
        "vehicle_identification": identification,
    }
    return {
        "recall_number": raw["caseNumber"],
        # An alert already stored (an addendum repeating it) keeps the date it was first
        # published with: sent without a date, the store never lets the sentinel replace the
        # stored date, and the date window does not drop what the addendum adds.
        "recall_date": None if raw.get("date_stored") else raw.get("first_report_date") or raw.get("report_date"),
        "manufacturer_original": brand,
        "model_original": model,
        "summary_original": summary,
        "defect_cause_original": danger["defect_cause"],
        "consequence_original": danger["consequence"],
        "remedy_original": measures_as_sentences(measures) or raw.get("measures"),
        "source_url": raw.get("reference"),
        "extra": {k: v for k, v in extra.items() if v not in (None, "", [])},
    }


def product_alert_fields(raw: dict) -> dict:
    """One notification, of any category → the fields of a `product_alert`."""
    danger, measures = raw.get("danger"), split_measures(raw.get("measures"))
    brand, name, model_type = raw.get("brand"), raw.get("name"), raw.get("type_numberOfModel")
    if not brand and not name and not model_type:
        brand, name = names_from_description(raw.get("description"))
    named = " ".join(part for part in (brand, name) if part) or None
    extra = {
        "name": name, "type_numberOfModel": model_type, "riskType": raw.get("riskType"),
        "barcode": raw.get("barcode"), "batchNumber": raw.get("batchNumber"), "type": raw.get("type"),
        "notifyingCountry": raw.get("notifyingCountry"), "countryOfOrigin": raw.get("countryOfOrigin"),
        "pictures": raw.get("pictures"), "companyRecallCode": raw.get("companyRecallCode"),
        "productionDates": raw.get("productionDates"), "URLrecall": raw.get("URLrecall"),
        "onlineTrader": raw.get("onlineTrader"), "measures": measures or None,
        "report_id": raw.get("report_id"), "report_reference": raw.get("report_reference"),
        "report_date": raw.get("report_date"), "report_week": raw.get("report_week"),
        "report_addendum": raw.get("report_addendum"),
    }
    return {
        "alert_id": raw["caseNumber"],
        # An alert repeated in an addendum keeps the date of the first report that listed it.
        "alert_date": raw.get("first_report_date") or raw.get("report_date"),
        "title_original": " – ".join(part for part in (raw.get("product"), named) if part) or None,
        "product_original": raw.get("product"),
        "hazard_original": danger,
        "what_to_do_original": measures_as_sentences(measures) or raw.get("measures"),
        "description_original": raw.get("description"),
        "category": [raw["category"]] if raw.get("category") else [],
        # The member state whose authority notified the alert.
        "authority": raw.get("notifyingCountry"),
        "risk_class": raw.get("level"),
        "brand": brand,
        # The case number links this alert to the vehicle recall made from the same notification.
        "recall_number": raw["caseNumber"],
        "source_url": raw.get("reference"),
        "extra": {key: value for key, value in extra.items() if value not in (None, "", [])},
    }
