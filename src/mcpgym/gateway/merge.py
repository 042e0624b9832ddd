"""An episode's calls merged into token sequences with a loss mask, branching where a prompt diverges.

Layer: pure functions over `Call` records (no I/O), shared by the gateway's reader
(`read_traces`) and the harness (`Trajectory.tokens`).

A multi-turn agent's prompts normally grow: call k+1's prompt is call k's prompt, then what the
model generated, then the tool results and the template's markup. The merge checks that token
for token: while it holds, the episode is one sequence whose model tokens (mask 1, with their
logprobs) are exactly what the engine sampled. When it fails (the harness compacted its context,
or the chat template re-renders an earlier assistant turn differently from the tokens the model
produced, e.g. re-serialised tool-call JSON) training on one sequence would put the gradient on
text the model never emitted, so a new branch starts from the diverging prompt and says where
it diverged. With `n > 1` the choice whose tokens the next prompt continues is the one kept; the
last call's first choice ends the episode.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from mcpgym.gateway.types import Call, Choice, TokenSequence


@dataclass
class _Branch:
    index: int
    parent: int | None
    diverged_at: int | None
    reason: str
    prompt_length: int
    token_ids: list[int]
    mask: list[int]
    logprobs: list[float | None]
    turns: list[int] = field(default_factory=list)
    pending: Sequence[Choice] = ()
    """The last call's choices: which one the episode went on with is known only at the next call."""

    def extend(self, call: Call, prompt: list[int]) -> bool:
        for choice in self.pending:
            ids = choice.completion_token_ids or []
            end = len(self.token_ids) + len(ids)
            if prompt[: len(self.token_ids)] == self.token_ids and prompt[len(self.token_ids) : end] == ids:
                self._commit(choice)
                self._observe(prompt[end:])
                self.turns.append(call.turn)
                self.pending = call.choices
                return True
        return False

    def finish(self) -> TokenSequence:
        if self.pending:
            self._commit(self.pending[0])
            self.pending = ()
        return TokenSequence(
            branch=self.index,
            parent=self.parent,
            diverged_at=self.diverged_at,
            reason=self.reason,
            turns=self.turns,
            prompt_length=self.prompt_length,
            token_ids=self.token_ids,
            mask=self.mask,
            logprobs=self.logprobs,
        )

    def full(self) -> list[int]:
        """The tokens with the first pending choice committed: what a diverging prompt is compared to."""
        return self.token_ids + list((self.pending[0].completion_token_ids or []) if self.pending else [])

    def _commit(self, choice: Choice) -> None:
        ids = choice.completion_token_ids or []
        logprobs = list(choice.logprobs or [])
        if len(logprobs) != len(ids):  # the engine gave none, or not one per token: unknown, not wrong
            logprobs = [None] * len(ids)
        self.token_ids += ids
        self.mask += [1] * len(ids)
        self.logprobs += logprobs

    def _observe(self, ids: list[int]) -> None:
        self.token_ids += ids
        self.mask += [0] * len(ids)
        self.logprobs += [None] * len(ids)


def usable(calls: Iterable[Call]) -> list[Call]:
    """The calls a sequence can be built from: answered, with token ids, and not superseded by a retry."""
    calls = list(calls)
    superseded = {c.retry_of for c in calls if c.retry_of is not None}
    return [
        c
        for c in calls
        if c.turn not in superseded
        and c.error is None
        and c.prompt_token_ids is not None
        and c.choices
        and all(choice.completion_token_ids is not None for choice in c.choices)
    ]


def merge(calls: Iterable[Call], episode_id: str | None = None) -> list[TokenSequence]:
    """`calls` (one episode's, in turn order) as token sequences: one per branch, usually one."""
    calls = sorted(calls, key=lambda c: c.turn)
    branches: list[_Branch] = []
    finished: list[TokenSequence] = []
    for call in usable(calls):
        prompt = list(call.prompt_token_ids or [])
        current = branches[-1] if branches else None
        if current is not None and current.extend(call, prompt):
            continue
        parent, shared, reason = None, None, "start"
        if current is not None:
            full = current.full()
            shared = _shared_prefix(full, prompt)
            parent, reason = current.index, _why(full, prompt, shared)
            finished.append(current.finish())
        branches.append(
            _Branch(len(branches), parent, shared, reason, len(prompt), prompt, [0] * len(prompt), [None] * len(prompt))
        )
        branches[-1].turns.append(call.turn)
        branches[-1].pending = call.choices
    if branches:
        finished.append(branches[-1].finish())
    return [s.model_copy(update={"episode_id": episode_id or _episode(calls)}) for s in finished]


def _episode(calls: Iterable[Call]) -> str | None:
    return next((c.episode_id for c in calls), None)


def _shared_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def _why(before: list[int], prompt: list[int], shared: int) -> str:
    if shared == len(prompt) < len(before):
        return f"the prompt ({len(prompt)} tokens) is shorter than the sequence so far ({len(before)})"
    return f"the prompt diverged from the sequence so far at token {shared}"


def merge_turns(
    turns: Iterable[tuple[list[int], list[int], list[float | None] | None]], episode_id: str | None = None
) -> list[TokenSequence]:
    """`merge` over (prompt ids, completion ids, logprobs) per model reply, in order: what a
    client that got the ids in its replies (`harness.OpenAIPolicy`) builds its sequences from."""
    calls = [
        Call(
            episode_id=episode_id,
            turn=n,
            prompt_token_ids=prompt,
            choices=[Choice(completion_token_ids=completion, logprobs=logprobs)],
        )
        for n, (prompt, completion, logprobs) in enumerate(turns)
    ]
    return merge(calls, episode_id)
