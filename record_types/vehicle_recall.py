"""vehicle_recall: a recall of motor vehicles or their equipment (NHTSA, Transport Canada,
MLIT, Australia, the motor-vehicle notifications of EU Safety Gate)."""
from __future__ import annotations

import datetime as dt

from basecrawler.recordtypes import Facet, RecordType

# TRANSITIONAL: the model and the maker-name table still live in the framework
# (basecrawler/model.py, basecrawler/manufacturers.py) until they move next to this module.
from basecrawler.manufacturers import manufacturer_key
from basecrawler.model import Recall


def _model_years(value) -> list[str]:
    """'2019-2021' counts under 2019, 2020 and 2021; a single year under itself."""
    if not value:
        return []
    low, _, high = str(value).partition("-")
    if high and low.isdigit() and high.isdigit() and int(high) - int(low) < 100:
        return [str(year) for year in range(int(low), int(high) + 1)]
    return [str(value)]


VEHICLE_RECALL = RecordType(
    name="vehicle_recall",
    title="Vehicle recalls",
    model=Recall,
    table="recalls",
    key=("country", "recall_number"),
    date_field="recall_date",
    date_optional=True,
    date_sentinel=dt.date(1970, 1, 1),
    translated=("manufacturer", "model", "component", "summary", "defect_cause", "consequence", "remedy"),
    facets=(
        Facet("country", "Country"),
        Facet("source", "Source"),
        Facet("manufacturer_key", "Manufacturer"),
        Facet("model_year", "Model year", expand=_model_years),
    ),
    labels={
        "source": "Source", "country": "Country", "recall_number": "Recall number",
        "recall_date": "Recall date", "date_unknown": "Date unknown",
        "manufacturer_original": "Manufacturer", "manufacturer_ko": "Manufacturer (Korean)",
        "manufacturer_key": "Manufacturer key",
        "model_original": "Model", "model_ko": "Model (Korean)",
        "component_original": "Component", "component_ko": "Component (Korean)",
        "summary_original": "Summary", "summary_ko": "Summary (Korean)",
        "defect_cause_original": "Defect / cause", "defect_cause_ko": "Defect / cause (Korean)",
        "consequence_original": "Consequence", "consequence_ko": "Consequence (Korean)",
        "remedy_original": "Remedy", "remedy_ko": "Remedy (Korean)",
        "model_year": "Model year", "affected_units": "Affected units", "source_lang": "Language",
        "source_url": "Source link", "extra": "Extra",
    },
    display=("summary", "defect_cause", "component"),
    listing=("recall_date", "country", "source", "recall_number", "manufacturer_original", "model_original",
             "model_year"),
    card=("recall_number", "recall_date", "country", "source", "manufacturer", "model", "model_year",
          "affected_units", "component", "summary", "defect_cause", "consequence", "remedy", "source_url"),
    derived=lambda row: {"manufacturer_key": manufacturer_key(row.get("manufacturer_original"))},
    derived_columns={"manufacturer_key": str},
    same_as_field="recall_number",
)
