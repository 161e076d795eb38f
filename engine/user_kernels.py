"""User kernels: spec files (TOML beside a ``.cu`` file) read, checked and registered as kernels.

A spec is loaded from ``--kernel-file PATH.toml`` (or a task's ``kernel_file``), or found by name in
``<config dir>/kernels/*.toml``. Every problem is an InputError (exit 2) naming the file and the
field before anything compiles. Loading registers the spec (``kernels.register_user``), so the
planner, the backends, the tuner, the store and the cockpit use it by name like a built-in one; a
task carries the spec's path (``TaskSpec.kernel_file``), so the engine process loads it too.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from engine.errors import InputError
from engine.paths import config_dir
from engine.reference_trust import is_trusted
from engine.safe_files import read_text
from engine.tomlio import parse_toml, short_repr

MAX_SOURCE_BYTES = 4 * 2**20
FIX = "see examples/kernels/*.toml and the README's 'User kernels' section"
_CACHE: dict[Path, tuple[tuple[Any, ...], Any]] = {}
_UNION_TAGS = {"str", "int", "float", "ConstraintDef"}


def user_kernels_dir() -> Path:
    """The folder whose ``*.toml`` kernel specs are found by name: ``<config dir>/kernels``."""
    return config_dir() / "kernels"


def _stamp(*paths: Path) -> tuple[Any, ...]:
    out: list[Any] = []
    for p in paths:
        try:
            st = p.stat()
            out += [st.st_mtime_ns, st.st_size]
        except OSError:
            out += [None, None]
    return tuple(out)


def _exists(path: Path) -> bool:
    """Whether ``path`` (or a link there) exists; InputError for a name the system cannot even look up
    (longer than 255 bytes a component: 'file name too long')."""
    try:
        os.lstat(path)
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise InputError(f"kernel file {short_repr(str(path))}: {exc.strerror or exc}",
                         fix="file names have at most 255 bytes") from None
    return True


def _read_text(path: Path, spec_path: Path, field: str) -> str:
    if not _exists(path):
        raise InputError(f"kernel file {spec_path}: {field}: no such file {path}",
                         fix=f"{field} is relative to the spec file's folder")
    try:
        return read_text(path, f"kernel file {spec_path}: {field}:", MAX_SOURCE_BYTES)
    except InputError as exc:
        raise InputError(exc.message, fix=exc.fix or FIX) from None


def _field_path(loc: tuple[Any, ...]) -> str:
    parts = [p for p in loc if not (isinstance(p, str) and (p in _UNION_TAGS or "[" in p))]
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


def format_errors(exc: ValidationError, path: Path) -> str:
    """One line per field: 'kernel file X: launch.grid[0]: unknown name TIL (names here: ...)'."""
    from kernels.user_def import ArgDef, ConstraintDef, KnobDef, LaunchDef, ReferenceDef, UserKernelDef

    models: dict[str, Any] = {"": UserKernelDef, "args": ArgDef, "knobs": KnobDef, "launch": LaunchDef,
                              "reference": ReferenceDef, "constraints": ConstraintDef}
    lines: list[str] = []
    for err in exc.errors():
        field = _field_path(err["loc"])
        msg = str(err["msg"]).removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            parent = str(err["loc"][0]) if len(err["loc"]) > 1 else ""
            model = models.get(parent, UserKernelDef)
            msg = f"unknown field (known: {', '.join(model.model_fields)})"
        elif err["type"] == "missing":
            msg = "required field missing"
        line = f"{field}: {msg}" if field else msg
        if line not in lines:
            lines.append(line)
    return f"kernel file {path}: " + "; ".join(lines)


def load_kernel_file(path: str | os.PathLike[str], origin: str = "file", register: bool = True) -> Any:
    """The spec in ``path`` (a UserKernelSpec), registered under its name; InputError naming the file
    and each bad field. Cached while the spec, its source and its reference file are unchanged."""
    from kernels import register_user
    from kernels.user_def import UserKernelDef
    from kernels.user_spec import UserKernelSpec

    spec_path = Path(path).expanduser().absolute()
    if spec_path.suffix.lower() != ".toml":
        raise InputError(f"kernel file {spec_path}: expected a .toml spec file (beside its .cu source)", fix=FIX)
    hit = _CACHE.get(spec_path)
    if hit is not None and hit[0] == _stamp(spec_path, *hit[1].extra_paths):
        spec = hit[1]
    else:
        spec_text = _read_text(spec_path, spec_path, "spec")
        doc = parse_toml(spec_text.removeprefix("\ufeff"), spec_path, "kernel file")
        try:
            defn = UserKernelDef.model_validate(doc)
        except ValidationError as exc:
            raise InputError(format_errors(exc, spec_path), fix=FIX) from None
        source = _read_text(spec_path.parent / defn.source, spec_path, "source")
        ref_text = ""
        if defn.reference.file:
            ref_text = _read_text(spec_path.parent / defn.reference.file, spec_path, "reference.file")
        try:
            spec = UserKernelSpec(defn, spec_path, source, spec_text, ref_text, origin)
        except ValueError as exc:  # the reference expression
            raise InputError(f"kernel file {spec_path}: reference.expr: {exc}", fix=FIX) from None
        extra = [spec.source_path] + ([spec_path.parent / defn.reference.file] if defn.reference.file else [])
        spec.extra_paths = extra
        _CACHE[spec_path] = (_stamp(spec_path, *extra), spec)
    spec.origin = origin if origin == "config" else spec.origin
    spec.reference_trusted = spec.reference_file is not None and is_trusted(spec.reference_sha256)
    if register:
        try:
            register_user(spec)
        except ValueError as exc:
            raise InputError(f"kernel file {spec_path}: name: {exc}") from None
    return spec


def trust_reference(path: str | os.PathLike[str]) -> Any:
    """Trust the reference file of the spec at ``path`` as it reads now (``--trust-reference``);
    the spec, loaded. Nothing to trust for a spec whose reference is an expression."""
    from engine.reference_trust import trust

    spec = load_kernel_file(path)
    if spec.reference_file is not None:
        trust(spec.reference_sha256, spec.reference_file)
        spec.reference_trusted = True
    return spec


def require_trusted_reference(task: Any) -> None:
    """InputError before anything runs when the task would verify against a reference file the
    user has not trusted (a spec is a file people share; its Python must not run unasked)."""
    if not task.kernel_file or not task.verify:
        return
    spec = load_kernel_file(task.kernel_file)
    if spec.reference_file is None or spec.reference_trusted:
        return
    raise InputError(
        f"kernel file {spec.spec_path}: reference.file {spec.reference_file} is Python code, which would run "
        "with your permissions, and you have not trusted it",
        fix=f"read it; then pass --trust-reference (or run `tui kernels --kernel-file {spec.spec_path} "
            f"--trust-reference`), which trusts this content only (sha256 {spec.reference_sha256[:12]}...); "
            "or run without verification (--no-verify)")


def discover() -> tuple[list[Any], list[str]]:
    """(specs, errors) for every ``*.toml`` in ``user_kernels_dir()``: the good ones registered, a
    bad one named with its error (it is skipped, never fatal)."""
    folder = user_kernels_dir()
    specs: list[Any] = []
    errors: list[str] = []
    try:
        files = sorted(p for p in folder.glob("*.toml") if p.is_file())
    except OSError:
        return specs, errors
    seen: dict[str, Path] = {}
    for f in files:
        try:
            spec = load_kernel_file(f, "config", register=False)
            if spec.name in seen:
                raise InputError(f"kernel file {f}: name: {spec.name!r} is also defined by {seen[spec.name]}")
            load_kernel_file(f, "config")
        except InputError as exc:
            errors.append(exc.message)
            continue
        seen[spec.name] = f
        specs.append(spec)
    return specs, errors


def find_in_config(name: str) -> Path | None:
    """The spec file in the config dir that defines kernel ``name`` (``name.toml`` first)."""
    direct = user_kernels_dir() / f"{name}.toml"
    try:
        found = direct.is_file()
    except OSError:  # a name longer than a file name can be: no file defines it
        found = False
    if found:
        try:
            if load_kernel_file(direct, "config", register=False).name == name:
                return direct
        except InputError:
            return direct  # its error is the one to show
    for spec in discover()[0]:
        if spec.name == name:
            return Path(spec.spec_path)
    return None


def kernel_names() -> list[str]:
    """Built-in kernels, then user kernels (those in the config dir found now)."""
    from kernels import kernel_names as known

    discover()
    return known()


def resolve_task_data(data: Mapping[str, Any]) -> Mapping[str, Any]:
    """A task's fields with its user kernel loaded: ``kernel_file`` read (the task's kernel is the
    one it defines), or a kernel name that is no built-in found among those loaded here or in the
    config dir (its file recorded). A task that names another kernel than its ``kernel_file``
    defines runs the kernel it names (the cockpit's form switching kernels); where that kernel is
    unknown, InputError says so. InputError for a bad spec, naming the file and field."""
    from kernels import _USER, builtin_names

    kf = data.get("kernel_file")
    kernel = data.get("kernel")
    mismatch = None
    if isinstance(kf, (str, os.PathLike)) and str(kf).strip():
        try:
            spec = load_kernel_file(str(kf))
        except InputError as exc:  # named by the task's field: 'kernel_file=...: kernel file ...: source: ...'
            raise InputError(f"kernel_file={short_repr(str(kf))}: {exc.message}", fix=exc.fix) from None
        if kernel is None or kernel == spec.name:
            return _with_dtype({**data, "kernel": spec.name, "kernel_file": str(spec.spec_path)}, spec)
        mismatch = InputError(f"kernel={short_repr(kernel)}: the kernel file {kf} defines {spec.name!r}",
                              fix="leave out --kernel, or name the kernel the file defines")
        data = {k: v for k, v in data.items() if k != "kernel_file"}
        if kernel in builtin_names():
            return data
    if isinstance(kernel, str) and kernel and kernel not in builtin_names() and kernel.isidentifier():
        loaded = _USER.get(kernel)  # loaded here before (a task file, --kernel-file): the same file
        path = Path(loaded.spec_path) if loaded is not None else find_in_config(kernel)  # type: ignore[attr-defined]
        if path is not None:
            try:
                spec = load_kernel_file(path, "file" if loaded is not None else "config")
            except InputError as exc:
                raise InputError(f"kernel={short_repr(kernel)}: {exc.message}", fix=exc.fix) from None
            return _with_dtype({**data, "kernel_file": str(spec.spec_path)}, spec)
    if mismatch is not None:
        raise mismatch
    return data


def _with_dtype(data: dict[str, Any], spec: Any) -> dict[str, Any]:
    """A task that names no dtype takes the user kernel's first (the task's default, bf16, may be
    one the kernel does not support)."""
    if data.get("dtype") is None:
        data["dtype"] = spec.dtypes[0]
    return data
