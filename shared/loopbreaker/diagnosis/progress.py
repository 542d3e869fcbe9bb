"""Checkpoint saves in the job's own log lines: where each restart resumed from (pure).

The cost of a restart loop (:mod:`loopbreaker.diagnosis.cost`) counts the progress lost
since the last checkpoint before each failure; these are the lines that say when one was
saved, in the wordings of the frameworks people train with (each cited beside it). Most
log lines are not about checkpoints: a literal guard keeps the cost of the others to one
substring test.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from loopbreaker.diagnosis.steps.common import named_after
from loopbreaker.model.evidence import CheckpointMark
from loopbreaker.timeutil import parse_rfc3339

#: (framework, pattern); ``step`` is captured where the line names one.
PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    # huggingface/transformers trainer.py, Trainer._save (v4.x and v5.25.0):
    # logger.info(f"Saving model checkpoint to {output_dir}"), output_dir ending in
    # f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}" (PREFIX_CHECKPOINT_DIR = "checkpoint").
    # Logged by the saving process only, at INFO (shown when log_level is info).
    ("transformers", re.compile(r"Saving model checkpoint to \S*?checkpoint-(?P<step>\d+)")),
    ("transformers", re.compile(r"Saving model checkpoint to \S+")),
    # NVIDIA/Megatron-LM megatron/training/checkpointing.py, save_checkpoint (core_v0.19.0):
    # print_rank_0(f'  [{ts}] successfully saved checkpoint from iteration {iteration:7d} to
    # {args.save} [ t .../..., p .../... ]'); older releases said "at iteration".
    (
        "megatron",
        re.compile(r"successfully saved checkpoint (?:from|at) iteration\s+(?P<step>\d+)"),
    ),
    # The same function's start line, print_rank_0(f'[{ts}] saving checkpoint at iteration
    # {iteration:7d} to {save_dir} in {ckpt_format} format') ("... to {}" before): the
    # state saved is the one at that iteration.
    ("megatron", re.compile(r"saving checkpoint at iteration\s+(?P<step>\d+) to ")),
    # pytorch/torchtitan v0.2.2 torchtitan/components/checkpoint.py: "Finished saving the
    # checkpoint (or staging if async is enabled)in {t:.2f} seconds."; at HEAD
    # components/checkpointer/dcp.py: f"Finished {phase} the checkpoint in {t:.2f} seconds."
    # and "Last step checkpoint completed in {t:.2f}s". No step in the line.
    ("torchtitan", re.compile(r"Finished saving the checkpoint|Last step checkpoint completed")),
    # AI-Hypercomputer/maxtext src/maxtext/common/checkpointing.py (v0.2.4):
    # f"Saved a checkpoint at step {step}." (absl logging.info).
    ("maxtext", re.compile(r"[Ss]aved a checkpoint at step (?P<step>\d+)")),
    # google/orbax checkpoint/orbax/checkpoint/_src/path/atomicity.py (v0.12.3):
    # '[process=%s][thread=%s] Finished saving checkpoint (finalized tmp dir) to `%s`.'
    ("orbax", re.compile(r"Finished saving checkpoint \(finalized tmp dir\) to")),
    # microsoft/DeepSpeed deepspeed/runtime/checkpoint_engine/torch_checkpoint_engine.py
    # (v0.16.4): logger.info(f"[Torch] Checkpoint {tag} is ready now!"), the tag defaulting
    # to f"global_step{self.global_steps}".
    (
        "deepspeed",
        re.compile(r"\[Torch\] Checkpoint (?:global_step(?P<step>\d+)|\S+) is ready now!"),
    ),
    # Lightning-AI/pytorch-lightning 2.6 src/lightning/pytorch/callbacks/model_checkpoint.py
    # (verbose=True): rank_zero_info(f"Epoch {epoch:d}, global step {step:d}: {monitor!r}
    # reached {current:0.5f} (best ...), saving model to {filepath!r} as top {k}").
    ("lightning", re.compile(r"Epoch \d+, global step (?P<step>\d+): .*saving model to")),
    # keras-team/keras keras/src/callbacks/model_checkpoint.py (v2.11 to v3.15, verbose=1):
    # f"\nEpoch {epoch + 1}: saving model to {filepath}", or "...: {monitor} improved from
    # {best} to {current:.5f}, saving model to {filepath}". An epoch, never a step.
    ("keras", re.compile(r"Epoch \d+: .*saving model to \S+")),
)
#: Every pattern above contains one of these: a line with none is no checkpoint line.
_GUARDS = ("heckpoint", "saving model to")
#: Marks kept at most (the newest): saves are minutes apart, so this spans weeks.
MAX_MARKS = 10_000


def mark_of(
    text: str, at: datetime, namespace: str | None, pod: str | None
) -> CheckpointMark | None:
    """The checkpoint save ``text`` reports, or None."""
    if not any(g in text for g in _GUARDS):
        return None
    for framework, pattern in PATTERNS:
        match = pattern.search(text)
        if match is not None:
            step = match.groupdict().get("step")
            return CheckpointMark(at, namespace, pod, int(step) if step else None, framework)
    return None


class CheckpointLog:
    """Collects the checkpoint saves of streamed LogEntries, memory bounded by MAX_MARKS."""

    def __init__(self) -> None:
        self._heap: list[tuple[datetime, int, CheckpointMark]] = []
        self._count = 0

    def add(self, entry: object) -> None:
        if not isinstance(entry, Mapping):
            return
        text = _text(entry)
        if text is None or not any(g in text for g in _GUARDS):
            return
        stamp = entry.get("timestamp")
        try:
            at = parse_rfc3339(stamp) if isinstance(stamp, str) else None
        except ValueError:
            at = None
        if at is None:
            return
        labels = _map(_map(entry.get("resource")).get("labels"))
        namespace, pod = _str(labels.get("namespace_name")), _str(labels.get("pod_name"))
        found = mark_of(text, at, namespace, pod)
        if found is None:
            return
        self._count += 1
        item = (at, self._count, found)
        if len(self._heap) < MAX_MARKS:
            heapq.heappush(self._heap, item)
        else:
            heapq.heappushpop(self._heap, item)

    def marks(self) -> tuple[CheckpointMark, ...]:
        return tuple(m for _, _, m in sorted(self._heap))


def of_workload(
    marks: Iterable[CheckpointMark], workload: str, namespace: str | None
) -> list[CheckpointMark]:
    """The workload's marks (its pods are named after it), oldest first."""
    mine = [
        m
        for m in marks
        if m.pod is not None
        and named_after(m.pod, workload)
        and (not namespace or m.namespace in (None, namespace))
    ]
    return sorted(mine, key=lambda m: m.at)


def _text(entry: Mapping[str, Any]) -> str | None:
    text = entry.get("textPayload")
    if isinstance(text, str):
        return text
    payload = entry.get("jsonPayload")
    if isinstance(payload, Mapping):
        message = payload.get("message") or payload.get("msg")
        return message if isinstance(message, str) else None
    return None


def _map(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _str(value: object) -> str | None:
    return value if isinstance(value, str) and value else None
