"""Static framework detection: which deep-learning frameworks does a model directory import?

Nothing is imported or run. :func:`detect_frameworks` walks the ``*.py`` files of a model
directory, parses each with :mod:`ast` and records imports of PyTorch and TensorFlow modules,
including ``from x import y``, ``importlib.import_module("x")`` and ``__import__("x")`` with a
string literal. A file that does not parse, cannot be decoded or is too large is skipped with a
note, never an error. Dependency lists (``requirements*.txt``, ``pyproject.toml``) are read as
weaker evidence: they are reported in :attr:`FrameworkScan.declared` but do not count as imports.
"""

from __future__ import annotations

import ast
import os
import re
import tomllib
from collections.abc import Iterator
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from stalwart.environments.images import FrameworkName
from stalwart.errors import EnvironmentResolutionError

__all__ = [
    "DEFAULT_MAX_FILES",
    "DEFAULT_MAX_FILE_BYTES",
    "FrameworkEvidence",
    "FrameworkScan",
    "detect_frameworks",
    "framework_of_module",
    "imports_module",
]

DEFAULT_MAX_FILES = 2000
"""Stop after this many ``*.py`` files (the scan then says it was truncated)."""

DEFAULT_MAX_FILE_BYTES = 2 * 1024 * 1024
"""Skip ``*.py`` files larger than this (generated code, vendored blobs)."""

_MODULES: dict[str, FrameworkName] = {
    "torch": "pytorch",
    "torchvision": "pytorch",
    "torchaudio": "pytorch",
    "pytorch_lightning": "pytorch",
    "lightning": "pytorch",
    "deepspeed": "pytorch",
    "determined.pytorch": "pytorch",
    "stalwart.pytorch": "pytorch",
    "tensorflow": "tensorflow",
    "keras": "tensorflow",
    "tf_keras": "tensorflow",
    "determined.keras": "tensorflow",
    "determined.estimator": "tensorflow",
    "stalwart.keras": "tensorflow",
}

_PACKAGES: dict[str, FrameworkName] = {
    "torch": "pytorch",
    "torchvision": "pytorch",
    "pytorch_lightning": "pytorch",
    "lightning": "pytorch",
    "tensorflow": "tensorflow",
    "tensorflow_cpu": "tensorflow",
    "tensorflow_gpu": "tensorflow",
    "keras": "tensorflow",
    "tf_keras": "tensorflow",
}

_SKIP_DIRS = frozenset({"__pycache__", "site-packages", "dist-packages", "node_modules", "venv"})
_REQUIREMENT_NAME = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def framework_of_module(module: str) -> FrameworkName | None:
    """The framework a dotted module name belongs to (``tensorflow.keras`` -> tensorflow)."""
    parts = module.split(".")
    for i in range(len(parts), 0, -1):
        found = _MODULES.get(".".join(parts[:i]))
        if found is not None:
            return found
    return None


class FrameworkEvidence(BaseModel):
    """One place that shows a framework is used."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    framework: FrameworkName = Field(description="The framework this evidence is for.")
    path: str = Field(description="File path relative to the scanned directory (POSIX).")
    line: int = Field(description="1-based line number.")
    module: str = Field(description="The module imported, or the package declared.")
    kind: str = Field(description="'import' (counts) or 'requirement' (weaker, reported only).")

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.module}"


class FrameworkScan(BaseModel):
    """The result of :func:`detect_frameworks`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    imports: list[FrameworkEvidence] = Field(description="Framework imports found, file order.")
    requirements: list[FrameworkEvidence] = Field(description="Frameworks named in dependencies.")
    files_scanned: int = Field(description="How many *.py files were read (parsed or skipped).")
    truncated: bool = Field(description="True when the scan stopped at the file limit.")
    notes: list[str] = Field(description="Files skipped and why; whether the scan stopped early.")

    @property
    def frameworks(self) -> frozenset[FrameworkName]:
        """Frameworks the code imports (the contract; dependency lists do not count)."""
        return frozenset(e.framework for e in self.imports)

    @property
    def declared(self) -> frozenset[FrameworkName]:
        """Frameworks named in requirements files or pyproject dependencies."""
        return frozenset(e.framework for e in self.requirements)

    def evidence(self, framework: FrameworkName, limit: int = 3) -> list[FrameworkEvidence]:
        """Up to ``limit`` imports of ``framework``, for messages."""
        return [e for e in self.imports if e.framework == framework][:limit]


def _imported_modules(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """Yield ``(line, module)`` for every absolute import and literal dynamic import."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module
            for alias in node.names:
                if alias.name != "*":
                    yield node.lineno, f"{node.module}.{alias.name}"
        elif isinstance(node, ast.Call) and node.args:
            func = node.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
            arg = node.args[0]
            if (
                name in ("import_module", "__import__")
                and isinstance(arg, ast.Constant)
                and isinstance(arg.value, str)
            ):
                yield node.lineno, arg.value


def _python_files(root: Path) -> Iterator[Path]:
    """``*.py`` files under ``root`` in sorted order, skipping hidden dirs, venvs and caches."""
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        dirnames[:] = sorted(
            d
            for d in dirnames
            if not d.startswith(".")
            and d not in _SKIP_DIRS
            and not d.endswith(".egg-info")
            and not (here / d / "pyvenv.cfg").exists()
        )
        for name in sorted(filenames):
            if name.endswith(".py") and not name.startswith("."):
                yield here / name


def _scan_file(path: Path, rel: str, max_bytes: int) -> tuple[list[FrameworkEvidence], str | None]:
    """Evidence from one file, or a note saying why it was skipped."""
    try:
        if path.stat().st_size > max_bytes:
            return [], f"skipped {rel}: larger than {max_bytes} bytes"
        source = path.read_bytes()
        tree = ast.parse(source, filename=rel)
    except SyntaxError as exc:
        return [], f"skipped {rel}: not valid Python (line {exc.lineno}: {exc.msg})"
    except (ValueError, RecursionError, OSError) as exc:
        return [], f"skipped {rel}: cannot parse ({type(exc).__name__})"
    found: list[FrameworkEvidence] = []
    seen: set[tuple[int, FrameworkName]] = set()
    for line, module in _imported_modules(tree):
        framework = framework_of_module(module)
        if framework is not None and (line, framework) not in seen:
            seen.add((line, framework))
            found.append(
                FrameworkEvidence(
                    framework=framework, path=rel, line=line, module=module, kind="import"
                )
            )
    found.sort(key=lambda e: e.line)
    return found, None


def _declared(root: Path) -> list[FrameworkEvidence]:
    """Frameworks named in top-level ``requirements*.txt`` and ``pyproject.toml`` dependencies."""
    entries: list[tuple[str, int, str]] = []
    for req in sorted(root.glob("requirements*.txt")):
        try:
            lines = req.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            continue
        entries += [(req.name, n, text) for n, text in enumerate(lines, 1)]
    pyproject = root / "pyproject.toml"
    if pyproject.is_file():
        text = ""
        try:
            text = pyproject.read_text(encoding="utf-8")
            deps = tomllib.loads(text).get("project", {}).get("dependencies", [])
        except (OSError, tomllib.TOMLDecodeError, AttributeError):
            deps = []
        lines = text.splitlines()
        for dep in (d for d in deps if isinstance(d, str)):
            line = next((n for n, t in enumerate(lines, 1) if dep in t), 1)
            entries.append(("pyproject.toml", line, dep))
    found = []
    for rel, line, spec in entries:
        match = _REQUIREMENT_NAME.match(spec.split("#", 1)[0])
        if match is None:
            continue
        package = match.group(1).lower().replace("-", "_").replace(".", "_")
        framework = _PACKAGES.get(package)
        if framework is not None:
            found.append(
                FrameworkEvidence(
                    framework=framework, path=rel, line=line, module=package, kind="requirement"
                )
            )
    return found


def imports_module(
    model_dir: Path,
    module: str,
    *,
    max_files: int = DEFAULT_MAX_FILES,
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
) -> bool:
    """Whether a Python file under ``model_dir`` imports ``module`` or one of its submodules
    (statically, as :func:`detect_frameworks` reads imports; unreadable files are skipped)."""
    for count, path in enumerate(_python_files(model_dir)):
        if count >= max_files:
            return False
        try:
            if path.stat().st_size > max_file_bytes:
                continue
            tree = ast.parse(path.read_bytes())
        except (SyntaxError, ValueError, RecursionError, OSError):
            continue
        if any(n == module or n.startswith(f"{module}.") for _, n in _imported_modules(tree)):
            return True
    return False


def detect_frameworks(
    model_dir: Path,
    *,
    max_files: int = DEFAULT_MAX_FILES,
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
) -> FrameworkScan:
    """Scan ``model_dir`` (or a single ``.py`` file) for framework imports, without running code.

    Raises EnvironmentResolutionError only when ``model_dir`` does not exist; every per-file
    problem becomes a note instead.
    """
    if model_dir.is_file():
        root, files = model_dir.parent, iter([model_dir])
    elif model_dir.is_dir():
        root, files = model_dir, _python_files(model_dir)
    else:
        raise EnvironmentResolutionError(f"model directory {model_dir} does not exist")
    imports: list[FrameworkEvidence] = []
    notes: list[str] = []
    scanned = 0
    truncated = False
    for path in files:
        if scanned >= max_files:
            truncated = True
            notes.append(f"stopped after {max_files} Python files; the rest were not scanned")
            break
        rel = path.relative_to(root).as_posix()
        found, note = _scan_file(path, rel, max_file_bytes)
        scanned += 1
        imports += found
        if note is not None:
            notes.append(note)
    return FrameworkScan(
        imports=imports,
        requirements=_declared(root) if model_dir.is_dir() else [],
        files_scanned=scanned,
        truncated=truncated,
        notes=notes,
    )
