"""HTTP to one master as one user: login on demand, errors mapped, NDJSON streams.

Contract:

- The user is, in order: the one given, the environment's (``DET_USER``), the
  master's active user in the token cache, else ``determined`` (empty password).
- Credentials: a password given explicitly always logs in afresh on the first request.
  Otherwise the cached token is used, else ``DET_USER_TOKEN`` when the user is ``DET_USER``
  (an access token: ``stalwart token create``); a 401 on a cached token drops it and logs in
  once with the known password (the environment's, else empty), then retries the request.
- Retries follow :mod:`stalwart._retry` with :data:`SDK_RETRY` (ten seconds: long enough to
  ride out a master's stop and restart, short enough for a person at a prompt), without
  ``retry_unsafe``: a POST or PATCH is sent again only when it never reached the master
  (refused connection), so an experiment is never created twice. 502/503/504 answers to
  GET, PUT and DELETE and broken connections of those are retried too.
- Every error answer becomes the matching StalwartError (:mod:`stalwart.client.errors`);
  a master that does not answer is :class:`~stalwart.client.errors.MasterUnreachableError`.
- Streams (:meth:`Session.stream`) yield each line's ``result``; an in-band error line raises.
  Following streams have no read timeout (a quiet trial may log nothing for hours).
- Not thread-safe: one Session per thread.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

import httpx
from pydantic import BaseModel

from stalwart import __version__
from stalwart._retry import RetriesExhaustedError, RetryPolicy, send_with_retries
from stalwart.client.auth import DEFAULT_USER, ClientEnv, TokenStore, salt_and_hash
from stalwart.client.errors import (
    MasterUnreachableError,
    error_from_response,
    error_from_stream,
)
from stalwart.client.models import LoginResponse, MeResponse, V1User
from stalwart.errors import StalwartError, UnauthenticatedError

__all__ = ["SDK_RETRY", "Progress", "Session"]

M = TypeVar("M", bound=BaseModel)
Params = Mapping[str, Any]
Progress = Callable[[int, int], None]
"""``progress(done, total)`` in bytes, called as an upload or download advances."""

_CHUNK = 256 * 1024

SDK_RETRY = RetryPolicy(initial_backoff_s=0.25, max_backoff_s=2.0, deadline_s=10.0)
"""The SDK's and the CLI's retries (see the module contract)."""


class Session:
    """Requests to ``master`` as one user (see the module contract)."""

    def __init__(
        self,
        master: str,
        *,
        user: str | None,
        password: str | None,
        env: ClientEnv,
        store: TokenStore,
        timeout: float = 30.0,
        transport: httpx.BaseTransport | None = None,
        retry: RetryPolicy = SDK_RETRY,
    ) -> None:
        self.master = master
        self.retry = retry
        self.store = store
        self.user = user or env.user or store.active_user(master) or DEFAULT_USER
        self._fresh_login = password is not None
        if password is None and env.user == self.user:
            password = env.password
        self._password = password
        self._env_token = env.token if env.user == self.user and password is None else None
        self._token: str | None = None
        self._from_cache = False
        self._timeout = timeout
        self._http = httpx.Client(
            base_url=master,
            timeout=timeout,
            headers={"User-Agent": f"stalwart/{__version__}"},
            transport=transport,
        )

    def close(self) -> None:
        """Close the connections (the session cannot be used afterwards)."""
        self._http.close()

    # -- credentials ---------------------------------------------------------------------------

    def login(self, user: str, password: str, *, activate: bool) -> V1User:
        """Log in as ``user``; caches the token (``activate``: and makes ``user`` the active
        user). Raises UnauthenticatedError for a wrong password, ForbiddenError when inactive."""
        body = {"username": user, "password": salt_and_hash(password), "isHashed": True}
        response = self._send("POST", "/api/v1/auth/login", json_body=body, token=None)
        if response.status_code >= 400:
            error = self._error(response, "POST", "/api/v1/auth/login", user=user)
            if isinstance(error, UnauthenticatedError):
                raise UnauthenticatedError(
                    f"wrong username or password for {user!r} on {self.master}",
                    hint=f"try again with `stalwart user login {user}`",
                ) from error
            raise error
        login = LoginResponse.model_validate_json(response.content)
        self.user, self._password = user, password
        self._token, self._from_cache = login.token, False
        self.store.put(self.master, user, login.token, activate=activate)
        return login.user

    def use_token(self, token: str, *, activate: bool) -> V1User:
        """Act as the user ``token`` (an access token) belongs to; caches it for that user
        (``activate``: and makes them the active user). UnauthenticatedError, with the
        master's reason, when the token is unknown, revoked or expired."""
        response = self._send("GET", "/api/v1/me", token=token)
        if response.status_code >= 400:
            raise self._error(response, "GET", "/api/v1/me")
        user = MeResponse.model_validate_json(response.content).user
        self.user, self._password = user.username, None
        self._token, self._from_cache = token, False
        self.store.put(self.master, user.username, token, activate=activate)
        return user

    def logout(self) -> None:
        """End the session on the master (if there is one) and forget its token."""
        token = self._token or self.store.token(self.master, self.user)
        if token is not None:
            response = self._send("POST", "/api/v1/auth/logout", token=token)
            if response.status_code >= 400 and response.status_code != 401:
                raise self._error(response, "POST", "/api/v1/auth/logout")
        self._token = None
        self.store.drop(self.master, self.user, forget_user=True)

    def _ensure_token(self) -> str:
        if self._token is not None:
            return self._token
        if not self._fresh_login:
            cached = self.store.token(self.master, self.user)
            if cached is not None:
                self._token, self._from_cache = cached, True
                return cached
            if self._env_token is not None:
                self._token, self._from_cache = self._env_token, False
                return self._env_token
        try:
            self.login(self.user, self._password or "", activate=False)
        except UnauthenticatedError as exc:
            if self._password is None:
                raise UnauthenticatedError(
                    f"not logged in as {self.user!r} on {self.master}",
                    hint=f"log in with `stalwart user login {self.user}`",
                ) from exc
            raise
        assert self._token is not None
        return self._token

    # -- requests ------------------------------------------------------------------------------

    def _send(
        self,
        method: str,
        path: str,
        *,
        token: str | None,
        params: Params | None = None,
        json_body: Any = None,
        content: Callable[[], Iterator[bytes]] | None = None,
        length: int | None = None,
        stream: bool = False,
        timeout: httpx.Timeout | None = None,
    ) -> httpx.Response:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        if content is not None:
            headers["Content-Type"] = "application/json"
            if length is not None:
                headers["Content-Length"] = str(length)

        def send(_attempt: int) -> httpx.Response:
            request = self._http.build_request(
                method,
                path,
                params=dict(params) if params else None,
                json=json_body,
                content=content() if content is not None else None,
                headers=headers,
                timeout=timeout or self._timeout,
            )
            return self._http.send(request, stream=stream)

        try:
            return send_with_retries(send, method=method, policy=self.retry, retry_unsafe=False)
        except RetriesExhaustedError as exc:
            if exc.response is not None:  # the master's own word (e.g. 503: it is stopping)
                return exc.response
            problem = exc.problem
            cause: BaseException = exc
        except httpx.TransportError as exc:
            problem, cause = f"{type(exc).__name__}: {exc}", exc
        raise MasterUnreachableError(
            f"cannot reach the master at {self.master} ({problem})",
            hint="start one with `stalwart up`, or point at yours with "
            "`stalwart -m URL` or STALWART_MASTER",
        ) from cause

    def _error(
        self, response: httpx.Response, method: str, path: str, *, user: str | None = None
    ) -> StalwartError:
        text = response.read().decode("utf-8", errors="replace")
        return error_from_response(
            response.status_code, text, method=method, path=path, user=user or self.user
        )

    def _authorized(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """Send with the user's token; on a 401 for a cached token, log in again once."""
        for attempt in (0, 1):
            response = self._send(method, path, token=self._ensure_token(), **kwargs)
            if response.status_code == 401 and attempt == 0 and self._from_cache:
                response.close()
                self.store.drop(self.master, self.user, forget_user=False)
                self._token, self._from_cache = None, False
                continue
            if response.status_code >= 400:
                try:
                    raise self._error(response, method, path)
                finally:
                    response.close()
            return response
        raise AssertionError("unreachable")  # pragma: no cover

    def request(
        self, method: str, path: str, *, params: Params | None = None, body: Any = None
    ) -> Any:
        """Send a JSON request; the decoded JSON answer (``None`` for an empty body)."""
        response = self._authorized(method, path, params=params, json_body=body)
        return response.json() if response.content else None

    def get(self, path: str, model: type[M], params: Params | None = None) -> M:
        """GET ``path`` and validate the answer with ``model``."""
        response = self._authorized("GET", path, params=params)
        return model.model_validate_json(response.content)

    def text(self, path: str, params: Params | None = None) -> str:
        """GET ``path``; the answer as text (CSV exports)."""
        return self._authorized("GET", path, params=params).text

    def content(self, path: str, params: Params | None = None) -> bytes:
        """GET ``path``; the answer's bytes (Arrow IPC streams)."""
        return self._authorized("GET", path, params=params).content

    def post(self, path: str, body: Any = None) -> Any:
        """POST a JSON body (``{}`` when None); the decoded answer."""
        return self.request("POST", path, body={} if body is None else body)

    def upload(self, path: str, body: Any, model: type[M], progress: Progress | None = None) -> M:
        """POST a large JSON body, reporting ``progress(sent, total)`` as bytes go out."""
        data = json.dumps(body, separators=(",", ":")).encode()

        def chunks() -> Iterator[bytes]:
            for start in range(0, len(data), _CHUNK):
                yield data[start : start + _CHUNK]
                if progress is not None:
                    progress(min(start + _CHUNK, len(data)), len(data))

        response = self._authorized("POST", path, content=chunks, length=len(data))
        return model.model_validate_json(response.content)

    def stream(self, path: str, params: Params | None = None, *, follow: bool) -> Iterator[Any]:
        """The ``result`` of each line of an NDJSON stream (see the module contract)."""
        read = None if follow else self._timeout
        timeout = httpx.Timeout(self._timeout, read=read)
        response = self._authorized("GET", path, params=params, stream=True, timeout=timeout)
        try:
            for line in response.iter_lines():
                if not line.strip():
                    continue
                item = json.loads(line)
                if isinstance(item, dict) and "error" in item and "result" not in item:
                    raise error_from_stream(item["error"])
                yield item.get("result") if isinstance(item, dict) else item
        except httpx.TransportError as exc:
            raise MasterUnreachableError(
                f"the stream from {self.master} broke off ({type(exc).__name__}: {exc})",
                hint="run the command again",
            ) from exc
        finally:
            response.close()
