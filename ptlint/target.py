"""The torch version a project targets when no `torch-version` is set.

As ruff infers `target-version` from `requires-python`: the lowest torch version
the project's declared requirement admits, read from the nearest folder (the
linted file's folder, then its parents up to the repository root) that declares
one in `pyproject.toml` (`[project]` dependencies and optional dependencies),
`requirements*.txt`, `setup.cfg` (`install_requires`, `extras_require`), a
literal `install_requires` / `extras_require` in `setup.py`, Cog's `cog.yaml`
(`build: python_packages:`), or a conda environment file (`environment.yml`, or any
YAML file of an `environment/` folder: `pytorch=1.7.1`, and its `pip:` list); each raised to the
torch release a torchvision requirement of the same list needs, when that is newer. A
requirement with only an upper bound (`torch<2`) gives the installed torch if it admits
that, else the newest release it admits.
Without a
declaration, the installed torch (read from its metadata: torch is never
imported), else the newest version ptlint knows.
"""
from __future__ import annotations

import ast
import functools
import os
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Iterator, NamedTuple

from packaging.version import InvalidVersion, Version

from ptlint.config import tomllib

if TYPE_CHECKING:  # packaging's requirement parser is imported only for a file naming torch
    from packaging.requirements import Requirement
    from packaging.specifiers import SpecifierSet

# The newest torch release the deprecation tables know about.
NEWEST_KNOWN_TORCH = "2.13"
# Releases a requirement's lowest admitted version is looked for among (with the
# versions the requirement itself names).
_RELEASES = [Version(f"1.{m}") for m in range(14)] + [
    Version(f"2.{m}") for m in range(int(NEWEST_KNOWN_TORCH.split(".")[1]) + 1)]
# torchvision 0.(m + 1) is built for torch 1.m (from torchvision 0.5 and torch 1.4 on),
# and 0.(m + 15) for torch 2.m: a project that requires torchvision>=0.13 runs torch 1.12
# or newer, whatever its own requirement on torch admits.
_VISION_RELEASES = [Version(f"0.{m}") for m in range(5, 16 + int(NEWEST_KNOWN_TORCH.split(".")[1]))]


def torch_for_torchvision(vision: Version) -> Version | None:
    """The torch release a torchvision release is built for (None before 0.5)."""
    major, minor = (list(vision.release) + [0])[:2]
    if major != 0 or minor < 5:
        return None
    return Version(f"1.{minor - 1}") if minor < 15 else Version(f"2.{minor - 15}")


Target = tuple[Version, str]  # the version, and where it comes from in words


def target_version(folder: Path, memo: dict[str, Target | None] | None = None) -> Target:
    """The torch version to target for the files of `folder`, and where it comes
    from (for `--show-settings`). `memo` keeps what each folder declares, for a
    run that asks about many folders."""
    declared = declared_version(folder, {} if memo is None else memo)
    if declared is not None:
        return declared
    return installed_or_newest()


@functools.cache
def installed_or_newest() -> Target:
    try:
        installed = Version(Version(_installed_torch() or "").base_version)
    except InvalidVersion:
        return Version(NEWEST_KNOWN_TORCH), "the newest torch version ptlint knows"
    return installed, "the installed torch (no requirement on torch declared)"


def _installed_torch() -> str | None:
    """The installed torch's version, found as importlib.metadata finds it (the
    first `torch-VERSION.dist-info` or `.egg-info` folder on `sys.path`) without
    importing it (some 40 ms of a one-file run); importlib.metadata itself for a
    folder whose name gives no version (`torch.egg-info` of a source build)."""
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:  # a zip file, a folder gone
            continue
        for name in names:
            lower = name.lower()
            if not lower.startswith("torch") or not lower.endswith((".dist-info", ".egg-info")):
                continue
            stem = name.rsplit(".", 1)[0]
            if stem.lower() == "torch":
                from importlib.metadata import PackageNotFoundError, version

                try:
                    return version("torch")
                except PackageNotFoundError:
                    return None
            if stem.lower().startswith("torch-"):
                return stem.split("-")[1]
    return None


def declared_version(folder: Path, memo: dict[str, Target | None]) -> Target | None:
    """The lowest version admitted by the torch requirements of the nearest
    folder that declares any, with a description of the requirement. A torch
    requirement is raised to what a torchvision requirement of the same list
    (file, section or extra) needs, when that is newer: pip installs them
    together. A torchvision requirement alone declares nothing."""
    key = str(folder)
    if key in memo:
        return memo[key]
    torch: list[tuple[Version, str, str]] = []  # (lowest, the requirement, its list)
    vision: dict[str, Target] = {}  # list -> what its torchvision requirements need
    for req, line, source in _requirements(folder):
        if req.name == "torch":
            if (lowest := lowest_admitted(req)) is None:
                continue
            if not any(item.operator in _FLOORS for item in req.specifier):
                # `torch<=2.1.1` sets a ceiling, not a floor: its oldest release is
                # no version the project runs; as with no requirement, the
                # installed torch, or the newest release it admits
                lowest, how = newest_admitted(req)
                line = f"{line}, which sets no lower bound: {how}"
            torch.append((lowest, line, source))
        elif (lowest := lowest_admitted(req, _VISION_RELEASES)) is not None:
            needs = torch_for_torchvision(lowest)
            if needs is not None and (source not in vision or needs > vision[source][0]):
                vision[source] = (needs, line)
    found: list[Target] = []
    for lowest, line, source in torch:
        needs, vision_line = vision.get(source, (lowest, ""))
        found.append((needs, f"{vision_line} ({source}), which needs torch {needs}")
                     if needs > lowest else (lowest, f"{line} ({source})"))
    if found:
        answer: Target | None = min(found, key=lambda pair: pair[0])
    elif (folder / ".git").exists() or folder.parent == folder:
        answer = None  # the repository root, or the file system's: no further
    else:
        answer = declared_version(folder.parent, memo)
    memo[key] = answer
    return answer


_FLOORS = frozenset({">=", ">", "==", "~=", "==="})


def newest_admitted(req: Requirement) -> Target:
    """For a requirement with only an upper bound: the installed torch when it
    admits that, else the newest release (or version it names) it admits."""
    installed = installed_or_newest()[0]
    if req.specifier.contains(installed):
        return installed, "the installed torch"
    return _admitted(req)[-1], "the newest release it admits"


def lowest_admitted(req: Requirement, releases: list[Version] = _RELEASES) -> Version | None:
    """The lowest release (of torch by default, or among `releases`), or version the
    requirement names, that `req` admits; None for a requirement that names no
    version (`torch`, a URL)."""
    admitted = _admitted(req, releases)
    return admitted[0] if admitted else None


def _admitted(req: Requirement, releases: list[Version] = _RELEASES) -> list[Version]:
    """The releases, and versions the requirement names (and the next patch of each,
    for `>v`), that `req` admits, oldest first; [] when it names no version."""
    spec = req.specifier
    if not len(spec):
        return []
    named = set()
    for item in spec:
        try:
            v = Version(item.version.removesuffix(".*"))
        except InvalidVersion:
            continue
        named.add(v)
        major, minor, micro = (list(v.release) + [0, 0])[:3]
        named.add(Version(f"{major}.{minor}.{micro + 1}"))  # for `>v`
    return sorted(v for v in {*releases, *named} if spec.contains(v))


# `torch>=1.13,<3`, `torchvision[extra] == 0.15.*`: the usual requirement, read
# without packaging's full parser (whose import is some 20 ms of a one-file run);
# anything else (markers, URLs, other names) goes to that parser.
_PLAIN = re.compile(r"\s*(?P<name>torch|torchvision)\s*(?:\[[\w\s,.-]*\])?\s*"
                    r"(?P<specifier>(?:===|[<>=!~]=?)[^;@#]*)?", re.I)


class _Plain(NamedTuple):
    """A plain requirement, as much of packaging's `Requirement` as is read here."""

    name: str
    specifier: SpecifierSet


def _torch(lines: Iterable[str], where: str) -> Iterator[tuple[Requirement, str, str]]:
    """The requirements on torch and torchvision among `lines`, each with its line
    and `where` (the list they come from)."""
    for line in lines:
        if "torch" not in line.lower():  # (most lines name something else: not parsed)
            continue
        plain = _PLAIN.fullmatch(line)
        if plain is not None:
            from packaging.specifiers import InvalidSpecifier, SpecifierSet

            try:
                specifier = SpecifierSet(plain["specifier"] or "")
            except InvalidSpecifier:
                continue
            yield _Plain(plain["name"].lower(), specifier), line.strip(), where
            continue
        from packaging import requirements
        from packaging.utils import canonicalize_name

        try:
            req = requirements.Requirement(line)
        except requirements.InvalidRequirement:
            continue
        name = canonicalize_name(req.name)
        if name in ("torch", "torchvision"):
            req.name = name
            yield req, line.strip(), where


def _requirements(folder: Path) -> Iterator[tuple[Requirement, str, str]]:
    """Every requirement on torch or torchvision the files of `folder` declare,
    with its line and the list it is in."""
    yield from _pyproject(folder / "pyproject.toml")
    try:
        listed = sorted(folder.glob("requirements*.txt"))
    except OSError:
        listed = []
    for path in listed:
        lines = _read(path)
        if lines is not None and "torch" in lines:
            yield from _torch(_requirement_lines(lines), str(path))
    yield from _setup_cfg(folder / "setup.cfg")
    yield from _setup_py(folder / "setup.py")
    yield from _cog(folder / "cog.yaml")
    for path in _conda_files(folder):
        yield from _conda(path)


def _conda_files(folder: Path) -> list[Path]:
    """The conda environment files of `folder` (`environment.yml`, `conda_env.yaml`),
    and every YAML file of a sub-folder kept for them (`environment/`, `envs/`,
    `conda/`: `environment/project_env.yaml`)."""
    found = []
    try:
        for path in sorted(folder.iterdir()):
            if _CONDA_FILE.fullmatch(path.name):
                found.append(path)
            elif _CONDA_FOLDER.fullmatch(path.name) and path.is_dir():
                found += sorted(p for p in path.iterdir() if p.suffix in (".yml", ".yaml"))
    except OSError:
        pass
    return found


def _cog(path: Path) -> Iterator[tuple[Requirement, str, str]]:
    """The torch and torchvision of a Cog file (`cog.yaml`, Replicate's): its
    `build: python_packages:` list."""
    data = _yaml(path)
    build = data.get("build") if isinstance(data, dict) else None
    packages = build.get("python_packages") if isinstance(build, dict) else None
    if isinstance(packages, list):
        yield from _torch(_strings(packages), f"{path} python_packages")


def _yaml(path: Path) -> object:
    """The data of a YAML file that mentions torch; None for any other file, or one
    that does not load."""
    text = _read(path)
    if text is None or "torch" not in text:
        return None
    import yaml

    try:
        return yaml.safe_load(text)
    except (yaml.YAMLError, RecursionError, MemoryError):
        return None


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def _requirement_lines(text: str) -> Iterator[str]:
    """A requirements file's requirements: comments, options and line
    continuations handled as pip reads them."""
    for line in text.replace("\\\n", "").splitlines():
        line = line.split(" #", 1)[0].strip()
        if line and not line.startswith(("#", "-")):
            yield line


def _pyproject(path: Path) -> Iterator[tuple[Requirement, str, str]]:
    text = _read(path)
    if text is None or "torch" not in text:
        return
    try:
        project = tomllib.loads(text).get("project")
    except tomllib.TOMLDecodeError:
        return  # the configuration loader reports a broken file
    if not isinstance(project, dict):
        return
    dependencies = project.get("dependencies")
    if isinstance(dependencies, list):
        yield from _torch(_strings(dependencies), f"{path} [project] dependencies")
    extras = project.get("optional-dependencies")
    if isinstance(extras, dict):
        for extra, items in extras.items():
            if isinstance(items, list):
                yield from _torch(_strings(items), f"{path} [project.optional-dependencies] {extra}")


def _strings(items: Iterable[object]) -> list[str]:
    return [item for item in items if isinstance(item, str)]


def _setup_cfg(path: Path) -> Iterator[tuple[Requirement, str, str]]:
    text = _read(path)
    if text is None or "torch" not in text:
        return
    import configparser

    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(text)
    except configparser.Error:
        return
    if parser.has_option("options", "install_requires"):
        yield from _torch(_requirement_lines(parser.get("options", "install_requires")),
                          f"{path} [options] install_requires")
    if parser.has_section("options.extras_require"):
        for extra, value in parser.items("options.extras_require"):
            yield from _torch(_requirement_lines(value), f"{path} [options.extras_require] {extra}")


def _setup_py(path: Path) -> Iterator[tuple[Requirement, str, str]]:
    """`install_requires` and `extras_require` of a `setup(...)` call, when they
    are literals (or names bound to literals at the top of the file)."""
    text = _read(path)
    if text is None or "torch" not in text:
        return
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return
    literals = {target.id: node.value for node in tree.body if isinstance(node, ast.Assign)
                for target in node.targets if isinstance(target, ast.Name)}
    # `setup(...)`, `setuptools.setup(...)`, or the name it is imported as
    # (`from setuptools import setup as install`)
    setups = {"setup"} | {alias.asname for node in ast.walk(tree)
                          if isinstance(node, ast.ImportFrom) and node.module in (
                              "setuptools", "distutils.core")
                          for alias in node.names if alias.name == "setup" and alias.asname}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and getattr(node.func, "id", getattr(
                node.func, "attr", None)) in setups):
            continue
        for keyword in node.keywords:
            if keyword.arg not in ("install_requires", "extras_require"):
                continue
            value = keyword.value
            if isinstance(value, ast.Name):
                value = literals.get(value.id, value)
            try:
                literal = ast.literal_eval(value)
            except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
                continue
            groups = literal.values() if isinstance(literal, dict) else [literal]
            for group in groups:
                if isinstance(group, (list, tuple)):
                    yield from _torch(_strings(group), f"{path} setup({keyword.arg}=...)")


# conda environment files: environment.yml, environment-gpu.yaml, conda_env.yaml, env.yml
_CONDA_FILE = re.compile(r"(environment|conda|env)[\w.-]*\.ya?ml")
_CONDA_FOLDER = re.compile(r"environments?|envs?|conda", re.I)
# conda's names for torch and torchvision (`pytorch-cpu` in its first releases)
_CONDA_NAMES = {"pytorch": "torch", "pytorch-cpu": "torch", "pytorch-gpu": "torch",
                "torch": "torch", "torchvision": "torchvision"}
# a conda match spec: `[channel::]name[ version[ build]]`, the version after `=`, `==`,
# `>=`, ... or a space (`pytorch=1.7.1=py3.7_cuda11.0`, `pytorch::pytorch>=1.8`)
_CONDA_SPEC = re.compile(r"(?:[\w.-]+::)?(?P<name>[\w.-]+)\s*(?P<op>==|>=|<=|!=|=|>|<|\s)?"
                         r"\s*(?P<version>[^\s=]*)(?:[=\s]\S*)?")


def _conda(path: Path) -> Iterator[tuple[Requirement, str, str]]:
    """The torch and torchvision of a conda environment file: its `dependencies`
    (`pytorch=1.7.1`, read as pip's `torch==1.7.1.*`) and their `pip:` list."""
    data = _yaml(path)
    dependencies = data.get("dependencies") if isinstance(data, dict) else None
    if not isinstance(dependencies, list):
        return
    lines = []
    for item in dependencies:
        if isinstance(item, dict) and isinstance(item.get("pip"), list):
            yield from _torch(_strings(item["pip"]), f"{path} pip")
        elif isinstance(item, str) and (line := _conda_requirement(item)) is not None:
            lines.append(line)
    for req, line, where in _torch(lines, f"{path} dependencies"):
        yield req, next(d for d in dependencies if _conda_requirement(str(d)) == line), where


def _conda_requirement(spec: str) -> str | None:
    """A conda match spec on torch or torchvision as a pip requirement: `=1.7` (any
    1.7 release) as `==1.7.*`, a build string left out; None for other packages."""
    match = _CONDA_SPEC.fullmatch(spec.strip().split("[", 1)[0].strip())
    if match is None or (name := _CONDA_NAMES.get(match["name"].lower())) is None:
        return None
    op, version = (match["op"] or "").strip(), match["version"]
    if not version:
        return name
    if op in ("", "="):
        return f"{name}=={version.removesuffix('.*')}.*"
    return f"{name}{op}{version}"
