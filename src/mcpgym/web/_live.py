"""Live updates: each page episode's events, kept in order and pushed to every watching page.

Layer: plain pub/sub over anyio memory streams (imports nothing of mcpgym). The play routes
publish an event after each reset and step; `stream()` is the body of a Server-Sent Events
response: it first replays what the watcher missed (after `Last-Event-ID`), then waits for new
events. One-way server-to-page traffic is all the page needs (its actions are ordinary POSTs),
so SSE rather than WebSocket: it is plain HTTP, so the bearer token, Host/Origin checks and
proxies treat it like every other request (rfcs/0012-web-page.md).
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import AsyncIterator
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectSendStream

MAX_FEEDS = 64
"""Episodes whose history is kept for late watchers; the oldest is dropped past this."""
MAX_EVENTS = 2_000
"""Events kept per episode for replay (a step limit bounds most episodes below this)."""
KEEPALIVE = 15.0
"""Seconds between comment lines on an idle stream, so proxies do not cut it."""


class Feed:
    """One episode's events (`seq` numbers them from 0) and its current watchers."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.watchers: set[MemoryObjectSendStream[dict[str, Any]]] = set()
        self.first_seq = 0

    def publish(self, event: dict[str, Any]) -> dict[str, Any]:
        event = {**event, "seq": self.first_seq + len(self.events)}
        self.events.append(event)
        if len(self.events) > MAX_EVENTS:
            del self.events[0]
            self.first_seq += 1
        for watcher in list(self.watchers):
            try:
                watcher.send_nowait(event)
            except (anyio.WouldBlock, anyio.BrokenResourceError, anyio.ClosedResourceError):
                self.watchers.discard(watcher)  # a stalled or gone watcher reconnects and replays
                watcher.close()
        return event

    def close(self) -> None:
        for watcher in self.watchers:
            watcher.close()
        self.watchers.clear()


class Hub:
    """Every page episode's feed, and the shutdown switch that ends all streams at once."""

    def __init__(self) -> None:
        self._feeds: OrderedDict[str, Feed] = OrderedDict()
        self.stopped = False

    def has(self, episode_id: str) -> bool:
        return episode_id in self._feeds

    def feed(self, episode_id: str) -> Feed:
        feed = self._feeds.get(episode_id)
        if feed is None:
            feed = self._feeds[episode_id] = Feed()
            if len(self._feeds) > MAX_FEEDS:
                self._feeds.popitem(last=False)[1].close()
        self._feeds.move_to_end(episode_id)
        return feed

    def drop(self, episode_id: str) -> None:
        feed = self._feeds.pop(episode_id, None)
        if feed is not None:
            feed.close()

    def stop(self) -> None:
        """End every open stream (the server is shutting down: pages reconnect to the next one)."""
        self.stopped = True
        for feed in self._feeds.values():
            feed.close()

    async def stream(self, episode_id: str, after: int) -> AsyncIterator[str]:
        """SSE text for `episode_id`: events numbered above `after`, then live ones as they come."""
        if self.stopped:
            return
        feed = self.feed(episode_id)
        send, receive = anyio.create_memory_object_stream[dict[str, Any]](MAX_EVENTS)
        for missed in feed.events:
            if missed["seq"] > after:
                send.send_nowait(missed)
        feed.watchers.add(send)
        yield "retry: 1000\n\n"
        try:
            with receive:
                while True:
                    event: dict[str, Any] | None = None
                    # Yield outside the cancel scope: an async generator must not suspend inside one.
                    with anyio.move_on_after(KEEPALIVE):
                        try:
                            event = await receive.receive()
                        except anyio.EndOfStream:
                            return
                    if event is None:
                        yield ": keepalive\n\n"
                    else:
                        yield f"id: {event['seq']}\ndata: {json.dumps(event, default=str)}\n\n"
        finally:
            feed.watchers.discard(send)
            send.close()
