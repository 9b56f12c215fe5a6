"""Render every value scenario to `<out>/<scenario>.yaml`, for reading and diffing manifests.

    PYTHONPATH=tests .venv/bin/python -m support.render_cli --out out

Each file is the multi-document YAML `helm template` would print, with `# Source:` comments.
A scenario that fails to render is reported and makes the command exit 1, after the others.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import helm_python

from support.paths import VALUES_FIXTURES_DIR
from support.render import to_multidoc
from support.scenarios import load_scenarios
from support.values import InvalidModuleValues


def render_all(out: Path, scenarios_dir: Path = VALUES_FIXTURES_DIR) -> list[str]:
    """Write one file per scenario; return the errors of the scenarios that did not render."""
    out.mkdir(parents=True, exist_ok=True)
    errors: list[str] = []
    for scenario in load_scenarios(scenarios_dir):
        try:
            rendered = scenario.render()
        except (helm_python.HelmError, InvalidModuleValues) as error:
            errors.append(f"{scenario.name}: {error}")
            continue
        header = f"# Scenario {scenario.name}: {' '.join(scenario.description.split())}\n"
        (out / f"{scenario.name}.yaml").write_text(header + to_multidoc(rendered), encoding="utf-8")
    return errors


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out", type=Path, required=True, help="directory for the rendered scenarios")
    parser.add_argument(
        "--scenarios", type=Path, default=VALUES_FIXTURES_DIR, help="directory of scenario files"
    )
    args = parser.parse_args(argv)
    errors = render_all(args.out, args.scenarios)
    for error in errors:
        print(f"error: {error}", file=sys.stderr)
    rendered = len(load_scenarios(args.scenarios)) - len(errors)
    print(f"rendered {rendered} scenario(s) into {args.out}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
