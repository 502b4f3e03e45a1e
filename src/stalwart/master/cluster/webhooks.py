"""The webhook deliverer: posts the outbox (``webhook_deliveries``) to the receivers.

It runs in a thread of its own with its own event loop, so a slow, hanging or failing
receiver delays nothing else: not API requests, not the cluster loop. Contracts:

- **Fetch, then call, then apply.** A short transaction claims due ``PENDING`` rows (each is
  leased by moving its ``next_attempt_at`` past the attempt's timeout, guarded by its attempt
  count, so two masters never post the same attempt); the HTTP attempt runs with no
  transaction open; a second short transaction records the outcome.
- **Attempts**: at most ``webhooks.concurrency`` in flight; each is cut off after
  ``webhooks.attempt_timeout`` seconds. A 2xx answer delivers; a 4xx (but 408 and 429) fails at
  once, as the receiver refused it; anything else (5xx, timeout, refused connection) is retried
  after ``backoff * 2**(n-1)`` seconds (at most ``max_backoff``), up to ``max_attempts``
  attempts, then ``FAILED``. The schedule lives on the row, so retries survive a master
  restart; a master killed during an attempt posts it again once the lease ends (at least
  once: receivers de-duplicate on ``event_id``).
- It wakes when a commit adds deliveries (``MasterState.webhook_wake``), when an attempt
  ends, when the next retry is due, and every :data:`POLL_SECONDS` (rows written by another
  master). Finished rows older than ``webhooks.keep_finished`` are deleted.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import threading
import time
from dataclasses import dataclass

import httpx
from sqlalchemy import delete, func, select, update

from stalwart.master.db.tables import Task, Webhook, WebhookDelivery, WebhookLogMatch, utcnow
from stalwart.master.services.webhook_payloads import signature_headers
from stalwart.master.services.webhooks import signing_key
from stalwart.master.state import MasterState

__all__ = ["POLL_SECONDS", "Attempt", "WebhookDeliverer", "post_once"]

log = logging.getLogger("stalwart.webhooks")

POLL_SECONDS = 10.0
"""Longest sleep between looks at the outbox when nothing wakes the deliverer."""
_PRUNE_SECONDS = 60.0
_LEASE_MARGIN = 30.0


@dataclass(frozen=True)
class Attempt:
    """The outcome of one POST."""

    delivered: bool
    retry: bool
    error: str | None = None


async def post_once(
    client: httpx.AsyncClient, url: str, body: str, key: str, *, timeout: float
) -> Attempt:
    """POST ``body`` to ``url``, signed with ``key``, within ``timeout`` seconds."""
    headers = signature_headers(key, body, timestamp=int(time.time()))
    try:
        answer = await asyncio.wait_for(
            client.post(url, content=body.encode(), headers=headers, timeout=timeout), timeout
        )
    except TimeoutError:
        return Attempt(False, True, f"timed out after {timeout:g} s")
    except httpx.TimeoutException:
        return Attempt(False, True, f"timed out after {timeout:g} s")
    except httpx.HTTPError as exc:
        return Attempt(False, True, f"{type(exc).__name__}: {exc}")
    status = answer.status_code
    if 200 <= status < 300:
        return Attempt(True, False)
    permanent = 400 <= status < 500 and status not in (408, 429)
    return Attempt(False, not permanent, f"the receiver answered {status}")


@dataclass(frozen=True)
class _Claimed:
    id: int
    url: str
    payload: str


class WebhookDeliverer:
    """The deliverer's thread (see the module docstring). ``start``/``stop`` are idempotent."""

    def __init__(self, state: MasterState) -> None:
        self.state = state
        self.settings = state.settings.webhooks
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._key = ""

    # -- thread --

    def start(self) -> None:
        if self._thread is not None:
            return
        with self.state.sessions() as session:
            self._key = signing_key(session, self.settings, self.state.settings.home)
        self._thread = threading.Thread(target=self._run, name="stalwart-webhooks", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self.state.webhook_wake.set()
        if self._thread is not None:
            self._thread.join(timeout=self.settings.attempt_timeout + 5)
            self._thread = None

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except Exception:  # never takes the master down
            log.exception("the webhook deliverer stopped")

    async def _main(self) -> None:
        wake = self.state.webhook_wake
        in_flight: set[asyncio.Task[None]] = set()
        next_look = 0.0
        next_prune = time.monotonic() + _PRUNE_SECONDS
        async with httpx.AsyncClient(follow_redirects=True) as client:
            while not self._stop.is_set():
                now = time.monotonic()
                free = self.settings.concurrency - len(in_flight)
                if free > 0 and (wake.is_set() or now >= next_look):
                    wake.clear()
                    claimed, due_in = await asyncio.to_thread(self.claim, free)
                    for row in claimed:
                        task = asyncio.create_task(self._deliver(client, row))
                        in_flight.add(task)
                    wait = POLL_SECONDS if due_in is None else min(POLL_SECONDS, due_in)
                    next_look = now + (0.0 if len(claimed) == free else max(wait, 0.05))
                if now >= next_prune:
                    next_prune = now + _PRUNE_SECONDS
                    await asyncio.to_thread(self.prune)
                if in_flight:
                    done, in_flight = await asyncio.wait(in_flight, timeout=0.2)
                    if done:
                        next_look = 0.0  # a slot is free: look again
                else:
                    await asyncio.sleep(0.2)
            for task in in_flight:
                task.cancel()

    async def _deliver(self, client: httpx.AsyncClient, row: _Claimed) -> None:
        try:
            outcome = await post_once(
                client, row.url, row.payload, self._key, timeout=self.settings.attempt_timeout
            )
        except Exception as exc:  # a bug here must not stop other deliveries
            outcome = Attempt(False, True, f"{type(exc).__name__}: {exc}")
        await asyncio.to_thread(self.record, row.id, outcome)

    # -- database steps (short transactions, no I/O) --

    def claim(self, limit: int) -> tuple[list[_Claimed], float | None]:
        """Lease up to ``limit`` due rows; also returns seconds until the next row is due."""
        lease = dt.timedelta(seconds=self.settings.attempt_timeout + _LEASE_MARGIN)
        claimed: list[_Claimed] = []
        with self.state.sessions() as session:
            now = utcnow()
            rows = session.execute(
                select(WebhookDelivery, Webhook.id)
                .outerjoin(Webhook, Webhook.id == WebhookDelivery.webhook_id)
                .where(WebhookDelivery.state == "PENDING", WebhookDelivery.next_attempt_at <= now)
                .order_by(WebhookDelivery.id)
                .limit(limit)
            ).all()
            for row, webhook_id in rows:
                if webhook_id is None:  # deleted while the event was being written
                    row.state, row.finished_at = "FAILED", now
                    row.last_error = "the webhook was deleted"
                    continue
                moved = session.execute(
                    update(WebhookDelivery)
                    .where(
                        WebhookDelivery.id == row.id,
                        WebhookDelivery.state == "PENDING",
                        WebhookDelivery.attempts == row.attempts,
                        WebhookDelivery.next_attempt_at <= now,
                    )
                    .values(next_attempt_at=now + lease)
                    .execution_options(synchronize_session=False)
                )
                if getattr(moved, "rowcount", 0) == 1:
                    claimed.append(_Claimed(row.id, row.url, row.payload))
            session.commit()
            earliest = session.scalar(
                select(func.min(WebhookDelivery.next_attempt_at)).where(
                    WebhookDelivery.state == "PENDING"
                )
            )
        due_in = None if earliest is None else (earliest - utcnow()).total_seconds()
        return claimed, due_in

    def record(self, delivery_id: int, outcome: Attempt) -> None:
        """Write one attempt's outcome (and the next attempt's time) on its row."""
        with self.state.sessions() as session:
            row = session.get(WebhookDelivery, delivery_id)
            if row is None or row.state != "PENDING":
                return
            row.attempts += 1
            now = utcnow()
            row.last_error = outcome.error
            if outcome.delivered:
                row.state, row.finished_at = "DELIVERED", now
            elif not outcome.retry or row.attempts >= self.settings.max_attempts:
                row.state, row.finished_at = "FAILED", now
                log.warning(
                    "webhook %s: giving up on delivery %s after %d attempt(s): %s",
                    row.webhook_id,
                    row.id,
                    row.attempts,
                    outcome.error,
                )
            else:
                wait = min(
                    self.settings.max_backoff, self.settings.backoff * 2 ** (row.attempts - 1)
                )
                row.next_attempt_at = now + dt.timedelta(seconds=wait)
                log.info(
                    "webhook %s: delivery %s attempt %d failed (%s); retrying in %g s",
                    row.webhook_id,
                    row.id,
                    row.attempts,
                    outcome.error,
                    wait,
                )
            session.commit()

    def prune(self) -> None:
        """Delete finished rows past ``keep_finished`` and fired-trigger marks of gone tasks."""
        cutoff = utcnow() - dt.timedelta(seconds=self.settings.keep_finished)
        with self.state.sessions() as session:
            session.execute(
                delete(WebhookDelivery).where(
                    WebhookDelivery.finished_at.is_not(None), WebhookDelivery.finished_at < cutoff
                )
            )
            session.execute(
                delete(WebhookLogMatch).where(WebhookLogMatch.task_id.not_in(select(Task.task_id)))
            )
            session.commit()
