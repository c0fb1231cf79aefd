"""product_alert: a recall, withdrawal or safety warning for any consumer product, food, drug or
medical device (Government of Canada Recalls & Safety Alerts, every EU Safety Gate notification).

The date may be unknown (a fifth of the Canada file has none): such a record is stored with
`date_unknown = 1` and a NULL date, counted and searchable, never given an invented date.
`recall_number` is a publisher number other sources use for the same recall (a Transport Canada
recall number in a Canadian alert; the Safety Gate case number in an EU alert; CPSC's recall
number; openFDA's recall number): records of any type with the same country and number are
shown as the same recall, never merged.

Optional facts some publishers give and users filter on (empty for the others, so stores made
before them only gain empty columns): `hazard_type`, `made_in` (countries of manufacture),
`company` (manufacturers, importers, a recalling firm), `distribution` (Nationwide,
International, US states) — lists, multi-valued facets — and `status` (a facet); `event_id`
(openFDA: one recall event covering several alerts) is searchable and on the card.
"""
from __future__ import annotations

import datetime as dt
from typing import Any, ClassVar

from pydantic import Field

from basecrawler.recordtypes import Facet, RecordType

from ._fields import TypeModel


class ProductAlert(TypeModel):
    date_field: ClassVar[str] = "alert_date"
    upper_fields: ClassVar[tuple[str, ...]] = ("country",)
    list_fields: ClassVar[tuple[str, ...]] = ("category", "hazard_type", "made_in", "company", "distribution")

    country: str = Field(min_length=2, max_length=3)
    alert_id: str = Field(min_length=1)              # the publisher's id of the alert (NID, case number)
    alert_date: dt.date | None = None
    date_unknown: bool = False

    title_original: str | None = None
    title_ko: str | None = None
    product_original: str | None = None
    product_ko: str | None = None
    hazard_original: str | None = None               # the issue / danger as published
    hazard_ko: str | None = None
    what_to_do_original: str | None = None
    what_to_do_ko: str | None = None
    description_original: str | None = None
    description_ko: str | None = None

    category: list[str] = Field(default_factory=list)   # several where the publisher lists several
    authority: str | None = None                     # who issued it (CFIA, Medical devices, a member state)
    risk_class: str | None = None                    # as published: "Class 1", "Type II", "Serious risk"
    brand: str | None = None
    recall_number: str | None = None                 # a number other sources share (see module doc)
    archived: bool | None = None
    # Filterable facts some publishers give (CPSC, openFDA); empty for the others. Lists where
    # one alert has several: a user filters on any of them.
    hazard_type: list[str] = Field(default_factory=list)    # "Fire", "Choking" (CPSC hazards)
    made_in: list[str] = Field(default_factory=list)        # countries of manufacture
    company: list[str] = Field(default_factory=list)        # manufacturers, importers, the recalling firm
    distribution: list[str] = Field(default_factory=list)   # where it was sold: "Nationwide", US states
    status: str | None = None                        # the recall's state as published: "Ongoing", "Terminated"
    event_id: str | None = None                      # one recall event covering several alerts (openFDA)
    source_lang: str = "en"
    source_url: str | None = None
    extra: dict[str, Any] = Field(default_factory=dict)


PRODUCT_ALERT = RecordType(
    name="product_alert",
    title="Product alerts",
    model=ProductAlert,
    table="product_alerts",
    key=("country", "alert_id"),
    date_field="alert_date",
    date_optional=True,
    date_sentinel=None,
    translated=("title", "product", "hazard", "what_to_do", "description"),
    searchable=("alert_id", "recall_number", "brand", "authority", "risk_class", "category", "company", "event_id"),
    facets=(
        Facet("category", "Category", multi=True),
        Facet("authority", "Authority"),
        Facet("risk_class", "Risk class"),
        Facet("hazard_type", "Hazard type", multi=True),
        Facet("made_in", "Made in", multi=True),
        Facet("company", "Company", multi=True),
        Facet("distribution", "Distribution", multi=True),
        Facet("status", "Status"),
        Facet("country", "Country"),
        Facet("source", "Source"),
    ),
    labels={
        "source": "Source", "country": "Country", "alert_id": "Alert id", "alert_date": "Date",
        "date_unknown": "Date unknown",
        "title_original": "Title", "title_ko": "Title (Korean)",
        "product_original": "Product", "product_ko": "Product (Korean)",
        "hazard_original": "Hazard / issue", "hazard_ko": "Hazard / issue (Korean)",
        "what_to_do_original": "What to do", "what_to_do_ko": "What to do (Korean)",
        "description_original": "Description", "description_ko": "Description (Korean)",
        "category": "Category", "authority": "Authority", "risk_class": "Risk class", "brand": "Brand",
        "recall_number": "Recall number", "archived": "Archived",
        "hazard_type": "Hazard type", "made_in": "Made in", "company": "Company", "distribution": "Distribution",
        "status": "Status", "event_id": "Recall event", "source_lang": "Language",
        "source_url": "Source link", "extra": "Extra",
    },
    display=("title", "hazard", "product"),
    listing=("alert_date", "country", "source", "alert_id", "title_original", "category", "authority",
             "risk_class"),
    card=("alert_id", "alert_date", "country", "source", "authority", "category", "risk_class", "title",
          "product", "brand", "hazard", "what_to_do", "description", "recall_number", "event_id", "hazard_type",
          "made_in", "company", "distribution", "status", "archived", "source_url"),
    heading=("product",),
    same_as_field="recall_number",
)
