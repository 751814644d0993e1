"""Type-check a Grafana dashboard JSON against Grafana's own published schema (`@grafana/schema`).

Grafana is not in Debian's archive and no image registry is reachable here, so the dashboard
cannot be loaded into a running Grafana. What Grafana itself publishes is the schema its
dashboards are generated from: `@grafana/schema` on npm, TypeScript types for the dashboard
(`Dashboard`, `Panel`, template variables, ...) and for each panel plugin's `options`. This
script writes the dashboard as a typed TypeScript literal, each panel's `options` typed by its
plugin's `Options`, and runs the TypeScript compiler: a misspelt field, a wrong value type, a
missing required field or an unknown panel type fails, with the compiler's line.

    python scripts/check_grafana_dashboard.py docs/grafana/cpfleet-dashboard.json

The two npm packages are installed once (pinned) into ``--cache`` (default
``~/.cache/cpfleet/grafana-schema``); needs node and npm on PATH and the npm registry.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

SCHEMA = "@grafana/schema@13.2.3"
TYPESCRIPT = "typescript@5.9.3"
RAW = "@grafana/schema/dist/esm/raw"
# panel type -> the module whose `Options` types that panel's `options`
PANEL_OPTIONS = {
    "timeseries": f"{RAW}/composable/timeseries/panelcfg/x/TimeSeriesPanelCfg_types.gen",
    "stat": f"{RAW}/composable/stat/panelcfg/x/StatPanelCfg_types.gen",
    "bargauge": f"{RAW}/composable/bargauge/panelcfg/x/BarGaugePanelCfg_types.gen",
    "table": f"{RAW}/composable/table/panelcfg/x/TablePanelCfg_types.gen",
    "gauge": f"{RAW}/composable/gauge/panelcfg/x/GaugePanelCfg_types.gen",
    "text": f"{RAW}/composable/text/panelcfg/x/TextPanelCfg_types.gen",
}
TSCONFIG = {
    "compilerOptions": {
        "strict": True, "noEmit": True, "moduleResolution": "bundler", "module": "esnext",
        "target": "es2020", "skipLibCheck": True,
    },
    "files": ["check.ts"],
}


class CheckError(Exception):
    """The dashboard does not match Grafana's schema, or the checker cannot run."""


def ensure_packages(cache: Path) -> Path:
    """The cache folder with `@grafana/schema` and `typescript` installed in it."""
    marker = cache / "node_modules" / ".cpfleet-pins"
    pins = f"{SCHEMA} {TYPESCRIPT}"
    if marker.is_file() and marker.read_text() == pins:
        return cache
    npm = shutil.which("npm")
    if npm is None:
        raise CheckError("npm is not on PATH: install node and npm (Debian: apt-get install nodejs npm)")
    cache.mkdir(parents=True, exist_ok=True)
    (cache / "package.json").write_text('{"name": "cpfleet-grafana-check", "private": true}\n')
    proc = subprocess.run([npm, "install", "--no-audit", "--no-fund", "--silent", SCHEMA, TYPESCRIPT],
                          cwd=cache, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise CheckError(f"npm install {pins} failed: {proc.stderr.strip()[-2000:]}")
    marker.write_text(pins)
    return cache


def typescript_source(dashboard: dict[str, object]) -> str:
    """The dashboard as typed literals: the whole as `Dashboard`, each panel's options by its plugin."""
    panels = dashboard.get("panels")
    if not isinstance(panels, list):
        raise CheckError("the dashboard has no `panels` list")
    lines = [f"import type {{ Dashboard }} from '{RAW}/dashboard/x/Dashboard_types.gen';"]
    used: dict[str, str] = {}
    for panel in panels:
        kind = panel.get("type") if isinstance(panel, dict) else None
        if kind == "row":
            continue
        if kind not in PANEL_OPTIONS:
            raise CheckError(f"panel {panel.get('id') if isinstance(panel, dict) else panel!r}: "
                             f"panel type {kind!r} is not one this check knows ({', '.join(PANEL_OPTIONS)})")
        used.setdefault(kind, f"Options_{kind}")
    for kind, alias in used.items():
        lines.append(f"import type {{ Options as {alias} }} from '{PANEL_OPTIONS[kind]}';")
    # TypeScript's string enums are nominal: JSON's "basic" is not assignable to the enum member
    # BarGaugeDisplayMode.Basic whose value is "basic". Grafana reads the JSON's strings, so each
    # string enum is compared by its values: `${T}` turns an enum type into the union of them.
    lines.append("type Loose<T> = T extends string ? `${T}` : T extends number | boolean | null | undefined ? T"
                 " : T extends object ? { [K in keyof T]: Loose<T[K]> } : T;")
    lines.append(f"export const dashboard: Loose<Dashboard> = {json.dumps(dashboard, indent=2)};")
    for n, panel in enumerate(panels):
        if panel.get("type") == "row":
            continue
        alias = used[panel["type"]]
        options = json.dumps(panel.get("options", {}), indent=2)
        lines.append(f"// panel {panel.get('id')}: {panel.get('title')}")
        lines.append(f"export const options_{n}: Partial<Loose<{alias}>> = {options};")
    return "\n".join(lines) + "\n"


def check(dashboard_path: Path, cache: Path) -> None:
    try:
        dashboard = json.loads(dashboard_path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise CheckError(f"{dashboard_path}: {e}") from e
    if not isinstance(dashboard, dict):
        raise CheckError(f"{dashboard_path}: not a JSON object")
    root = ensure_packages(cache)
    (root / "check.ts").write_text(typescript_source(dashboard))
    (root / "tsconfig.json").write_text(json.dumps(TSCONFIG))
    tsc = root / "node_modules" / "typescript" / "bin" / "tsc"
    node = shutil.which("node")
    if node is None:
        raise CheckError("node is not on PATH")
    proc = subprocess.run([node, str(tsc), "-p", "tsconfig.json"], cwd=root, capture_output=True,
                          text=True, timeout=300)
    if proc.returncode != 0:
        raise CheckError(f"{dashboard_path} does not match Grafana's schema ({SCHEMA}):\n"
                         f"{(proc.stdout + proc.stderr).strip()}\n(line numbers are in {root / 'check.ts'})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dashboard", type=Path, help="the dashboard JSON file")
    parser.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "cpfleet" / "grafana-schema",
                        help="where the npm packages are installed (default: %(default)s)")
    args = parser.parse_args(argv)
    try:
        check(args.dashboard, args.cache)
    except CheckError as e:
        print(f"check_grafana_dashboard: {e}", file=sys.stderr)
        return 1
    print(f"{args.dashboard}: matches Grafana's dashboard schema ({SCHEMA})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
