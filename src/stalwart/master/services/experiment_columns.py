"""The experiment list's columns as SQL: sort by any of them, filter on any of them.

A column is named as the web UI's experiment table names it (``GET
/projects/{id}/columns``, :mod:`stalwart.master.services.project_columns`):

- the fixed columns (``id``, ``name``, ``description``, ``tags``, ``forkedFrom``,
  ``startTime``, ``endTime``, ``duration``, ``numTrials``, ``state``, ``searcherType``,
  ``searcherMetric``, ``searcherMetricsVal``, ``resourcePool``, ``projectId``, ``progress``,
  ``checkpointSize``, ``checkpointCount``, ``user``, ``externalExperimentId``, ``archived``),
  and the ``SORT_BY_*`` values of ``GET /experiments``' ``sortBy`` for the same;
- ``hp.<name>`` (nested hyperparameters joined by dots): the value in the experiment's shown
  trial: its best trial (``experiments.best_trial_id``), else its first trial;
- ``<group>.<metric>.<last|max|mean|min>`` (``validation.validation_loss.min``): that summary
  of the metric over the live reports of the group in the experiment's best trial (what the
  table shows from ``bestTrial.summaryMetrics``); ``<group>.<metric>`` alone means ``.last``,
  the value in the latest report that has it. Validation metrics read the stored summaries
  (:mod:`stalwart.master.services.metric_summaries`: finite numbers only, one index seek);
  other groups aggregate the reports' JSON (a scan of the best trial's reports).

Contract of the order (:func:`order_by`): every key sorts numbers numerically; a column whose
values may be numbers or text (hyperparameters) sorts numbers first, then text; missing
values (NULL, or not a number for a metric) come last in both directions; ties are broken by
the experiment id (in the direction of the first key), so paging is stable.

``searcherMetricsVal`` reads ``experiments.best_searcher_metric``, which the metric ingest
keeps (:func:`stalwart.master.services.metrics.refresh_experiment_best`); the other computed
columns are correlated subqueries through ``best_trial_id`` and the report index, one index
seek (or a short range scan) per experiment.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from sqlalchemy import Float, Text, and_, case, cast, func, literal, not_, or_, select
from sqlalchemy.orm import aliased
from sqlalchemy.sql.elements import ColumnElement

from stalwart.errors import InvalidArgumentError
from stalwart.master.db.tables import (
    Checkpoint,
    Experiment,
    MetricReport,
    Trial,
    TrialMetricSummary,
    User,
)
from stalwart.master.services import metric_summaries
from stalwart.master.services.trials import COUNTED_CHECKPOINT_STATES

__all__ = [
    "AGGREGATES",
    "ExperimentFilter",
    "SortKey",
    "column",
    "order_by",
    "parse_filter",
    "parse_sort",
]

Kind = Literal["number", "text", "date", "mixed", "bool"]
AGGREGATES = ("last", "max", "mean", "min")

SORT_BY_NAMES = {
    "SORT_BY_UNSPECIFIED": "id",
    "SORT_BY_ID": "id",
    "SORT_BY_DESCRIPTION": "description",
    "SORT_BY_NAME": "name",
    "SORT_BY_START_TIME": "startTime",
    "SORT_BY_END_TIME": "endTime",
    "SORT_BY_STATE": "state",
    "SORT_BY_NUM_TRIALS": "numTrials",
    "SORT_BY_PROGRESS": "progress",
    "SORT_BY_USER": "user",
    "SORT_BY_FORKED_FROM": "forkedFrom",
    "SORT_BY_RESOURCE_POOL": "resourcePool",
    "SORT_BY_PROJECT_ID": "projectId",
    "SORT_BY_CHECKPOINT_SIZE": "checkpointSize",
    "SORT_BY_CHECKPOINT_COUNT": "checkpointCount",
    "SORT_BY_SEARCHER_METRIC_VAL": "searcherMetricsVal",
    "SORT_BY_EXTERNAL_EXPERIMENT_ID": "externalExperimentId",
}
"""``GET /experiments``' ``sortBy`` values and the column each one sorts by."""


@dataclass(frozen=True)
class Column:
    """A column as SQL over ``experiments``: its values, most specific first (a mixed column
    has a number and a text expression), and their kind."""

    values: tuple[ColumnElement[Any], ...]
    kind: Kind
    loose_text: ColumnElement[Any] | None = None
    """For filters on a mixed column: its value as text whatever its JSON type (one parse of
    the JSON where the typed pair needs two each), so ``= "adam"`` and ``contains`` cost less."""


@dataclass(frozen=True)
class SortKey:
    """One sort key: a column name (module docstring) and its direction."""

    column: str
    descending: bool = False


def _json_path_ok(name: str) -> bool:
    # keys travel in a SQLite JSON path: refuse what would need escaping there
    return bool(name) and not any(c in name for c in "\"'\\$[]*") and name.isprintable()


def _json_value(dialect: str, doc: Any, path: Sequence[str], want: Kind) -> ColumnElement[Any]:
    """The number (``want="number"``) or text at ``path`` in a JSON column, else NULL."""
    if dialect == "postgresql":
        parts = [cast(literal(p), Text) for p in path]
        node = func.json_extract_path(doc, *parts)
        text_value = func.json_extract_path_text(doc, *parts)
        if want == "number":
            return case((func.json_typeof(node) == "number", cast(text_value, Float)), else_=None)
        return case((func.json_typeof(node) == "string", text_value), else_=None)
    json_path = "$" + "".join(f'."{p}"' for p in path)
    kind = func.json_type(doc, json_path)
    if want == "number":
        return case((kind.in_(("integer", "real")), func.json_extract(doc, json_path)), else_=None)
    return case((kind == "text", func.json_extract(doc, json_path)), else_=None)


def _shown_trial() -> ColumnElement[Any]:
    other = aliased(Trial)  # not the trial of the enclosing query
    first = (
        select(func.min(other.id))
        .where(other.experiment_id == Experiment.id)
        .correlate(Experiment)
        .scalar_subquery()
    )
    return func.coalesce(Experiment.best_trial_id, first)


def _hyperparameter(dialect: str, name: str) -> Column:
    path = name.split(".")
    if not all(_json_path_ok(p) for p in path):
        raise InvalidArgumentError(f"cannot sort or filter by hyperparameter {name!r}")
    shown = _shown_trial()
    values = tuple(
        select(_json_value(dialect, Trial.hparams, path, want))
        .where(Trial.id == shown)
        .scalar_subquery()
        for want in ("number", "text")
    )
    if dialect == "postgresql":
        loose: Any = func.json_extract_path_text(
            Trial.hparams, *[cast(literal(p), Text) for p in path]
        )
    else:
        loose = func.json_extract(Trial.hparams, "$" + "".join(f'."{p}"' for p in path))
    text_value = select(loose).where(Trial.id == shown).scalar_subquery()
    return Column(values, "mixed", text_value)


def _stored_metric(name: str, aggregate: str) -> Column:
    summary = TrialMetricSummary
    value: Any = {
        "min": summary.min,
        "max": summary.max,
        "last": summary.last,
        "mean": summary.sum / cast(summary.count, Float),
    }[aggregate]
    query = select(value).where(
        summary.trial_id == Experiment.best_trial_id,
        summary.group == metric_summaries.GROUP,
        summary.name == name,
    )
    return Column((query.scalar_subquery(),), "number")


def _metric(dialect: str, group: str, name: str, aggregate: str) -> Column:
    if not _json_path_ok(name) or not group:
        raise InvalidArgumentError(f"cannot sort or filter by metric {group}.{name}")
    if group == metric_summaries.GROUP:
        return _stored_metric(name, aggregate)
    number = _json_value(dialect, MetricReport.metrics, [name], "number")
    live = (
        MetricReport.trial_id == Experiment.best_trial_id,
        MetricReport.group == group,
        MetricReport.archived.is_(False),
    )
    if aggregate == "last":
        query = (
            select(number)
            .where(*live, number.is_not(None))
            .order_by(MetricReport.steps_completed.desc(), MetricReport.id.desc())
            .limit(1)
        )
    else:
        summary: Any = {"min": func.min, "max": func.max, "mean": func.avg}[aggregate]
        query = select(summary(number)).where(*live)
    return Column((query.scalar_subquery(),), "number")


def _duration(dialect: str) -> ColumnElement[Any]:
    end = func.coalesce(Experiment.end_time, func.current_timestamp())
    if dialect == "postgresql":
        return func.extract("epoch", end - Experiment.start_time)
    return func.julianday(end) - func.julianday(Experiment.start_time)


def _fixed(dialect: str) -> dict[str, Callable[[], Column]]:
    def one(value: Any, kind: Kind) -> Callable[[], Column]:
        return lambda: Column((value() if callable(value) else value,), kind)

    def checkpoints(what: Any) -> Any:
        return (
            select(what)
            .where(
                Checkpoint.experiment_id == Experiment.id,
                Checkpoint.state.in_(COUNTED_CHECKPOINT_STATES),
            )
            .scalar_subquery()
        )

    return {
        "id": one(Experiment.id, "number"),
        "name": one(Experiment.name, "text"),
        "description": one(Experiment.description, "text"),
        "tags": one(lambda: cast(Experiment.labels, Text), "text"),
        "forkedFrom": one(Experiment.parent_id, "number"),
        "startTime": one(Experiment.start_time, "date"),
        "endTime": one(Experiment.end_time, "date"),
        "duration": one(lambda: _duration(dialect), "number"),
        "numTrials": one(
            lambda: (
                select(func.count(Trial.id))
                .where(Trial.experiment_id == Experiment.id)
                .scalar_subquery()
            ),
            "number",
        ),
        "state": one(Experiment.state, "text"),
        "searcherType": one(Experiment.searcher_type, "text"),
        "searcherMetric": one(
            lambda: _json_value(dialect, Experiment.config, ["searcher", "metric"], "text"), "text"
        ),
        "searcherMetricsVal": one(Experiment.best_searcher_metric, "number"),
        "resourcePool": one(Experiment.resource_pool, "text"),
        "projectId": one(Experiment.project_id, "number"),
        "progress": one(lambda: func.coalesce(Experiment.progress, 0.0), "number"),
        "checkpointSize": one(
            lambda: checkpoints(func.coalesce(func.sum(Checkpoint.size), 0)), "number"
        ),
        "checkpointCount": one(lambda: checkpoints(func.count()), "number"),
        "user": one(
            lambda: (
                select(func.coalesce(User.display_name, User.username))
                .where(User.id == Experiment.owner_id)
                .scalar_subquery()
            ),
            "text",
        ),
        "externalExperimentId": one(Experiment.external_experiment_id, "text"),
        "archived": one(Experiment.archived, "bool"),
    }


def column(name: str, dialect: str) -> Column:
    """The SQL of a column name (module docstring); 400 naming what can be used instead."""
    name = SORT_BY_NAMES.get(name, name)
    fixed = _fixed(dialect)
    if name in fixed:
        return fixed[name]()
    if name.startswith("hp.") and len(name) > 3:
        return _hyperparameter(dialect, name[3:])
    group, _, rest = name.partition(".")
    if rest and group not in ("hp", ""):
        metric, _, aggregate = rest.rpartition(".")
        if aggregate not in AGGREGATES or not metric:
            metric, aggregate = rest, "last"
        return _metric(dialect, group, metric, aggregate)
    raise InvalidArgumentError(
        f"unknown experiment column {name!r}: use one of {', '.join(fixed)}, hp.<name> or "
        "<group>.<metric>[.last|.max|.mean|.min]"
    )


def parse_sort(text: str | None) -> list[SortKey]:
    """The keys of a sort text: ``column=asc|desc`` joined by commas (``"hp.lr=asc"``,
    ``"validation.validation_loss.min=desc,id=asc"``); none when empty. 400 when malformed."""
    keys = []
    for part in (text or "").split(","):
        part = part.strip()
        if not part:
            continue
        name, _, direction = part.rpartition("=") if "=" in part else (part, "", "asc")
        if not name or direction not in ("asc", "desc"):
            raise InvalidArgumentError(
                f"cannot sort experiments by {part!r}: write <column>=asc or <column>=desc"
            )
        keys.append(SortKey(name.strip(), direction == "desc"))
    return keys


def order_by(keys: Sequence[SortKey], dialect: str) -> list[ColumnElement[Any]]:
    """ORDER BY of the keys (module docstring): nulls last, then the id. Ascending id alone
    when there are no keys."""
    out: list[ColumnElement[Any]] = []
    for key in keys:
        if SORT_BY_NAMES.get(key.column, key.column) == "id":
            continue  # the id comes last anyway
        for value in column(key.column, dialect).values:
            out.append((value.desc() if key.descending else value.asc()).nulls_last())
    first_desc = bool(keys) and keys[0].descending
    out.append(Experiment.id.desc() if first_desc else Experiment.id.asc())
    return out


# --- filters ---------------------------------------------------------------------------------

_OPERATORS = ("contains", "notContains", "=", "!=", ">", ">=", "<", "<=", "isEmpty", "notEmpty")


@dataclass(frozen=True)
class ExperimentFilter:
    """A parsed filter of the web UI's experiment table: its condition on ``experiments``
    (None: everything) and whether archived experiments are shown."""

    condition: ColumnElement[bool] | None
    show_archived: bool


def parse_filter(text: str | None, dialect: str) -> ExperimentFilter:
    """The web UI's filter JSON: ``{"filterGroup": {"kind": "group", "conjunction":
    "and"|"or", "children": [...]}, "showArchived": bool}``, where a child is a group or a
    field ``{"kind": "field", "columnName": ..., "operator": ..., "value": ...}`` with operator
    ``contains``, ``notContains``, ``=``, ``!=``, ``>``, ``>=``, ``<``, ``<=``, ``isEmpty`` or
    ``notEmpty``. A field without a value (null or ``""``, other than for the empty checks) is
    ignored, as the UI does while one is being typed. A number compares a column's numbers;
    text (and ``contains``) compares a hyperparameter's value as text, whatever its JSON type
    (``hp.layers = "4"`` matches 4). 400 for anything else."""
    if not text:
        return ExperimentFilter(None, True)
    try:
        data = json.loads(text)
    except ValueError:
        raise InvalidArgumentError(f"the experiment filter is not JSON: {text[:80]!r}") from None
    if not isinstance(data, dict):
        raise InvalidArgumentError("the experiment filter must be a JSON object")
    group = data.get("filterGroup")
    condition = _group(group, dialect) if group else None
    return ExperimentFilter(condition, bool(data.get("showArchived", True)))


def _group(node: Any, dialect: str) -> ColumnElement[bool] | None:
    if not isinstance(node, dict):
        raise InvalidArgumentError("each filter node must be a JSON object")
    if node.get("kind", "group") == "field":
        return _field(node, dialect)
    conjunction = node.get("conjunction", "and")
    if conjunction not in ("and", "or"):
        raise InvalidArgumentError(f"unknown filter conjunction {conjunction!r}: and or or")
    children = node.get("children") or []
    if not isinstance(children, list):
        raise InvalidArgumentError("a filter group's children must be a list")
    parts = [c for c in (_group(child, dialect) for child in children) if c is not None]
    if not parts:
        return None
    return and_(*parts) if conjunction == "and" else or_(*parts)


def _field(node: dict[str, Any], dialect: str) -> ColumnElement[bool] | None:
    name, operator, value = node.get("columnName"), node.get("operator"), node.get("value")
    if not isinstance(name, str) or operator not in _OPERATORS:
        raise InvalidArgumentError(
            f"a filter field needs a columnName and an operator ({', '.join(_OPERATORS)}): "
            f"{json.dumps(node)[:120]}"
        )
    col = column(name, dialect)
    if operator in ("isEmpty", "notEmpty"):
        empty = and_(*(v.is_(None) for v in col.values))
        if col.kind == "text":
            empty = or_(empty, col.values[0] == "")
        return empty if operator == "isEmpty" else not_(empty)
    if value is None or value == "":
        return None
    if col.kind == "bool":
        return _compare(col.values[0], operator, value in (True, "true", 1))
    if operator in ("contains", "notContains"):
        target: ColumnElement[Any]
        if col.loose_text is not None:
            target = cast(col.loose_text, Text)
        elif col.kind in ("mixed", "text"):
            target = col.values[-1]
        else:
            target = cast(col.values[0], Text)
        found = target.icontains(str(value), autoescape=True)
        return found if operator == "contains" else or_(not_(found), target.is_(None))
    if col.kind == "date":
        return _compare(col.values[0], operator, _date(value))
    number = _number(value)
    if col.kind == "number":
        if number is None:
            raise InvalidArgumentError(f"column {name!r} holds numbers, not {value!r}")
        return _compare(col.values[0], operator, number)
    if col.kind == "mixed" and number is not None:
        return _compare(col.values[0], operator, number)
    text_value = col.loose_text if col.loose_text is not None else col.values[-1]
    return _compare(text_value, operator, str(value))


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    try:
        return float(str(value))
    except ValueError:
        return None


def _date(value: Any) -> dt.datetime:
    try:
        parsed = dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        raise InvalidArgumentError(f"not a date: {value!r}") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)


def _compare(value: Any, operator: str, operand: Any) -> ColumnElement[bool]:
    out: ColumnElement[bool] = _comparison(value, operator, operand)
    return out


def _comparison(value: Any, operator: str, operand: Any) -> Any:
    if operator == "=":
        return value == operand
    if operator == "!=":
        return or_(value != operand, value.is_(None))
    if operator == ">":
        return value > operand
    if operator == ">=":
        return value >= operand
    if operator == "<":
        return value < operand
    if operator == "<=":
        return value <= operand
    raise InvalidArgumentError(f"operator {operator!r} does not apply to this column")
