"""What the gateway asks an engine for, how it reads the answer, and what it hides from the client.

Layer: pure functions over JSON bodies (no I/O).

Engines return the tokens they ran only when asked, each in its own fields (read from their
sources; see rfcs/0018-token-faithful-traces.md):

    vllm    request  `return_token_ids: true` (vLLM >= 0.10.2), `logprobs: true`, `top_logprobs: 0`
            reply    top-level `prompt_token_ids`; per choice `token_ids` and `logprobs.content[i].logprob`
    sglang  request  `return_prompt_token_ids: true`, `return_token_ids: true`, `logprobs: true`,
                     `top_logprobs: 0` (the chat-completions extensions of SGLang's 0.5 series)
            reply    per choice `prompt_token_ids`, `token_ids` and `logprobs.content[i].logprob`
    none    nothing is added (any OpenAI-compatible server; the record then has no token ids)

`top_logprobs: 0` is explicit so the engine computes only the sampled token's logprob, whatever
its default. Fields the gateway added are removed from the reply before the client sees it,
unless the client asked for them itself (or sent `Mcpgym-Tokens: 1`).
"""

from __future__ import annotations

from typing import Any, Final, Literal

Engine = Literal["vllm", "sglang", "none"]
ENGINES: Final = ("vllm", "sglang", "none")

_ASK: Final[dict[str, dict[str, Any]]] = {
    "vllm": {"return_token_ids": True, "logprobs": True, "top_logprobs": 0},
    "sglang": {"return_prompt_token_ids": True, "return_token_ids": True, "logprobs": True, "top_logprobs": 0},
    "none": {},
}
_ID_FIELDS: Final = ("return_token_ids", "return_prompt_token_ids")


def ask(engine: Engine, body: dict[str, Any]) -> tuple[dict[str, Any], set[str]]:
    """`body` with the token fields added, and the names of those the client had not set itself."""
    added = {k: v for k, v in _ASK[engine].items() if k not in body}
    if body.get("logprobs") and "top_logprobs" in added:  # the client wants logprobs: its own top_logprobs stand
        del added["top_logprobs"]
    return {**body, **added}, set(added)


def hide(reply: dict[str, Any], added: set[str]) -> dict[str, Any]:
    """`reply` without the fields the gateway's additions made the engine send."""
    ids = any(k in added for k in _ID_FIELDS)
    if ids:
        reply.pop("prompt_token_ids", None)
    for choice in reply.get("choices") or []:
        if not isinstance(choice, dict):
            continue
        if ids:
            choice.pop("token_ids", None)
            choice.pop("prompt_token_ids", None)
        if "logprobs" in added:
            choice["logprobs"] = None
    return reply


def prompt_ids(reply: dict[str, Any]) -> list[int] | None:
    """The prompt's token ids: vLLM's top-level field, or SGLang's on the first choice."""
    ids = reply.get("prompt_token_ids")
    if ids is None:
        choices = reply.get("choices") or [{}]
        ids = choices[0].get("prompt_token_ids") if isinstance(choices[0], dict) else None
    return _ints(ids)


def choices(reply: dict[str, Any]) -> list[dict[str, Any]]:
    """Each choice's generated ids, sampled logprobs, finish reason and message (`Choice`'s fields)."""
    out = []
    for i, choice in enumerate(reply.get("choices") or []):
        if not isinstance(choice, dict):
            continue
        message, index, finish = choice.get("message"), choice.get("index", i), choice.get("finish_reason")
        out.append(
            {
                "index": index if isinstance(index, int) else i,
                "completion_token_ids": _ints(choice.get("token_ids")),
                "logprobs": _logprobs(choice.get("logprobs")),
                "finish_reason": finish if isinstance(finish, str) else None,
                "message": message if isinstance(message, dict) else {},
            }
        )
    return out


def _ints(value: Any) -> list[int] | None:
    # The shape only (every element is checked when the record is read back, by `Call`): this
    # runs on every call, over every prompt token.
    return value if isinstance(value, list) and (not value or isinstance(value[0], int)) else None


def _logprobs(value: Any) -> list[float | None] | None:
    content = value.get("content") if isinstance(value, dict) else None
    if not isinstance(content, list):
        return None
    return [entry.get("logprob") if isinstance(entry, dict) else None for entry in content]
