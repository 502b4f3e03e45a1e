"""One piece for the middlewares that rewrite a whole answer (ETags, compression).

:func:`whole_body_send` wraps an ASGI ``send``: an answer whose start message ``hold`` accepts
is held until its last body message arrives, then ``finish(start, body)`` sends what should go
out instead (any number of messages, through the ``send`` it is given); every other answer, and
every other message, passes at once and unchanged. One wrapper serves one request.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.types import Message, Send

__all__ = ["Finish", "whole_body_send"]

Finish = Callable[[Send, Message, bytes], Awaitable[None]]
"""``finish(send, start, body)``: send the answer that replaces a held one."""


def whole_body_send(send: Send, hold: Callable[[Message], bool], finish: Finish) -> Send:
    """``send``, holding the answers ``hold`` picks until their body is whole (see above)."""
    held: Message | None = None
    chunks: list[bytes] = []

    async def holding_send(message: Message) -> None:
        nonlocal held
        if message["type"] == "http.response.start":
            if hold(message):
                held = message
                return
            await send(message)
            return
        if held is None or message["type"] != "http.response.body":
            await send(message)
            return
        chunks.append(message.get("body", b""))
        if message.get("more_body", False):
            return
        start, held = held, None
        await finish(send, start, b"".join(chunks))

    return holding_send
