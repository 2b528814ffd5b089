"""Where the templates and migrations are, in a source checkout and in an installed wheel alike."""

from __future__ import annotations

from pathlib import Path

_ROOT = Path(__file__).resolve().parents[1]


def resource_dir(name: str) -> Path:
    """The folder ``templates``, ``migrations`` or ``locale``.

    A wheel ships them as ``papertrail/_data/<name>`` (see pyproject.toml); a checkout or an editable
    install has them at the top of the repository.
    """
    for candidate in (_ROOT / "papertrail" / "_data" / name, _ROOT / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"cannot find the {name!r} folder next to {_ROOT}; reinstall PaperTrail")
