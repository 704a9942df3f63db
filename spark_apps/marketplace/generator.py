"""A deterministic, realistic marketplace event stream and the ground truth of what it contains.

The platform proves that stream and batch agree with each other; this module lets the tests prove
that both agree with what was *meant*. :func:`generate` turns a :class:`GeneratorConfig` into Kafka
records (key, value) and labels each one (valid, late, duplicate, conflict, malformed);
:class:`Manifest` collects those labels into the expected contents of silver, ``late_events`` and
``dead_letters`` without looking at anything the pipeline produced.

Determinism: one ``random.Random(seed)`` drives every choice and ids come from counters, so the same
config gives a byte-identical sequence of records (no wall clock, no global ``random``, no hashing of
``set`` order). Event ids carry a token derived from ``seed`` and ``base_time_ms`` so two runs into
one topic with different start times do not collide in dedup.

Shape: merchants and customers are Zipf-skewed (a few are very busy). A customer acts in sessions:
one to six orders close together in event time, then a pause longer than ``session_gap_s``. Every
order (except about 1 %, abandoned) is followed by its ``payment_captured`` and, with
``refund_rate``, by an ``order_refunded`` of at most the paid amount; all events of an order share the
order id, which is the Kafka key, so they land in one partition. For ``payment_before_order_rate`` of
orders the payment is emitted first and the order a few records later (its event time still earlier
than the payment's): an orphan payment the order-status table must resolve. Clean session gaps need enough
customers for the rate: when every customer drawn is still inside a session or its pause (a high
``events_per_second`` against few customers and a long ``session_gap_s``), the busiest one drawn gets
the order anyway and its sessions run together, which is data the platform must handle too.

Kinds: *valid* events; *late* events (new, unique, never re-sent); *duplicate* byte-identical
re-sends and *conflict* re-sends with a changed amount of an earlier valid on-time event (same id and
key; the first one wins); *malformed* records with exactly one defect, rotating through every check of
``VALIDATION_ORDER_DOC`` so the expected dead-letter reason is unambiguous, each with a fresh event id.

Time: record ``seq`` has the nominal event time ``base_time_ms + int(seq * 1000 / events_per_second)``
(:func:`nominal_time_ms`). On-time records (valid, duplicate, conflict) never carry an event time
earlier than ``nominal - max_disorder_ms``; late records carry
``base_time_ms - allowed_lateness_s * 1000 - U(60 s, 1 h)``. The manifest's on-time / late labels
therefore match the platform's rule ``log_append_time - event_time > allowed_lateness`` only if every
record is appended to the log at or after ``base_time_ms`` and no later than
``allowed_lateness_s * 1000 - max_disorder_ms`` after its nominal time. That holds when the producer
passes ``base_time_ms = now`` and produces at or below ``events_per_second``; the integration tests
compare with the broker's real LogAppendTime.
"""

from __future__ import annotations

import bisect
import hashlib
import heapq
import itertools
import json
import math
import operator
import random
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from spark_apps.marketplace.events import (
    EVENT_TYPES,
    FIELDS,
    FIELDS_BY_NAME,
    ORDER_PLACED,
    ORDER_REFUNDED,
    PAYMENT_CAPTURED,
    SCHEMA_VERSIONS,
    FieldSpec,
    Reason,
    fields_for,
)
from spark_apps.pipeline.synthetic import KINDS, GeneratedRecord, GeneratorRequest, Manifest

__all__ = ["KINDS", "MALFORMED_KEY", "GeneratedRecord", "GeneratorConfig", "Manifest", "config_for", "generate",
           "nominal_time_ms"]

MALFORMED_KEY = b"malformed"

_RATE_FIELDS = ("out_of_order_rate", "late_rate", "duplicate_rate", "conflict_rate", "malformed_rate",
                "schema_v2_rate", "payment_before_order_rate", "refund_rate")
_SPECIAL_RATE_FIELDS = ("late_rate", "duplicate_rate", "conflict_rate", "malformed_rate")
_MAX_SPECIAL_RATE = 0.5
_LATE_EXTRA_MS = (60_000, 3_600_000)

# Shape of the simulated marketplace. Lags are in records, not seconds, so that even a short run
# completes most orders (payment, refund) whatever events_per_second is.
_MERCHANT_ZIPF = 1.1
_CUSTOMER_ZIPF = 0.9
_CUSTOMER_DRAWS = 4
_SESSION_CONTINUE = 0.5
_MAX_SESSION_ORDERS = 6
_NEXT_ORDER_RECORDS = (20, 400)
_PAYMENT_LAG_RECORDS = (1, 64)
_REFUND_LAG_RECORDS = (50, 500)
_SESSION_PAUSE = (1.2, 3.0)
_UNPAID_RATE = 0.01
_FULL_REFUND_RATE = 0.6
_MORE_ITEMS = 0.35
_CATALOG_SIZE = 32
_PRICE_SIGMA = 0.6
_MAX_ITEMS = 20
_ORPHAN_MAX_RECORDS = 500
_RESEND_HISTORY = 1024
_RESEND_NEAR = 3
_CURRENCIES = (("EUR", 0.80), ("USD", 0.12), ("GBP", 0.08))
_PAYMENT_METHODS = (("card", 0.65), ("wallet", 0.25), ("bank_transfer", 0.10))
_PREFERRED_METHOD = 0.9
_CHANNELS = (("web", 0.5), ("app", 0.4), ("api", 0.1))
_REFUND_REASONS = ("damaged", "not_as_described", "late_delivery", "changed_mind", "wrong_item")
_LATE_TYPES = ((ORDER_PLACED, 0.6), (PAYMENT_CAPTURED, 0.3), (ORDER_REFUNDED, 0.1))
_DETAIL_FIELD = {ORDER_PLACED: "item_count", PAYMENT_CAPTURED: "payment_method",
                 ORDER_REFUNDED: "refund_reason"}
# The values an event is built from, in the order _Simulation._event_value passes them.
_VALUE_SLOTS = ("event_id", "event_time", "order_id", "customer_id", "merchant_id", "amount_cents",
                "currency", "detail", "channel")


@dataclass(frozen=True)
class GeneratorConfig:
    """Everything that determines the generated stream; equal configs give equal streams."""

    seed: int = 42
    total_events: int = 10_000
    base_time_ms: int = 1_767_225_600_000
    events_per_second: float = 1000.0
    merchants: int = 50
    customers: int = 2_000
    allowed_lateness_s: int = 900
    session_gap_s: int = 300
    out_of_order_rate: float = 0.05
    max_disorder_ms: int = 20_000
    late_rate: float = 0.01
    duplicate_rate: float = 0.02
    conflict_rate: float = 0.005
    malformed_rate: float = 0.01
    schema_v2_rate: float = 0.2
    payment_before_order_rate: float = 0.02
    refund_rate: float = 0.1

    def __post_init__(self) -> None:
        for name in ("total_events", "merchants", "customers", "allowed_lateness_s", "session_gap_s"):
            value = getattr(self, name)
            _check(isinstance(value, int) and value >= 1, name, "must be an integer >= 1", value)
        for name in _RATE_FIELDS:
            value = getattr(self, name)
            _check(isinstance(value, int | float) and 0.0 <= value <= 1.0, name, "must be in [0, 1]", value)
        special = sum(getattr(self, name) for name in _SPECIAL_RATE_FIELDS)
        _check(special < _MAX_SPECIAL_RATE, " + ".join(_SPECIAL_RATE_FIELDS),
               f"must be < {_MAX_SPECIAL_RATE}", special)
        _check(isinstance(self.events_per_second, int | float) and math.isfinite(self.events_per_second)
               and self.events_per_second > 0,
               "events_per_second", "must be > 0", self.events_per_second)
        _check(0 <= self.max_disorder_ms < self.allowed_lateness_s * 1000, "max_disorder_ms",
               "must be >= 0 and below allowed_lateness_s * 1000 (else on-time events could be late)",
               self.max_disorder_ms)
        earliest_late = self.allowed_lateness_s * 1000 + _LATE_EXTRA_MS[1]
        _check(self.base_time_ms >= earliest_late, "base_time_ms",
               f"must be >= {earliest_late} so late event times stay after 1970", self.base_time_ms)


def _check(ok: bool, name: str, rule: str, value: object) -> None:
    """Raise the one-line error that names the offending field."""
    if not ok:
        raise ValueError(f"GeneratorConfig.{name} {rule}, got {value!r}")


def nominal_time_ms(config: GeneratorConfig, seq: int) -> int:
    """Where the simulated clock stands when record ``seq`` is emitted (epoch ms, floored)."""
    return config.base_time_ms + int(seq * 1000 / config.events_per_second)


def generate(config: GeneratorConfig) -> Iterator[GeneratedRecord]:
    """The records of ``config``, in emission order."""
    yield from _Simulation(config).run()


# What "plenty of every hard case" means for the marketplace (GeneratorRequest.hard_cases): the chaos lab and the
# stream tests ask for it.
HARD_CASES: dict[str, Any] = {"late_rate": 0.03, "malformed_rate": 0.03, "duplicate_rate": 0.04,
                              "conflict_rate": 0.01, "payment_before_order_rate": 0.05, "merchants": 12,
                              "customers": 300}


def config_for(request: GeneratorRequest, session_gap_s: int) -> GeneratorConfig:
    """The generator config an engine request stands for, with sessions cut at ``session_gap_s``."""
    return GeneratorConfig(seed=request.seed, total_events=request.events, base_time_ms=request.base_time_ms,
                           events_per_second=request.events_per_second or GeneratorConfig.events_per_second,
                           allowed_lateness_s=request.allowed_lateness_s, session_gap_s=session_gap_s,
                           **(HARD_CASES if request.hard_cases else {}))


def _dumps(payload: Any) -> bytes:
    """Compact JSON in the payload's own key order (events are built in schema order)."""
    return json.dumps(payload, separators=(",", ":")).encode()


def _event_encoder(event_type: str, version: int) -> tuple[str, Callable[[tuple], tuple]]:
    """A %-template producing exactly ``_dumps`` of the event in schema order, and the getter that
    orders the values for it.

    Why not json.dumps per record: its C encoder alone costs several times the rest of the record.
    The template is only valid for JSON-safe strings, which every generated string is (ids, ISO times
    and fixed vocabularies, checked at import); the unit tests compare the output with json.dumps.
    """
    parts, slots = [], []
    for spec in fields_for(event_type):
        if spec.since_version > version:
            continue
        if spec.name == "event_type":
            parts.append(f'"event_type":{json.dumps(event_type)}')
            continue
        if spec.name == "schema_version":
            parts.append(f'"schema_version":{version}')
            continue
        slot = "detail" if spec.name == _DETAIL_FIELD[event_type] else spec.name
        if slot not in _VALUE_SLOTS:
            raise ValueError(f"the generator does not know how to fill event field {spec.name!r}")
        slots.append(_VALUE_SLOTS.index(slot))
        parts.append(f'"{spec.name}":%d' if spec.kind == "long" else f'"{spec.name}":"%s"')
    return "{" + ",".join(parts) + "}", operator.itemgetter(*slots)


def _require_json_safe(*vocabularies: Iterable[str]) -> None:
    """Refuse strings the %-templates would not escape the way json.dumps does."""
    for word in itertools.chain(*vocabularies):
        if json.dumps(word) != f'"{word}"' or "%" in word:
            raise ValueError(f"generator vocabulary word {word!r} is not JSON-safe")


_require_json_safe((c for c, _ in _CURRENCIES), (m for m, _ in _PAYMENT_METHODS), (c for c, _ in _CHANNELS),
                   _REFUND_REASONS)
_ENCODERS = {(event_type, version): _event_encoder(event_type, version)
             for event_type in EVENT_TYPES for version in SCHEMA_VERSIONS}


def _randint(rng: random.Random, low: int, high: int) -> int:
    """Like rng.randint (inclusive) but several times faster; the bias is irrelevant here."""
    return low + int(rng.random() * (high - low + 1))


def _zipf_cumulative(count: int, exponent: float, rng: random.Random) -> list[float]:
    """Cumulative Zipf weights with shuffled ranks, so the busiest id is not always number 0."""
    ranks = list(range(1, count + 1))
    rng.shuffle(ranks)
    return list(itertools.accumulate(rank ** -exponent for rank in ranks))


def _draw(rng: random.Random, cumulative: list[float]) -> int:
    """An index drawn with the weights behind ``cumulative`` (bisect_left keeps it in range)."""
    return bisect.bisect_left(cumulative, rng.random() * cumulative[-1])


def _weighted(rng: random.Random, options: tuple[tuple[Any, float], ...]) -> Any:
    values, weights = zip(*options, strict=True)
    return rng.choices(values, weights=weights)[0]


def _price_catalog(rng: random.Random) -> list[int]:
    """A merchant's unit prices in cents: log-normal around a merchant-specific level."""
    level = math.log(rng.uniform(800, 8000))
    return [max(99, int(rng.lognormvariate(level, _PRICE_SIGMA))) for _ in range(_CATALOG_SIZE)]


# ".000Z" to ".999Z": joining a prefix to one of these is cheaper than formatting the milliseconds every time.
_MILLIS = tuple(f".{millis:03d}Z" for millis in range(1000))


class _IsoClock:
    """Formats epoch ms as ISO-8601 UTC with milliseconds; caches the per-second prefix for speed."""

    _CACHE_LIMIT = 4096

    def __init__(self) -> None:
        self._prefix: dict[int, str] = {}

    def format(self, epoch_ms: int) -> str:
        seconds, millis = divmod(epoch_ms, 1000)
        prefix = self._prefix.get(seconds)
        if prefix is None:
            if len(self._prefix) >= self._CACHE_LIMIT:
                self._prefix.clear()
            prefix = datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S")
            self._prefix[seconds] = prefix
        return prefix + _MILLIS[millis]


class _Order:
    """The mutable story of one order while its events are being emitted."""

    __slots__ = ("order_id", "key", "customer", "merchant", "currency", "amount", "item_count",
                 "paid", "refunded", "order_time", "payment_time")

    def __init__(self, order_id: str, customer: int, merchant: int, currency: str, amount: int,
                 item_count: int, paid: bool, refunded: bool) -> None:
        self.order_id = order_id
        self.key = order_id.encode()
        self.customer = customer
        self.merchant = merchant
        self.currency = currency
        self.amount = amount
        self.item_count = item_count
        self.paid = paid
        self.refunded = refunded
        self.order_time: int | None = None
        self.payment_time: int | None = None


@dataclass(frozen=True)
class _Defect:
    """Exactly one thing wrong with an otherwise valid event, and the reason it must be rejected with."""

    category: str
    event_type: str
    field: str = ""
    variant: str = ""

    @property
    def reason(self) -> str:
        fixed = {"truncated": Reason.MALFORMED_JSON, "not_object": Reason.NOT_AN_OBJECT,
                 "unknown_type": Reason.UNKNOWN_EVENT_TYPE,
                 "unsupported_version": Reason.UNSUPPORTED_SCHEMA_VERSION}
        if self.category in fixed:
            return fixed[self.category]
        per_field = {"missing": Reason.missing, "wrong_type": Reason.wrong_type,
                     "below_minimum": Reason.below_minimum, "oversized": Reason.oversized}
        return per_field[self.category](self.field)

    @property
    def needs_v2(self) -> bool:
        spec = FIELDS_BY_NAME.get(self.field)
        return spec is not None and spec.since_version > 1


_WRONG_TYPE_VARIANTS = {"string": ("number",), "long": ("string", "float"), "timestamp": ("epoch", "text")}
_OVERSIZE_LENGTHS = {"boundary": None, "huge": 5000}
_NOT_OVERSIZED = ("event_type", "order_id")


def _types_carrying(spec: FieldSpec) -> tuple[str, ...]:
    return tuple(event_type for event_type in EVENT_TYPES if spec in fields_for(event_type))


def _field_defects(category: str, variants: tuple[str, ...], keep: Callable[[FieldSpec], bool]) -> tuple:
    """One defect per kept field, event type carrying it and variant, sweeping fields first."""
    return tuple(_Defect(category, event_type, spec.name, variant)
                 for variant in variants for spec in FIELDS if keep(spec)
                 for event_type in _types_carrying(spec))


def _defect_table() -> tuple[tuple[_Defect, ...], ...]:
    """Every defect the generator rotates through, grouped by category, all derived from the schema.

    Oversized event types and order ids are left out: a long event_type fails earlier as unknown, and
    the order id is the Kafka key.
    """
    wrong_type = tuple(_Defect("wrong_type", event_type, spec.name, variant)
                       for spec in FIELDS for variant in _WRONG_TYPE_VARIANTS[spec.kind]
                       for event_type in _types_carrying(spec))
    return (
        tuple(_Defect("truncated", event_type) for event_type in EVENT_TYPES),
        tuple(_Defect("not_object", ORDER_PLACED, variant=v) for v in ("array", "double_encoded", "number")),
        tuple(_Defect("unknown_type", ORDER_PLACED, "event_type", v)
              for v in ("order_cancelled", "Order_Placed", "payment_failed")),
        _field_defects("missing", ("absent", "null"), lambda spec: spec.required),
        wrong_type,
        tuple(_Defect("unsupported_version", event_type, "schema_version", v)
              for event_type, v in zip(EVENT_TYPES, ("99", "3", "99"), strict=True)),
        _field_defects("below_minimum", ("boundary", "far"),
                       lambda spec: spec.min_value is not None and spec.name != "schema_version"),
        _field_defects("oversized", tuple(_OVERSIZE_LENGTHS),
                       lambda spec: spec.max_length is not None and spec.name not in _NOT_OVERSIZED),
    )


_DEFECTS = _defect_table()


def _wrong_value(variant: str, value: Any, rng: random.Random) -> Any:
    """A value of the wrong JSON type that a sloppy producer might plausibly send instead of ``value``."""
    if variant == "number":
        return rng.randint(1, 99_999)
    if variant == "string":
        return str(value)
    if variant == "float":
        return value + 0.5
    if variant == "epoch":
        return int(datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() * 1000)
    return value[:19].replace("T", " ")


def _mutate(defect: _Defect, payload: dict[str, Any], rng: random.Random) -> None:
    """Apply an object-level defect in place."""
    name, category = defect.field, defect.category
    if category == "missing":
        if defect.variant == "absent":
            del payload[name]
        else:
            payload[name] = None
    elif category in ("unknown_type", "unsupported_version"):
        payload[name] = defect.variant if category == "unknown_type" else int(defect.variant)
    elif category == "wrong_type":
        payload[name] = _wrong_value(defect.variant, payload[name], rng)
    elif category == "below_minimum":
        below = 1 if defect.variant == "boundary" else rng.randint(2, 10_000)
        payload[name] = FIELDS_BY_NAME[name].min_value - below
    else:
        length = _OVERSIZE_LENGTHS[defect.variant] or FIELDS_BY_NAME[name].max_length + 1
        payload[name] = (payload[name] + "-" + "x" * length)[:length]


def _apply_defect(defect: _Defect, payload: dict[str, Any],
                  rng: random.Random) -> tuple[bytes, str | None, str | None]:
    """The broken value, the event id a reader can still get from it, and the order id to key it by."""
    order_id = payload["order_id"]
    if defect.category == "truncated":
        whole = _dumps(payload)
        return whole[:rng.randint(1, len(whole) - 1)], None, order_id
    if defect.category == "not_object":
        if defect.variant == "array":
            return _dumps([payload]), None, order_id
        if defect.variant == "double_encoded":
            return _dumps(_dumps(payload).decode()), None, order_id
        return _dumps(rng.randint(1, 999)), None, None
    _mutate(defect, payload, rng)
    event_id, order_id = payload.get("event_id"), payload.get("order_id")
    return (_dumps(payload), event_id if isinstance(event_id, str) else None,
            order_id if isinstance(order_id, str) else None)


class _Simulation:
    """One pass of the simulated marketplace; owns the only random number generator."""

    def __init__(self, config: GeneratorConfig) -> None:
        self.config = config
        rng = self._rng = random.Random(config.seed)
        self._ms_per_record = 1000 / config.events_per_second
        token = hashlib.sha256(f"{config.seed}:{config.base_time_ms}".encode()).hexdigest()[:8]
        self._event_prefix, self._order_prefix = f"ev-{token}-", f"ord-{token}-"
        self._events_made = self._orders_made = 0
        self._v2_rate = config.schema_v2_rate
        self._special_cuts = tuple(itertools.accumulate(getattr(config, f) for f in _SPECIAL_RATE_FIELDS))
        self._clock = _IsoClock()
        self._merchant_weights = _zipf_cumulative(config.merchants, _MERCHANT_ZIPF, rng)
        self._merchant_ids = [f"mer-{i:03d}" for i in range(config.merchants)]
        self._merchant_currency = [_weighted(rng, _CURRENCIES) for _ in range(config.merchants)]
        self._merchant_prices = [_price_catalog(rng) for _ in range(config.merchants)]
        self._customer_weights = _zipf_cumulative(config.customers, _CUSTOMER_ZIPF, rng)
        self._customer_ids = [f"cus-{i:05d}" for i in range(config.customers)]
        self._customer_method = [_weighted(rng, _PAYMENT_METHODS) for _ in range(config.customers)]
        self._customer_channel = [_weighted(rng, _CHANNELS) for _ in range(config.customers)]
        self._busy_until = [0] * config.customers
        self._pending: list[tuple[int, int, Callable[..., GeneratedRecord], Any]] = []
        self._pending_order = itertools.count()
        self._forced: dict[int, _Order] = {}
        self._history: list[tuple[int, GeneratedRecord] | None] = [None] * _RESEND_HISTORY
        self._history_count = 0
        self._malformed_count = 0

    def run(self) -> Iterator[GeneratedRecord]:
        """Emit one record per slot: a forced orphan-resolving order, a special kind, or the next event."""
        cfg, rng, pending = self.config, self._rng, self._pending
        special_cut = self._special_cuts[-1]
        for seq in range(cfg.total_events):
            now = cfg.base_time_ms + int(seq * 1000 / cfg.events_per_second)
            forced = self._forced.pop(seq, None)
            if forced is not None:
                yield self._emit_order(seq, now, forced)
                continue
            draw = rng.random()
            record = self._special(seq, now, draw) if draw < special_cut else None
            if record is not None:
                yield record
            elif pending and pending[0][0] <= now:
                # The earliest due follow-up (next order of a session, payment, refund) goes first.
                _, _, action, subject = heapq.heappop(pending)
                yield action(seq, now, subject)
            else:
                yield self._start_session(seq, now)

    def _special(self, seq: int, now: int, draw: float) -> GeneratedRecord | None:
        """The special record the draw landed on; None when there is nothing suitable to re-send."""
        late_cut, duplicate_cut, conflict_cut, _ = self._special_cuts
        if draw < late_cut:
            return self._late(seq)
        if draw < duplicate_cut:
            return self._resend(seq, now, conflict=False)
        if draw < conflict_cut:
            return self._resend(seq, now, conflict=True)
        return self._malformed(seq, now)

    # --- the marketplace ------------------------------------------------------------------------

    def _schedule(self, due: int, action: Callable[..., GeneratedRecord], subject: Any) -> None:
        heapq.heappush(self._pending, (due, next(self._pending_order), action, subject))

    def _records_ms(self, bounds: tuple[int, int]) -> int:
        """A lag of a random number of records, as simulated milliseconds."""
        low, high = bounds
        return int((low + int(self._rng.random() * (high - low + 1))) * self._ms_per_record)

    def _start_session(self, seq: int, now: int) -> GeneratedRecord:
        """Plan a customer's burst of orders and the pause after it; place the first order now."""
        rng = self._rng
        customer = self._free_customer(now)
        gap_ms = self.config.session_gap_s * 1000
        due = now
        orders = 1
        while orders < _MAX_SESSION_ORDERS and rng.random() < _SESSION_CONTINUE:
            orders += 1
            due += min(self._records_ms(_NEXT_ORDER_RECORDS), gap_ms // 2)
            self._schedule(due, self._place, customer)
        tail = int((_PAYMENT_LAG_RECORDS[1] + _REFUND_LAG_RECORDS[1]) * self._ms_per_record)
        pause = int(gap_ms * rng.uniform(*_SESSION_PAUSE))
        self._busy_until[customer] = max(self._busy_until[customer], due + tail + pause)
        return self._place(seq, now, customer)

    def _free_customer(self, now: int) -> int:
        """A Zipf-drawn customer outside any session and pause, or the last one drawn if none is."""
        rng, weights, busy_until = self._rng, self._customer_weights, self._busy_until
        for _ in range(_CUSTOMER_DRAWS):
            customer = bisect.bisect_left(weights, rng.random() * weights[-1])
            if busy_until[customer] <= now:
                break
        return customer

    def _new_order(self, customer: int) -> _Order:
        rng, weights = self._rng, self._merchant_weights
        merchant = bisect.bisect_left(weights, rng.random() * weights[-1])
        items = 1
        while items < _MAX_ITEMS and rng.random() < _MORE_ITEMS:
            items += 1
        unit_price = self._merchant_prices[merchant][int(rng.random() * _CATALOG_SIZE)]
        paid = rng.random() >= _UNPAID_RATE
        refunded = paid and rng.random() < self.config.refund_rate
        self._orders_made += 1
        return _Order(f"{self._order_prefix}{self._orders_made:08d}", customer, merchant,
                      self._merchant_currency[merchant], items * unit_price, items, paid, refunded)

    def _place(self, seq: int, now: int, customer: int) -> GeneratedRecord:
        """A new order; sometimes its payment goes out first and the order follows a few records later."""
        order = self._new_order(customer)
        if order.paid and self._rng.random() < self.config.payment_before_order_rate:
            slot = self._orphan_slot(seq)
            if slot is not None:
                return self._emit_payment_first(seq, now, order, slot)
        return self._emit_order(seq, now, order)

    def _orphan_slot(self, seq: int) -> int | None:
        """A free later slot for a delayed order, close enough that its event time stays on time."""
        cfg = self.config
        reach = max(1, min(_ORPHAN_MAX_RECORDS, int(cfg.max_disorder_ms / 2 / self._ms_per_record)))
        slot = seq + _randint(self._rng, 1, reach)
        while slot in self._forced:
            slot += 1
        return slot if slot < cfg.total_events else None

    def _jittered(self, now: int) -> int:
        """The event time of an event emitted now: now, or for a few events up to max_disorder earlier."""
        cfg, rng = self.config, self._rng
        if cfg.max_disorder_ms and rng.random() < cfg.out_of_order_rate:
            return now - _randint(rng, 1, cfg.max_disorder_ms)
        return now

    def _emit_order(self, seq: int, now: int, order: _Order) -> GeneratedRecord:
        if order.order_time is None:
            order.order_time = self._jittered(now)
        record = self._event_record(seq, "valid", ORDER_PLACED, order.order_time, order, order.amount,
                                    order.item_count)
        if order.payment_time is not None:
            self._schedule_refund(now, order)
        elif order.paid:
            self._schedule(now + self._records_ms(_PAYMENT_LAG_RECORDS), self._emit_payment, order)
        return record

    def _emit_payment_first(self, seq: int, now: int, order: _Order, slot: int) -> GeneratedRecord:
        """The orphan payment: emitted now, event time after the order's, which is fixed already.

        The order's event time is no earlier than its own slot's nominal time minus max_disorder, so
        the delayed order is still on time.
        """
        rng = self._rng
        earliest = nominal_time_ms(self.config, slot) - self.config.max_disorder_ms
        order.order_time = _randint(rng, earliest, max(earliest, now - 1))
        order.payment_time = _randint(rng, order.order_time + 1, max(order.order_time + 1, now))
        self._forced[slot] = order
        return self._payment_record(seq, order)

    def _emit_payment(self, seq: int, now: int, order: _Order) -> GeneratedRecord:
        order.payment_time = max(self._jittered(now), order.order_time + 1)
        self._schedule_refund(now, order)
        return self._payment_record(seq, order)

    def _payment_record(self, seq: int, order: _Order) -> GeneratedRecord:
        return self._event_record(seq, "valid", PAYMENT_CAPTURED, order.payment_time, order, order.amount,
                                  self._payment_method(order.customer))

    def _schedule_refund(self, now: int, order: _Order) -> None:
        """Called once both order and payment are out, so a refund always follows both."""
        if order.refunded:
            self._schedule(now + self._records_ms(_REFUND_LAG_RECORDS), self._emit_refund, order)

    def _emit_refund(self, seq: int, now: int, order: _Order) -> GeneratedRecord:
        event_time = max(self._jittered(now), order.payment_time + 1)
        return self._event_record(seq, "valid", ORDER_REFUNDED, event_time, order, self._refund_amount(order),
                                  self._rng.choice(_REFUND_REASONS))

    def _payment_method(self, customer: int) -> str:
        if self._rng.random() < _PREFERRED_METHOD:
            return self._customer_method[customer]
        return _weighted(self._rng, _PAYMENT_METHODS)

    def _refund_amount(self, order: _Order) -> int:
        if self._rng.random() < _FULL_REFUND_RATE:
            return order.amount
        return _randint(self._rng, 1, order.amount)

    def _detail(self, event_type: str, order: _Order) -> Any:
        """The value of the field only this event type carries."""
        if event_type == ORDER_PLACED:
            return order.item_count
        if event_type == PAYMENT_CAPTURED:
            return self._payment_method(order.customer)
        return self._rng.choice(_REFUND_REASONS)

    # --- records ----------------------------------------------------------------------------------

    def _event_value(self, event_type: str, event_time: int, order: _Order, amount: int, detail: Any,
                     version: int | None = None) -> tuple[str, bytes]:
        """A fresh event id and the valid event's JSON; version 2 adds the optional channel."""
        if version is None:
            version = 2 if self._rng.random() < self._v2_rate else 1
        template, order_values = _ENCODERS[event_type, version]
        self._events_made += 1
        event_id = f"{self._event_prefix}{self._events_made:09d}"
        customer = order.customer
        values = (event_id, self._clock.format(event_time), order.order_id, self._customer_ids[customer],
                  self._merchant_ids[order.merchant], amount, order.currency, detail,
                  self._customer_channel[customer])
        return event_id, (template % order_values(values)).encode()

    def _event_record(self, seq: int, kind: str, event_type: str, event_time: int, order: _Order,
                      amount: int, detail: Any) -> GeneratedRecord:
        event_id, value = self._event_value(event_type, event_time, order, amount, detail)
        record = GeneratedRecord(seq, order.key, value, kind, event_id, None)
        if kind == "valid":
            self._history[self._history_count % _RESEND_HISTORY] = (event_time, record)
            self._history_count += 1
        return record

    def _late(self, seq: int) -> GeneratedRecord:
        """A new event from a device that was offline: beyond allowed lateness at any append >= base."""
        cfg, rng = self.config, self._rng
        order = self._new_order(_draw(rng, self._customer_weights))
        event_type = _weighted(rng, _LATE_TYPES)
        event_time = cfg.base_time_ms - cfg.allowed_lateness_s * 1000 - _randint(rng, *_LATE_EXTRA_MS)
        amount = self._refund_amount(order) if event_type == ORDER_REFUNDED else order.amount
        return self._event_record(seq, "late", event_type, event_time, order, amount,
                                  self._detail(event_type, order))

    def _resend(self, seq: int, now: int, conflict: bool) -> GeneratedRecord | None:
        """Re-send an earlier on-time valid event: byte-identical, or with a changed amount (conflict)."""
        source = self._resend_source(now)
        if source is None:
            return None
        original = source[1]
        if not conflict:
            return GeneratedRecord(seq, original.key, original.value, "duplicate", original.event_id, None)
        changed = json.loads(original.value)
        changed["amount_cents"] += _randint(self._rng, 1, 500)
        return GeneratedRecord(seq, original.key, _dumps(changed), "conflict", original.event_id, None)

    def _resend_source(self, now: int) -> tuple[int, GeneratedRecord] | None:
        """A recent valid event (half the time one of the last few, else up to a thousand back) whose
        event time is still on time for this slot; None if there is none."""
        available = min(self._history_count, _RESEND_HISTORY)
        if not available:
            return None
        rng = self._rng
        reach = _RESEND_NEAR if rng.random() < 0.5 else _RESEND_HISTORY
        for back in (_randint(rng, 1, min(reach, available)), 1):
            source = self._history[(self._history_count - back) % _RESEND_HISTORY]
            if source[0] >= now - self.config.max_disorder_ms:
                return source
        return None

    def _malformed(self, seq: int, now: int) -> GeneratedRecord:
        """A fresh event with exactly one defect, rotating through every category, then every field."""
        rng = self._rng
        count = self._malformed_count
        self._malformed_count += 1
        group = _DEFECTS[count % len(_DEFECTS)]
        defect = group[(count // len(_DEFECTS)) % len(group)]
        order = self._new_order(_draw(rng, self._customer_weights))
        detail = self._detail(defect.event_type, order)
        _, valid_value = self._event_value(defect.event_type, now, order, order.amount, detail,
                                           2 if defect.needs_v2 else None)
        value, event_id, order_id = _apply_defect(defect, json.loads(valid_value), rng)
        key = order_id.encode() if order_id is not None else MALFORMED_KEY
        return GeneratedRecord(seq, key, value, "malformed", event_id, defect.reason)
