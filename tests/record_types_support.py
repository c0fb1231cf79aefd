"""A second record type for tests (`gadget_alert`), declared here as a user would in a module
of record_types/, and fixtures that register it for one test."""
import datetime as dt

import pytest
from pydantic import BaseModel, ConfigDict, Field

from basecrawler.recordtypes import Facet, RecordType, register_record_type
from basecrawler.recordtypes.registry import forget_registered_types


class GadgetAlert(BaseModel):
    model_config = ConfigDict(extra="forbid")

    alert_id: str = Field(min_length=1)
    country: str | None = None
    published: dt.date | None = None
    title_original: str | None = None
    title_ko: str | None = None
    hazard_original: str | None = None
    hazard_ko: str | None = None
    category: list[str] = Field(default_factory=list)
    authority: str | None = None
    source_url: str | None = None
    extra: dict = Field(default_factory=dict)


GADGET = RecordType(
    name="gadget_alert", title="Gadget alerts", model=GadgetAlert, table="gadget_alerts", key=("alert_id",),
    date_field="published", translated=("title", "hazard"), searchable=("authority",),
    facets=(Facet("category", "Category", multi=True), Facet("authority", "Authority")),
    display=("title", "hazard"), same_as_field="alert_id",
)


def gadget(n, **fields) -> GadgetAlert:
    values = {"alert_id": f"G{n}", "country": "CA", "published": dt.date(2024, 5, 1), "title_original": f"Kettle {n}",
              "hazard_original": "Burn hazard", "category": ["Appliances"], "authority": "Health Canada"}
    values.update(fields)
    return GadgetAlert(**values)


@pytest.fixture
def gadget_type():
    """`gadget_alert` registered for this test (its table appears when a store opens)."""
    register_record_type(GADGET)
    yield GADGET
    forget_registered_types()
