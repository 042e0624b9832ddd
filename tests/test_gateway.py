"""mcpgym gateway against a scripted engine: fields asked and hidden, streaming, joining,
recording, merging and branching, n > 1, errors, time-outs, retries, concurrency, auth, and
Anthropic Messages. The real-model tests are in test_gateway_model.py."""

from __future__ import annotations

import contextlib
import json
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

import mcpgym
from mcpgym.gateway import Gateway, GatewayConfig, merge, read_calls, read_traces
from tests.conftest import serve_app
from tests.gateway_engines import EOS, ROLES, ScriptedEngine, Step, prompt_ids, render

pytestmark = pytest.mark.anyio

USER = {"role": "user", "content": "hi"}


@contextlib.asynccontextmanager
async def gateway(engine: ScriptedEngine, record: Path | None, **options: Any) -> AsyncIterator[httpx2.AsyncClient]:
    """The engine and a gateway in front of it on loopback; yields a client whose base URL is the gateway."""
    async with serve_app(engine.app()) as upstream:
        app = Gateway(GatewayConfig(upstream=upstream + "/v1", record=record, **options)).app()
        async with serve_app(app) as url, httpx2.AsyncClient(base_url=url, timeout=30) as client:
            yield client


def recorded_files(directory: Path) -> list[Path]:
    return list(directory.rglob("*.jsonl"))


def append(path: Path, data: bytes) -> None:
    with open(path, "ab") as file:
        file.write(data)


async def chat(client: httpx2.AsyncClient, messages: list[dict[str, Any]], path: str = "/v1", **body: Any) -> Any:
    response = await client.post(f"{path}/chat/completions", json={"model": "m", "messages": messages, **body})
    assert response.status_code == 200, response.text
    return response.json()


async def test_token_fields_are_asked_for_recorded_and_hidden_from_the_client(tmp_path: Path) -> None:
    engine = ScriptedEngine([Step(text="hello")])
    async with gateway(engine, tmp_path) as client:
        client.headers["authorization"] = "Bearer client-secret"
        reply = await chat(client, [USER], path="/episodes/e1/v1", temperature=0.5)
    sent = engine.requests[0]
    assert (sent["return_token_ids"], sent["logprobs"], sent["top_logprobs"]) == (True, True, 0)
    assert "authorization" not in engine.headers[0]  # the client's key stays with the gateway
    assert "prompt_token_ids" not in reply and "token_ids" not in reply["choices"][0]
    assert reply["choices"][0]["logprobs"] is None and reply["choices"][0]["message"]["content"] == "hello"
    [call] = read_calls(tmp_path)["e1"]
    assert call.prompt_token_ids == prompt_ids([USER])
    assert call.choices[0].completion_token_ids == render({"role": "assistant", "content": "hello"})[1:]
    assert call.choices[0].logprobs == [-0.5] * 6 and call.sampling == {"temperature": 0.5}
    assert call.status == 200 and call.error is None and call.latency > 0


async def test_what_the_client_asked_for_itself_is_kept(tmp_path: Path) -> None:
    engine = ScriptedEngine()
    async with gateway(engine, tmp_path) as client:
        asked = await chat(client, [USER], logprobs=True, top_logprobs=3)
        by_header = await client.post("/v1/chat/completions", json={"messages": [USER]}, headers={"Mcpgym-Tokens": "1"})
    assert engine.requests[0]["top_logprobs"] == 3  # the client's own value is not overridden
    assert asked["choices"][0]["logprobs"]["content"] and "token_ids" not in asked["choices"][0]
    assert by_header.json()["prompt_token_ids"] == prompt_ids([USER])
    assert by_header.json()["choices"][0]["token_ids"]


async def test_a_streaming_client_gets_the_whole_reply_as_events(tmp_path: Path) -> None:
    engine = ScriptedEngine([Step(text="thinking", calls=[("echo", '{"message": "x"}')])])
    async with gateway(engine, tmp_path) as client:
        body = {"messages": [USER], "stream": True, "stream_options": {"include_usage": True}}
        response = await client.post("/episodes/s/v1/chat/completions", json=body)
    assert response.headers["content-type"].startswith("text/event-stream")
    assert "stream" not in engine.requests[0]  # the engine is always asked without streaming
    events = [line.removeprefix("data: ") for line in response.text.split("\n\n") if line]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
    assert "".join(d.get("content") or "" for d in deltas) == "thinking"
    [calls] = [d["tool_calls"] for d in deltas if "tool_calls" in d]
    assert calls[0]["function"] == {"name": "echo", "arguments": '{"message": "x"}'}
    assert [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]][-1] == "tool_calls"
    assert chunks[-1]["usage"]["prompt_tokens"] > 0
    assert read_calls(tmp_path)["s"][0].stream


async def test_calls_join_episodes_by_path_header_or_registered_key(tmp_path: Path) -> None:
    engine = ScriptedEngine()
    async with gateway(engine, tmp_path) as client:
        await chat(client, [USER], path="/episodes/by-path/v1")
        await client.post("/v1/chat/completions", json={"messages": [USER]}, headers={"Mcpgym-Episode": "by-header"})
        key = (await client.post("/mcpgym/keys", json={"episode_id": "by-key"})).json()["key"]
        await client.post("/v1/chat/completions", json={"messages": [USER]}, headers={"authorization": f"Bearer {key}"})
        await chat(client, [USER])
        odd = "a/../../b c"
        await client.post("/v1/chat/completions", json={"messages": [USER]}, headers={"Mcpgym-Episode": odd})
    calls = read_calls(tmp_path)
    assert set(calls) == {"by-path", "by-header", "by-key", None, odd}
    assert all(p.parent == tmp_path for p in recorded_files(tmp_path))  # an episode id is never a path


async def test_an_episode_of_tool_turns_merges_into_one_masked_sequence(tmp_path: Path) -> None:
    engine = ScriptedEngine([Step(text="", calls=[("echo", '{"m": 1}')]), Step(text="done")])
    async with gateway(engine, tmp_path) as client:
        messages: list[dict[str, Any]] = [{"role": "system", "content": "be brief"}, USER]
        first = await chat(client, messages, path="/episodes/ep/v1", tools=[{"type": "function", "function": {}}])
        messages += [first["choices"][0]["message"], {"role": "tool", "tool_call_id": "call_0", "content": "1"}]
        await chat(client, messages, path="/episodes/ep/v1")
    [trace] = read_traces(tmp_path)
    [sequence] = trace.tokens
    assert sequence.reason == "start" and sequence.turns == [0, 1]
    assert sequence.token_ids == prompt_ids(messages) + render({"role": "assistant", "content": "done"})[1:]
    assert sequence.prompt_length == len(prompt_ids(messages[:2]))
    generated = [i for i, m in zip(sequence.token_ids, sequence.mask, strict=True) if m]
    first_turn = render(first["choices"][0]["message"])[1:]
    assert generated == first_turn + render({"role": "assistant", "content": "done"})[1:]
    assert all((lp is None) == (m == 0) for lp, m in zip(sequence.logprobs, sequence.mask, strict=True))
    assert trace.calls[0].tools == [{"type": "function", "function": {}}]


async def test_a_prompt_that_diverges_starts_a_branch_that_says_where(tmp_path: Path) -> None:
    engine = ScriptedEngine()
    async with gateway(engine, tmp_path) as client:
        messages = [USER]
        for _ in range(2):
            reply = await chat(client, messages, path="/episodes/c/v1")
            messages = [*messages, reply["choices"][0]["message"], {"role": "user", "content": "more"}]
        compacted = [{"role": "user", "content": "summary of it all"}]
        await chat(client, compacted, path="/episodes/c/v1")
    first, second = merge(read_calls(tmp_path)["c"])
    assert (first.branch, first.turns, second.branch, second.parent, second.turns) == (0, [0, 1], 1, 0, [2])
    assert second.diverged_at == 1 and "diverged" in second.reason  # they share the user-role id only
    assert second.token_ids[: second.prompt_length] == prompt_ids(compacted)


async def test_a_prompt_extending_the_previous_one_is_written_as_its_tail_and_read_back_whole(tmp_path: Path) -> None:
    engine = ScriptedEngine()
    compacted = [{"role": "user", "content": "compacted"}]
    async with gateway(engine, tmp_path) as client:
        messages = [USER]
        for _ in range(2):
            reply = await chat(client, messages, path="/episodes/t/v1")
            messages = [*messages, reply["choices"][0]["message"], {"role": "user", "content": "more"}]
        await chat(client, compacted, path="/episodes/t/v1")
    lines = [json.loads(line) for line in (tmp_path / "t.jsonl").read_text().splitlines()]
    first, second, third = lines
    assert first["prompt_token_ids"] == prompt_ids([USER]) and "prompt_from" not in first
    assert "prompt_token_ids" not in second and second["prompt_from"] == first["id"]
    assert first["prompt_token_ids"] + second["prompt_tail"] == prompt_ids(messages[:3])
    assert third["prompt_token_ids"] == prompt_ids(compacted)  # it does not extend the last one: written whole
    prompts = [c.prompt_token_ids for c in read_calls(tmp_path)["t"]]
    assert prompts == [prompt_ids([USER]), prompt_ids(messages[:3]), prompt_ids(compacted)]
    (tmp_path / "t.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines[1:]))  # the base line lost
    assert read_calls(tmp_path)["t"][0].prompt_token_ids is None  # unknown, never wrong


def test_a_line_that_failed_to_write_is_no_later_prompts_base(tmp_path: Path) -> None:
    from mcpgym.gateway.record import Recorder

    recorder = Recorder(tmp_path)
    call = {"id": "c0", "episode_id": "e", "prompt_token_ids": [1, 2]}
    recorder.append("e", call)
    real = recorder._files["e"]

    class Full:  # the disk fills for one write
        def write(self, data: bytes) -> int:
            raise OSError(28, "No space left on device")

        def close(self) -> None:
            real.close()

    recorder._files["e"] = Full()  # type: ignore[assignment]
    with pytest.raises(OSError):
        recorder.append("e", {"id": "c1", "episode_id": "e", "prompt_token_ids": [1, 2, 3]})
    recorder._files["e"] = real
    recorder.append("e", {"id": "c2", "episode_id": "e", "prompt_token_ids": [1, 2, 3, 4]})  # its base: c0, written
    recorder.append("e", {"id": "c3", "episode_id": "e", "prompt_token_ids": [1, 2, 3, 4, 5]})
    recorder.close()
    assert [c.prompt_token_ids for c in read_calls(tmp_path)["e"]] == [[1, 2], [1, 2, 3, 4], [1, 2, 3, 4, 5]]


async def test_with_n_choices_the_one_the_next_prompt_continues_is_kept(tmp_path: Path) -> None:
    engine = ScriptedEngine([Step(text="a", n=3)])
    async with gateway(engine, tmp_path) as client:
        reply = await chat(client, [USER], path="/episodes/n/v1", n=3)
        picked = reply["choices"][2]["message"]
        await chat(client, [USER, picked, {"role": "user", "content": "go on"}], path="/episodes/n/v1")
    [sequence] = merge(read_calls(tmp_path)["n"])
    assert len(read_calls(tmp_path)["n"][0].choices) == 3
    generated = [i for i, m in zip(sequence.token_ids, sequence.mask, strict=True) if m]
    assert generated[: len(render(picked)) - 1] == render(picked)[1:]


async def test_engine_errors_and_time_outs_reach_the_client_and_the_record(tmp_path: Path) -> None:
    engine = ScriptedEngine([Step(status=500), Step(status=400), Step(hang=True)])
    async with gateway(engine, tmp_path, timeout=0.5) as client:
        body = {"messages": [USER]}
        failed = await client.post("/episodes/x/v1/chat/completions", json=body)
        refused = await client.post("/episodes/x/v1/chat/completions", json={**body, "temperature": 9})
        slow = await client.post("/episodes/x/v1/chat/completions", json={**body, "temperature": 1})
        engine.release.set()
        fine = await client.post("/episodes/x/v1/chat/completions", json={**body, "temperature": 2})
    assert (failed.status_code, refused.status_code, slow.status_code, fine.status_code) == (500, 400, 504, 200)
    assert "scripted failure" in failed.json()["error"]["message"]
    assert "did not answer within 0.5s" in slow.json()["error"]["message"]
    calls = read_calls(tmp_path)["x"]
    assert [c.status for c in calls] == [500, 400, 504, 200] and all(c.error for c in calls[:3])
    [sequence] = merge(calls)
    assert sequence.turns == [3]  # failed calls are recorded, never merged


async def test_a_client_retry_is_marked_and_merged_once(tmp_path: Path) -> None:
    engine = ScriptedEngine()
    async with gateway(engine, tmp_path) as client:
        first = await chat(client, [USER], path="/episodes/r/v1")
        await chat(client, [USER], path="/episodes/r/v1")  # the same request again: a retry
        follow = [USER, first["choices"][0]["message"], {"role": "user", "content": "and?"}]
        await chat(client, follow, path="/episodes/r/v1")
    calls = read_calls(tmp_path)["r"]
    assert [c.retry_of for c in calls] == [None, 0, None]
    [sequence] = merge(calls)
    assert sequence.turns == [1, 2] and sequence.token_ids[: len(prompt_ids(follow))] == prompt_ids(follow)


async def test_concurrent_episodes_keep_their_own_turns_and_sequences(tmp_path: Path) -> None:
    engine = ScriptedEngine()
    async with gateway(engine, tmp_path) as client:

        async def episode(n: int) -> None:
            messages = [{"role": "user", "content": f"episode {n}"}]
            for turn in range(3):
                reply = await chat(client, messages, path=f"/episodes/c{n}/v1")
                messages += [reply["choices"][0]["message"], {"role": "user", "content": f"turn {turn}"}]

        async with anyio.create_task_group() as tg:
            for n in range(8):
                tg.start_soon(episode, n)
    traces = {t.episode_id: t for t in read_traces(tmp_path)}
    assert set(traces) == {f"c{n}" for n in range(8)}
    for n, trace in ((n, traces[f"c{n}"]) for n in range(8)):
        assert [c.turn for c in trace.calls] == [0, 1, 2]
        [sequence] = trace.tokens
        assert sequence.token_ids[1 : 1 + len(f"episode {n}")] == [ord(c) for c in f"episode {n}"]


async def test_with_a_token_only_its_holders_and_registered_keys_pass(tmp_path: Path) -> None:
    engine = ScriptedEngine()
    async with gateway(engine, tmp_path, token="T", upstream_key="engine-key") as client:
        body = {"messages": [USER]}
        assert (await client.post("/v1/chat/completions", json=body)).status_code == 401
        assert (await client.post("/mcpgym/keys", json={"episode_id": "k"})).status_code == 401
        bearer = {"authorization": "Bearer T"}
        assert (await client.post("/v1/chat/completions", json=body, headers=bearer)).status_code == 200
        key = (await client.post("/mcpgym/keys", json={"episode_id": "k", "key": "K1"}, headers=bearer)).json()["key"]
        keyed = await client.post("/v1/chat/completions", json=body, headers={"x-api-key": key})
        assert keyed.status_code == 200
    assert [h["authorization"] for h in engine.headers] == ["Bearer engine-key"] * 2
    assert [c.turn for c in read_calls(tmp_path)["k"]] == [0]


async def test_bad_requests_get_clear_errors_and_the_gateway_keeps_serving(tmp_path: Path) -> None:
    engine = ScriptedEngine()
    async with gateway(engine, tmp_path) as client:
        for content in (b"not json", b"[1]", b'{"messages": "hi"}'):
            bad = await client.post("/v1/chat/completions", content=content)
            assert bad.status_code == 400 and "messages list" in bad.json()["error"]["message"]
        assert (await client.post("/mcpgym/keys", json={"key": "x"})).status_code == 400
        assert (await client.post("/v1/messages", json={"messages": "x"})).status_code == 400
        assert (await client.get("/v1/models")).json()["data"][0]["id"] == "scripted"
        await chat(client, [USER])
    assert len(engine.requests) == 1


async def test_anthropic_messages_are_translated_both_ways(tmp_path: Path) -> None:
    engine = ScriptedEngine([Step(text="calling", calls=[("echo", '{"message": "x"}')]), Step(text="done")])
    body: dict[str, Any] = {
        "model": "claude-ish",
        "max_tokens": 64,
        "system": [{"type": "text", "text": "be brief"}],
        "tools": [{"name": "echo", "description": "say", "input_schema": {"type": "object"}}],
        "tool_choice": {"type": "any"},
        "messages": [{"role": "user", "content": "hi"}],
    }
    async with gateway(engine, tmp_path) as client:
        first = (await client.post("/episodes/a/v1/messages", json=body)).json()
        assert first["stop_reason"] == "tool_use" and first["content"][0] == {"type": "text", "text": "calling"}
        use = first["content"][1]
        assert (use["type"], use["name"], use["input"]) == ("tool_use", "echo", {"message": "x"})
        body["messages"] += [
            {"role": "assistant", "content": first["content"]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use["id"], "content": "x"}]},
        ]
        streamed = await client.post("/episodes/a/v1/messages", json={**body, "stream": True})
    sent = engine.requests[0]
    assert sent["messages"][0] == {"role": "system", "content": "be brief"} and sent["tool_choice"] == "required"
    assert sent["tools"][0]["function"]["parameters"] == {"type": "object"} and sent["max_tokens"] == 64
    assert engine.requests[1]["messages"][-1] == {"role": "tool", "tool_call_id": "call_0", "content": "x"}
    names = [line.split(": ", 1)[1] for line in streamed.text.splitlines() if line.startswith("event: ")]
    assert names[0] == "message_start" and names[-1] == "message_stop" and "content_block_delta" in names
    [sequence] = merge(read_calls(tmp_path)["a"])  # the translated calls merge like any others
    assert sequence.turns == [0, 1] and read_calls(tmp_path)["a"][0].route == "messages"


async def test_every_finished_call_is_on_disk_before_its_reply_and_a_torn_line_is_skipped(tmp_path: Path) -> None:
    engine = ScriptedEngine()
    async with gateway(engine, tmp_path) as client:
        for n in range(3):
            await chat(client, [{"role": "user", "content": str(n)}], path="/episodes/d/v1")
            assert len(read_calls(tmp_path)["d"]) == n + 1
    append(tmp_path / "d.jsonl", b'{"episode_id": "d", "turn": 3, "prom')  # a kill mid-write
    assert [c.turn for c in read_calls(tmp_path)["d"]] == [0, 1, 2]


def test_merge_handles_no_ids_and_an_empty_episode() -> None:
    assert merge([]) == []
    no_ids = mcpgym.gateway.Call(episode_id="e", turn=0, prompt_token_ids=None)
    assert merge([no_ids]) == []
    assert ROLES["assistant"] in prompt_ids([USER]) and EOS in render(USER)


def test_sglang_is_asked_in_its_own_fields_and_read_from_its_choices() -> None:
    from mcpgym.gateway import engine

    body, added = engine.ask("sglang", {"messages": [USER], "logprobs": True})
    assert body["return_prompt_token_ids"] is True and body["return_token_ids"] is True
    assert "top_logprobs" not in body and added == {"return_prompt_token_ids", "return_token_ids"}
    reply = {"choices": [{"prompt_token_ids": [1, 2], "token_ids": [3], "logprobs": {"content": [{"logprob": -1}]}}]}
    assert engine.prompt_ids(reply) == [1, 2]
    [choice] = engine.choices(reply)
    assert (choice["completion_token_ids"], choice["logprobs"]) == ([3], [-1])
    hidden = engine.hide(reply, added)
    assert hidden["choices"][0] == {"logprobs": {"content": [{"logprob": -1}]}}  # the client asked for logprobs
    assert engine.ask("none", {"messages": []}) == ({"messages": []}, set())


async def test_the_clients_key_reaches_the_engine_only_with_forward_key(tmp_path: Path) -> None:
    engine = ScriptedEngine()
    async with gateway(engine, None, forward_key=True) as client:
        await client.post("/v1/chat/completions", json={"messages": [USER]}, headers={"authorization": "Bearer mine"})
    assert engine.headers[0]["authorization"] == "Bearer mine"
    assert recorded_files(tmp_path) == []  # no --record: nothing written


async def test_a_restarted_gateway_numbers_an_episodes_turns_on_from_its_record(tmp_path: Path) -> None:
    engine = ScriptedEngine()
    for _ in range(2):  # two gateway processes, one after the other, over the same DIR
        async with gateway(engine, tmp_path) as client:
            await chat(client, [USER], path="/episodes/again/v1", temperature=len(engine.requests))
    assert [c.turn for c in read_calls(tmp_path)["again"]] == [0, 1]


async def test_a_message_no_utf8_can_hold_is_relayed_and_recorded(tmp_path: Path) -> None:
    # JSON may escape a lone surrogate ("\ud800"), which no UTF-8 encodes: a client (or a policy
    # producing odd text) that sends one must not cost the call or its record.
    engine = ScriptedEngine()
    odd = {"role": "user", "content": "half a pair: \ud800"}
    async with gateway(engine, tmp_path) as client:
        wire = json.dumps({"model": "m", "messages": [odd]}).encode()  # ASCII: the escape as sent
        sent = await client.post(
            "/episodes/odd/v1/chat/completions", content=wire, headers={"content-type": "application/json"}
        )
        assert sent.status_code == 200, sent.text
    [call] = read_calls(tmp_path)["odd"]
    assert call.messages == [odd] and engine.requests[0]["messages"] == [odd]


async def test_an_engine_nobody_serves_is_a_502_that_is_recorded(tmp_path: Path) -> None:
    with socket.socket() as held:  # bound, never listening: connecting is refused while we hold it
        held.bind(("127.0.0.1", 0))
        upstream = f"http://127.0.0.1:{held.getsockname()[1]}/v1"
        app = Gateway(GatewayConfig(upstream=upstream, record=tmp_path)).app()
        async with serve_app(app) as url, httpx2.AsyncClient(base_url=url, timeout=30) as client:
            body = {"messages": [USER]}
            down = await client.post("/episodes/down/v1/chat/completions", json=body)
            models = await client.get("/v1/models")
    assert down.status_code == 502 and "cannot reach the engine" in down.json()["error"]["message"]
    assert models.status_code == 502
    [call] = read_calls(tmp_path)["down"]
    assert call.status == 502 and call.error and "cannot reach" in call.error


@pytest.mark.parametrize("key", ["sk-\u2013pasted", "sk\r\nInjected: 1"])
def test_an_upstream_key_that_cannot_be_a_header_is_refused_at_start(key: str) -> None:
    with pytest.raises(ValueError, match="upstream key"):
        Gateway(GatewayConfig(upstream="http://127.0.0.1:8000/v1", upstream_key=key))
