"""Datasette facets that follow a record type's declaration (browse.py puts them in the
metadata; no record type is named here).

- `month` ({"month": "recall_date"}): records per YYYY-MM of the date field, plus "date unknown"
  for records whose date could not be read (`date_unknown = 1`) as a value of its own — never
  counted under the sentinel date 1970-01-01. Datasette facets by day only.
- `values` ({"values": "model_year"}): for a declared `Facet` whose stored value expands into
  several facet values (`expand`: the model-year range "2019-2021" counts under 2019, 2020 and
  2021) or whose column holds several (`multi`: a JSON list). Selecting a value adds
  `_bcf_<field>=<value>`, which `filters_from_request` turns into a condition on the stored
  values that expand to it.
"""
from __future__ import annotations

import json

from datasette import hookimpl
from datasette.database import QueryInterrupted
from datasette.facets import Facet
from datasette.filters import FilterArguments
from datasette.utils import path_with_added_args, path_with_removed_args

from basecrawler.browse import types_by_table

TYPES = types_by_table()
SELECT_PREFIX = "_bcf_"            # ?_bcf_model_year=2020
DATE_UNKNOWN = "date unknown"
SENTINEL_FLOOR = "1970-01-01"      # a sentinel date (vehicle recalls) is never a month


def _column(config: dict) -> str:
    return config.get("simple") or config.get("column")


class _DeclaredFacet(Facet):
    async def suggest(self):
        return []

    def _toggle(self, key: str, value: str) -> tuple[str, bool]:
        selected = (key, value) in self.get_querystring_pairs()
        path = (path_with_removed_args(self.request, {key: value}) if selected
                else path_with_added_args(self.request, {key: value}))
        return self.ds.absolute_url(self.request, self.ds.urls.path(path)), selected

    def _result(self, source_and_config, column: str, values: list, truncated: bool) -> dict:
        declared = TYPES.get(self.table)
        facet = declared.facet(column) if declared else None
        return {
            # Datasette's template adds the type: "recall_date (month)".
            "name": column, "type": self.type, "label": facet.label if facet else None,
            "hideable": source_and_config["source"] != "metadata",
            "toggle_url": self.ds.urls.path(path_with_removed_args(self.request, {f"_facet_{self.type}": column})),
            "results": values, "truncated": truncated,
        }

    async def _rows(self, sql: str):
        return await self.ds.execute(self.database, sql, self.params, truncate=False,
                                     custom_time_limit=self.ds.setting("facet_time_limit_ms"))


class MonthFacet(_DeclaredFacet):
    """Facet a date column by month: `{"month": "recall_date"}` in the table's facets."""

    type = "month"

    async def facet_results(self):
        results, timed_out = [], []
        declared = TYPES.get(self.table)
        may_be_unknown = declared is not None and declared.date_optional
        for source_and_config in self.get_configs():
            column = _column(source_and_config["config"])
            size = self.get_facet_size()
            known = "AND COALESCE(date_unknown, 0) = 0" if may_be_unknown else ""
            sql = (f"SELECT substr([{column}], 1, 7) AS value, count(*) AS count FROM ({self.sql}) "
                   f"WHERE [{column}] IS NOT NULL AND [{column}] > '{SENTINEL_FLOOR}' {known} "
                   f"GROUP BY value ORDER BY value DESC LIMIT {size + 1}")
            try:
                rows = await self._rows(sql)
                unknown = 0
                if may_be_unknown:
                    unknown = (await self._rows(f"SELECT count(*) AS n FROM ({self.sql}) WHERE date_unknown = 1")).first()["n"]
            except QueryInterrupted:
                timed_out.append(column)
                continue
            values = []
            for row in rows.rows[:size]:
                url, selected = self._toggle(f"{column}__startswith", row["value"])
                values.append({"value": row["value"], "label": row["value"], "count": row["count"],
                               "toggle_url": url, "selected": selected})
            if unknown:
                url, selected = self._toggle("date_unknown", "1")
                values.append({"value": DATE_UNKNOWN, "label": DATE_UNKNOWN, "count": unknown,
                               "toggle_url": url, "selected": selected})
            result = self._result(source_and_config, column, values, len(rows.rows) > size)
            if declared is not None:
                result["label"] = f"{declared.label(column)} by month"
            results.append(result)
        return results, timed_out


def _facet_values(facet, stored) -> list[str]:
    """The facet values one stored value counts under."""
    if stored is None or stored == "":
        return []
    return [str(v) for v in facet.expand(stored)] if facet.expand else [str(stored)]


def _raw_values_sql(column: str, multi: bool, source: str) -> str:
    """Each stored value of `column` in `source` with its record count (a JSON list's elements
    one by one for a multi-valued field)."""
    if multi:
        return (f"SELECT element.value AS value, count(*) AS count FROM ({source}) AS t, json_each("
                f"CASE WHEN json_valid(t.[{column}]) THEN t.[{column}] ELSE json_array(t.[{column}]) END) AS element "
                f"WHERE t.[{column}] IS NOT NULL AND element.value IS NOT NULL GROUP BY element.value")
    return f"SELECT [{column}] AS value, count(*) AS count FROM ({source}) GROUP BY [{column}]"


class ValuesFacet(_DeclaredFacet):
    """A declared facet whose stored values expand (ranges) or are several (lists)."""

    type = "values"

    async def facet_results(self):
        results, timed_out = [], []
        declared = TYPES.get(self.table)
        for source_and_config in self.get_configs():
            column = _column(source_and_config["config"])
            facet = declared.facet(column) if declared else None
            if facet is None:
                continue
            try:
                rows = await self._rows(_raw_values_sql(column, facet.multi, self.sql))
            except QueryInterrupted:
                timed_out.append(column)
                continue
            counts: dict[str, int] = {}
            for row in rows.rows:
                for value in set(_facet_values(facet, row["value"])):
                    counts[value] = counts.get(value, 0) + row["count"]
            size = self.get_facet_size()
            ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
            values = []
            for value, count in ranked[:size]:
                url, selected = self._toggle(f"{SELECT_PREFIX}{column}", value)
                values.append({"value": value, "label": value, "count": count, "toggle_url": url, "selected": selected})
            results.append(self._result(source_and_config, column, values, len(ranked) > size))
        return results, timed_out


@hookimpl
def register_facet_classes():
    return [MonthFacet, ValuesFacet]


@hookimpl
def filters_from_request(request, database, table, datasette):
    """`_bcf_<field>=<value>`: the records with a stored value that counts under `value`."""
    declared = TYPES.get(table)
    if declared is None:
        return None
    chosen = [(key[len(SELECT_PREFIX):], value) for key in request.args.keys() if key.startswith(SELECT_PREFIX)
              for value in request.args.getlist(key)]
    chosen = [(declared.facet(field), value) for field, value in chosen if declared.facet(field)]
    if not chosen:
        return None

    async def conditions():
        db = datasette.get_database(database)
        wheres, params, descriptions = [], {}, []
        for n, (facet, value) in enumerate(chosen):
            stored = await db.execute(_raw_values_sql(facet.field, facet.multi, f"SELECT * FROM [{table}]"))
            matching = [row["value"] for row in stored.rows if value in _facet_values(facet, row["value"])]
            name = f"bcf_{n}"
            params[name] = json.dumps(matching)
            if facet.multi:
                wheres.append(f"EXISTS (SELECT 1 FROM json_each(CASE WHEN json_valid([{facet.field}]) THEN [{facet.field}] "
                              f"ELSE json_array([{facet.field}]) END) AS e WHERE e.value IN (SELECT value FROM json_each(:{name})))")
            else:
                wheres.append(f"[{facet.field}] IN (SELECT value FROM json_each(:{name}))")
            descriptions.append(f"{facet.label} is {value}")
        return FilterArguments(wheres, params, descriptions)
    return conditions()
