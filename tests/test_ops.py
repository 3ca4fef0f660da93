"""The operations assets of ops/ (issue 35 item 5), checked without a running sync:

* ops/prometheus/sync-rules.yml passes ``promtool check rules``, and its unit tests
  (ops/prometheus/sync-rules.test.yml: each alert fires on series bad past its ``for:`` and not
  on others) pass ``promtool test rules``; a rule changed so that it fires later, or not at
  all, makes them fail;
* every query of the Grafana dashboard (ops/grafana/sync-dashboard.json) is PromQL that promtool
  parses, naming only ``migrator_sync_*`` metrics, and the dashboard is well formed (unique
  panel ids, every panel on the 24-column grid, the data source a variable);
* ``promtool check metrics`` finds nothing to lint in what sync's exporter serves;
* tests/promql.py, which reads the metric names out of those queries, on its own.

promtool is Debian 12's (``scripts/promtool.sh fetch``: downloaded once into the cache, nothing
installed); where it cannot be had the tests that run it skip saying why, or fail under
``MIGRATOR_REQUIRE_SERVICES=1`` (CI, whose .ci/run fetches it first). That the names are served
by a live sync: tests/sync/test_ops_live.py."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.promql import PromQLError, as_promql, exported, families, grafana_queries, metric_names
from tests.services import REQUIRE_ENV, services_required

REPO = Path(__file__).resolve().parent.parent
OPS = REPO / "ops"
RULES = OPS / "prometheus" / "sync-rules.yml"
RULE_TESTS = OPS / "prometheus" / "sync-rules.test.yml"
DASHBOARD = OPS / "grafana" / "sync-dashboard.json"


@pytest.fixture(scope="session")
def promtool() -> str:
    """promtool's path: scripts/promtool.sh fetch (downloads once, then reuses the cache)."""
    try:
        done = subprocess.run(["bash", str(REPO / "scripts" / "promtool.sh"), "fetch"],
                              capture_output=True, text=True, timeout=600)  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as e:
        done = subprocess.CompletedProcess([], 1, "", str(e))
    if done.returncode != 0 or not done.stdout.strip():
        reason = f"no promtool: scripts/promtool.sh fetch failed: {done.stderr.strip()[-400:]}"
        if services_required():
            pytest.fail(f"{reason} [{REQUIRE_ENV}=1: a missing tool is a failure]", pytrace=False)
        pytest.skip(reason)
    return done.stdout.strip()


def run(promtool: str, *args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run([promtool, *args], capture_output=True, text=True, cwd=cwd, timeout=120)


# -- the alert rules ----------------------------------------------------------------------------


def test_promtool_checks_the_rules(promtool: str) -> None:
    done = run(promtool, "check", "rules", str(RULES))
    assert done.returncode == 0, done.stdout + done.stderr
    alerts = [r["alert"] for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]
    assert f"SUCCESS: {len(alerts)} rules found" in done.stdout
    assert alerts == ["MigratorSyncDown", "MigratorSyncLagging", "MigratorSyncUnhealthy",
                      "MigratorSyncRetrying"]  # fmt: skip


def test_the_rules_unit_tests_pass_and_test_every_alert(promtool: str) -> None:
    done = run(promtool, "test", "rules", str(RULE_TESTS))
    assert done.returncode == 0 and "SUCCESS" in done.stdout, done.stdout + done.stderr
    tests = yaml.safe_load(RULE_TESTS.read_text())
    assert tests["rule_files"] == [RULES.name]
    alerts = {r["alert"] for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]}
    firing, quiet = set(), set()  # alerts expected to fire, and expected not to, at some time
    for case in tests["tests"]:
        for check in case["alert_rule_test"]:
            (firing if check["exp_alerts"] else quiet).add(check["alertname"])
    assert firing == alerts and quiet == alerts


@pytest.mark.parametrize(
    "change",
    [
        ("migrator_sync_lag_seconds > 30", "migrator_sync_lag_seconds > 50"),  # never fires
        ("for: 2m", "for: 3m"),  # Down and Unhealthy fire a minute later
        ("> 0 or increase", "> 99 or increase"),  # failures in a row no longer fire
        ("keeps failing and retrying", "keeps failing"),  # another summary
    ],
    ids=["threshold", "for", "or-branch", "annotation"],
)
def test_the_rules_unit_tests_fail_on_a_changed_rule(
    promtool: str, tmp_path: Path, change: tuple[str, str]
) -> None:
    text = RULES.read_text()
    assert change[0] in text
    (tmp_path / RULES.name).write_text(text.replace(change[0], change[1]))
    shutil.copy(RULE_TESTS, tmp_path / RULE_TESTS.name)
    done = run(promtool, "test", "rules", RULE_TESTS.name, cwd=tmp_path)
    assert done.returncode == 1 and "FAILED" in done.stdout + done.stderr, done.stdout


# -- the Grafana dashboard ----------------------------------------------------------------------


def dashboard() -> dict[str, object]:
    return json.loads(DASHBOARD.read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def panels(d: dict[str, object]) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    for p in d["panels"]:  # type: ignore[attr-defined]
        out += [p, *p.get("panels", [])]
    return out


def test_the_dashboard_is_well_formed() -> None:
    d = dashboard()
    assert d["uid"] == "migrator-sync" and d["title"] == "migrator sync"
    ps = panels(d)
    ids = [p["id"] for p in ps]
    assert len(ids) == len(set(ids)), ids
    cells: set[tuple[int, int]] = set()
    for p in ps:
        g = p["gridPos"]
        assert isinstance(g, dict) and g["x"] >= 0 and g["x"] + g["w"] <= 24, p["title"]
        mine = {
            (x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])
        }
        assert not mine & cells, f"panel {p['title']!r} overlaps another"
        cells |= mine
        if p["type"] == "row":
            continue
        targets = p["targets"]
        assert isinstance(targets, list) and targets, p["title"]
        refs = [t["refId"] for t in targets]
        assert len(refs) == len(set(refs)), p["title"]
        for source in (p["datasource"], *(t["datasource"] for t in targets)):
            assert source == {"type": "prometheus", "uid": "${datasource}"}, p["title"]
        for t in targets:  # every query is limited to the mappings chosen
            assert 'mapping=~"$mapping"' in t["expr"], (p["title"], t["expr"])
    variables = {v["name"]: v for v in d["templating"]["list"]}  # type: ignore[index]
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"


def test_every_dashboard_query_is_promql_naming_sync_metrics(promtool: str, tmp_path: Path) -> None:
    queries = grafana_queries(dashboard())
    assert len(queries) > 20
    for where, expr in queries:
        names = metric_names(expr)
        assert names and all(n.startswith("migrator_sync_") for n in names), (where, names)
    # promtool parses each one (as a recording rule's expression)
    rules = [{"record": f"dashboard:query:{i}", "expr": as_promql(expr)}
             for i, (_, expr) in enumerate(queries)]  # fmt: skip
    path = tmp_path / "dashboard-queries.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    done = run(promtool, "check", "rules", str(path))
    assert done.returncode == 0, done.stdout + done.stderr
    # and the check can fail: a query that is not PromQL is reported
    bad = {"record": "bad", "expr": as_promql("sum by (mapping (migrator_sync_lag_seconds)")}
    path.write_text(yaml.safe_dump({"groups": [{"name": "d", "rules": [bad]}]}))
    assert run(promtool, "check", "rules", str(path)).returncode == 1


# -- what sync serves ---------------------------------------------------------------------------


def test_promtool_finds_nothing_to_lint_in_what_sync_serves(promtool: str) -> None:
    """``promtool check metrics`` (naming, units, help texts, counters' _total) on /metrics
    of sync's exporter: every family is declared there from the start, samples or not."""
    import urllib.request

    from migrator.source.binlog.reader import BinlogPosition
    from migrator.sync.exporter import MetricsServer
    from migrator.sync.figures import SyncFigures

    figures = SyncFigures()
    figures.following(BinlogPosition("mysql-bin.000001", 4))
    server = MetricsServer("127.0.0.1:0", figures, "shop")
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/metrics", timeout=5) as r:
            text = r.read().decode()
    finally:
        server.close()
    assert len(families(text)) >= 20
    done = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True,
                          text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0 and not done.stdout + done.stderr, done.stdout + done.stderr
    # and it can fail: a counter without _total, a name in camelCase
    bad = "# HELP x_y a\n# TYPE x_y counter\nx_y 1\n# HELP xY b\n# TYPE xY gauge\nxY 1\n"
    done = subprocess.run([promtool, "check", "metrics"], input=bad, capture_output=True,
                          text=True, timeout=60)  # fmt: skip
    assert done.returncode != 0 and "_total" in done.stdout + done.stderr


# -- tests/promql.py ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expr", "names"),
    [
        ("up", {"up"}),
        ('up{job="x"} == 0', {"up"}),
        ("sum by (mapping, table) (rate(a_total[5m]))", {"a_total"}),
        ("sum(rate(a_total[$__rate_interval])) by (job) / sum(b)", {"a_total", "b"}),
        ("histogram_quantile(0.99, sum by (le) (rate(h_bucket[5m])))", {"h_bucket"}),
        ("a * on(instance) group_left(version) b_info", {"a", "b_info"}),
        ("a * on (instance) group_right c", {"a", "c"}),
        ("a > bool 3 and b unless c or d", {"a", "b", "c", "d"}),
        ('{__name__="x:y", job="j"}', {"x:y"}),
        ("{__name__=~'x.*'} offset 5m", {"x.*"}),  # a regex is returned as written
        ('count_values("v", build_version)', {"build_version"}),
        ("topk(3, a) @ end()", {"a"}),
        ("a @ 1609746000 offset -1h30m", {"a"}),
        ("rate(a[5m])[30m:1m]", {"a"}),
        ("max_over_time(deriv(a[5m])[1h:])", {"a"}),
        ('a{l="}{[]("}', {"a"}),  # brackets inside a string
        ("1 + 2.5e3 * 0x1F - Inf + NaN", set()),
        ("vector(1) + time()", set()),
        ('label_replace(a, "dst", "$1", "src", "(.*)")', {"a"}),
        ("sum without (instance) (a)\n# a comment: b\n+ c", {"a", "c"}),
        ('a{mapping=~"$mapping"} + ${var_ok} * [[old]]', {"a"}),
        ("sum by(mapping)(a)", {"a"}),
        ("quantile(0.5, a)", {"a"}),
        ("group(a) by (x)", {"a"}),
        ("-a", {"a"}),
    ],
)
def test_metric_names(expr: str, names: set[str]) -> None:
    assert metric_names(expr) == names


@pytest.mark.parametrize("expr", ['a{l="x}', "rate(a[5m)", "'open"])
def test_metric_names_unclosed(expr: str) -> None:
    with pytest.raises(PromQLError):
        metric_names(expr)


EXPOSITION = """\
# TYPE c_total counter
c_total{a="1"} 1
# TYPE g gauge
g 1
# TYPE h histogram
h_bucket{le="+Inf"} 1
h_sum 1
h_count 1
# TYPE s summary
s_sum 1
s_count 1
# TYPE quiet_total counter
# TYPE p_info gauge
p_info{file="f"} 1
# TYPE g_count gauge
g_count 2
"""


@pytest.mark.parametrize(
    ("name", "family"),
    [
        ("c_total", "c"), ("c", None), ("c_created", "c"), ("g", "g"), ("g_sum", None),
        ("g_count", "g_count"),  # a gauge of that name, not a count of g
        ("h_bucket", "h"), ("h_sum", "h"), ("h_count", "h"), ("h", None),
        ("s", "s"), ("s_sum", "s"), ("s_count", "s"), ("s_bucket", None),
        ("quiet_total", "quiet"),  # declared, with no sample yet
        ("p_info", "p_info"), ("p", None), ("other", None),
    ],
)  # fmt: skip
def test_exported(name: str, family: str | None) -> None:
    found = exported(name, families(EXPOSITION))
    assert (found.name if found else None) == family


def test_grafana_queries_and_as_promql() -> None:
    d = {
        "panels": [
            {"title": "r", "type": "row", "panels": [{"title": "in", "targets": [
                {"refId": "A", "expr": "rate(a[$__rate_interval])"}]}]},
            {"title": "t", "targets": [{"refId": "A", "expr": "b"}, {"refId": "B"}]},
        ],
        "templating": {"list": [
            {"name": "m", "type": "query", "query": {"query": "label_values(c{x=\"1\"}, m)"}},
            {"name": "n", "type": "query", "query": "query_result(topk(1, d))"},
            {"name": "o", "type": "query", "query": "label_values(job)"},
            {"name": "ds", "type": "datasource", "query": "prometheus"},
        ]},
    }  # fmt: skip
    assert grafana_queries(d) == [
        ("panel 'in' A", "rate(a[$__rate_interval])"),
        ("panel 't' A", "b"),
        ("variable 'm'", 'c{x="1"}'),
        ("variable 'n'", "topk(1, d)"),
    ]
    assert as_promql('rate(a{m=~"$m"}[$__rate_interval]) + ${__range}') == (
        'rate(a{m=~"x"}[5m]) + 5m'
    )
