"""The task as a result recorded it: typed for reading, kept as stored for writing.

A result outlives the rules it ran under. A run saved before a field existed (``rest_s``) must read
as "not recorded", not as today's default; a knob value, field or kernel that today's ``TaskSpec``
refuses must never make a saved result unreadable. So a ``RecordedTask`` reads each field it can
as the JSON type ``TaskSpec`` dumps it as, with no range or domain checks, leaves a field the record
lacks (or holds in a form no version wrote) at None, keeps keys it does not know, and writes back
exactly the record it read: the same keys, in the same order, with the same values. Today's rules
apply only when the record is to run again (``to_task``).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    PrivateAttr,
    ValidationError,
    ValidatorFunctionWrapHandler,
    model_serializer,
    model_validator,
)

if TYPE_CHECKING:
    from typing_extensions import Self

    from engine.task import TaskSpec


class RecordedTask(BaseModel):
    """A result's task. Each field is ``TaskSpec``'s of the same name as it was recorded, or None
    where the record does not hold it readably; enums (dtype, backend, fault) read as their text.
    Unknown keys (a field since removed) are kept in ``model_extra``. Build one for a new result
    with ``RecordedTask.of(task)``."""

    model_config = ConfigDict(frozen=True, extra="allow")

    kernel: str | None = None
    """Kernel name."""
    kernel_file: str | None = None
    """A user kernel's spec file."""
    shape: dict[str, int] | None = None
    """Problem dimensions by name (a run records the kernel's names: m, n, k for a GEMM)."""
    dtype: str | None = None
    """Element type, as text (bf16, fp16, fp32, tf32)."""
    block_size: str | None = None
    """BLOCK_SIZE that ran (None: not recorded, or the kernel's default when the task left it unset)."""
    memory_pipelining: int | None = None
    """MEMORY_PIPELINING that ran: 0 = off, else the number of async-copy stages."""
    schedule: dict[str, str | int] | None = None
    """Schedule choices beyond BLOCK_SIZE and MEMORY_PIPELINING."""
    fusion: bool | None = None
    """Whether the epilogue was fused into the kernel."""
    warmup: int | None = None
    """Untimed launches before measuring."""
    iterations: int | None = None
    """Timed launches."""
    energy_s: float | None = None
    """Seconds of launches for board power and energy (0 = off)."""
    rest_s: float | None = None
    """Seconds of rest before each timed implementation (None: recorded before the field existed,
    when no rest was taken)."""
    device: int | None = None
    """GPU index."""
    backend: str | None = None
    """Backend asked for, as text (auto, cuda, sim)."""
    verify: bool | None = None
    """Whether the output was checked against a reference."""
    peers: bool | None = None
    """Whether peer implementations were timed."""
    seed: int | None = None
    """Seed of the inputs and the simulated device's noise."""
    timeout_s: float | None = None
    """Wall-clock limit of the run, in seconds."""
    fault: str | None = None
    """Fault injected, as text ('none' for none)."""

    _stored: dict[str, Any] = PrivateAttr(default_factory=dict)
    """The record as read: what the result writes back."""

    @model_validator(mode="wrap")
    @classmethod
    def _lenient(cls, data: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        """Read what can be read; a field whose value is of no type the field takes is left unset
        (None) rather than failing the result that carries it."""
        if isinstance(data, RecordedTask) or not isinstance(data, Mapping):
            return handler(data)
        readable = dict(data)
        while True:
            try:
                task = handler(readable)
                break
            except ValidationError as exc:
                bad = {e["loc"][0] for e in exc.errors() if e["loc"]} & set(cls.model_fields) & set(readable)
                if not bad:
                    raise
                readable = {k: v for k, v in readable.items() if k not in bad}
        task._stored = copy.deepcopy(dict(data))
        return task

    @model_serializer(mode="plain")
    def _as_stored(self) -> dict[str, Any]:
        return self._stored

    @classmethod
    def of(cls, task: TaskSpec, **recorded: Any) -> RecordedTask:
        """``task`` as a result records it (its JSON form), with ``recorded``'s values in place of
        the task's (e.g. the shape under the kernel's own dimension names)."""
        return cls.model_validate(task.model_dump(mode="json") | recorded)

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """A copy; with ``update``, the record with those keys replaced, read again (a plain copy
        with updated fields would write back the old record)."""
        if update:
            return self.model_validate({**self._stored, **update})
        return super().model_copy(deep=deep)

    @property
    def knobs(self) -> dict[str, Any]:
        """BLOCK_SIZE, MEMORY_PIPELINING and fusion as recorded (None where not)."""
        return {"block_size": self.block_size, "memory_pipelining": self.memory_pipelining, "fusion": self.fusion}

    def to_task(self) -> TaskSpec:
        """Today's ``TaskSpec`` for this record, to run it again: fields it does not record take
        today's defaults. InputError naming each field today's rules refuse (a field since removed,
        a knob value no longer allowed); a kernel that is gone is ``prepare``'s to name, as for any
        task."""
        from engine.errors import InputError
        from engine.task import TaskSpec, _format_validation_error

        try:
            return TaskSpec.model_validate(self._stored)
        except ValidationError as exc:
            raise InputError(_format_validation_error(exc, "recorded task"),
                             fix="change the fields named (tui bench --help lists today's), then run it") from None
