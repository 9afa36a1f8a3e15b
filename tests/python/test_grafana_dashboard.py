# tests/python/test_grafana_dashboard.py -- the dashboard parses, is well-formed, and only queries
# metric families the exporter serves (taken from the exporter's golden exposition, which renders
# every family).
from __future__ import annotations

import json
import re

from _exporter_paths import DATA, ROOT

DASHBOARD = ROOT / "contrib" / "grafana" / "vramscope.json"
EXPOSITION = DATA / "golden" / "exporters" / "prometheus_rich.prom"


def served_families() -> set:
    return {line.split()[2] for line in EXPOSITION.read_text().splitlines() if line.startswith("# TYPE ")}


def all_panels(dashboard):
    for panel in dashboard["panels"]:
        yield panel
        yield from panel.get("panels", [])


def test_every_query_names_a_served_family():
    dashboard = json.loads(DASHBOARD.read_text())
    families = served_families()
    assert "vramscope_gpu_memory_used_bytes" in families
    queried = set()
    expressions = [t["expr"] for p in all_panels(dashboard) for t in p.get("targets", [])]
    expressions += [v["definition"] for v in dashboard["templating"]["list"] if v["type"] == "query"]
    assert expressions
    for expr in expressions:
        names = set(re.findall(r"\bvramscope_[a-z0-9_]+", expr))
        assert names, expr
        queried |= names
    assert queried <= families, queried - families
    # The headline families are all charted.
    assert {"vramscope_gpu_memory_used_bytes", "vramscope_process_gpu_memory_used_bytes",
            "vramscope_torch_allocated_bytes", "vramscope_torch_reserved_bytes"} <= queried


def test_dashboard_model_is_well_formed():
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["id"] is None and 8 <= len(dashboard["uid"]) <= 40
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    assert variables["instance"]["multi"] and variables["instance"]["includeAll"]
    ids = [p["id"] for p in all_panels(dashboard)]
    assert len(ids) == len(set(ids))
    stacked = 0
    for panel in all_panels(dashboard):
        assert panel["type"] != "graph", "deprecated panel type"
        grid = panel["gridPos"]
        assert 0 <= grid["x"] and grid["x"] + grid["w"] <= 24
        if panel["type"] == "row":
            continue
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        for target in panel["targets"]:
            assert 'instance=~"$instance"' in target["expr"]
        unit = panel["fieldConfig"]["defaults"]["unit"]
        if panel["type"] == "timeseries":
            assert unit in ("bytes", "percentunit")
            stacked += panel["fieldConfig"]["defaults"]["custom"]["stacking"]["mode"] == "normal"
    assert stacked >= 2


def test_provisioning_example_is_complete():
    text = (ROOT / "contrib" / "grafana" / "provisioning.yaml").read_text()
    assert "apiVersion: 1" in text and "type: file" in text and "path:" in text


def test_every_query_is_valid_promql(tmp_path):
    import shutil
    import subprocess

    import pytest

    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool not installed (Debian package prometheus)")
    dashboard = json.loads(DASHBOARD.read_text())
    rules = []
    for i, panel in enumerate(all_panels(dashboard)):
        for target in panel.get("targets", []):
            expr = (target["expr"].replace("$instance", ".*").replace("$gpu", ".*").replace("$__range", "1h"))
            rules.append({"record": f"vramscope:check_{i}_{target['refId'].lower()}", "expr": expr})
    path = tmp_path / "rules.json"  # YAML is a superset of JSON
    path.write_text(json.dumps({"groups": [{"name": "dashboard", "rules": rules}]}))
    result = subprocess.run([promtool, "check", "rules", str(path)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
