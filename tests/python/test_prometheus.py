# tests/python/test_prometheus.py -- the exporter checked by promtool and scraped by a real Prometheus
#
# The exporter samples the NVML test double (8 GPUs x 64 processes); the fixture server adds agent
# families. Every wait is a bounded poll; every process started here is stopped here.
from __future__ import annotations

import contextlib
import json
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest

from _exporter_paths import (
    cli_binary,
    double_env,
    fixture_binary,
    free_port,
    nvml_double,
    read_line_matching,
    stop,
    which,
)

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def needs_exporter():
    if cli_binary() is None:
        pytest.skip("vramscope binary not built (VRAMSCOPE_CLI or build/dev/cli/vramscope)")
    if nvml_double() is None:
        pytest.skip("NVML test double not built (VRAMSCOPE_TEST=ON)")


@pytest.fixture
def exporter(tmp_path):
    """Starts `vramscope exporter` on a free loopback port; yields (port, extra-args starter)."""
    needs_exporter()
    started = []

    def start(*args: str, script: str = "eight_gpus_64_procs.json"):
        proc = subprocess.Popen([str(cli_binary()), "exporter", "--listen", "127.0.0.1:0", "--interval", "200ms",
                                 *args],
                                env=double_env(script, tmp_path), stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)
        started.append(proc)
        match = read_line_matching(proc, proc.stderr, r"serving http://127\.0\.0\.1:(\d+)/metrics")
        return proc, int(match.group(1))

    yield start
    for proc in started:
        assert stop(proc) == 0, "exporter must exit 0 on SIGTERM"


@pytest.fixture
def fixture_server():
    binary = fixture_binary()
    if binary is None:
        pytest.skip("exporters_fixture not built (VRAMSCOPE_TEST=ON)")
    proc = subprocess.Popen([str(binary), "serve"], stdout=subprocess.PIPE, text=True)
    port = int(read_line_matching(proc, proc.stdout, r"port (\d+)").group(1))
    yield port
    assert stop(proc) == 0


def scrape(port: int, path: str = "/metrics"):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as response:
        return response.headers.get("Content-Type"), response.read().decode("utf-8")


def families(body: str) -> set:
    return {line.split()[2] for line in body.splitlines() if line.startswith("# TYPE ")}


def promtool_check(body: str):
    promtool = which("promtool")
    if promtool is None:
        pytest.skip("promtool not installed (Debian package prometheus; tools/install-deps.sh installs it)")
    result = subprocess.run([promtool, "check", "metrics"], input=body, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == "" and result.stderr.strip() == ""


def test_live_exposition_passes_promtool(exporter):
    _, port = exporter()
    content_type, body = scrape(port)
    assert content_type == CONTENT_TYPE
    assert body.endswith("\n")
    promtool_check(body)
    assert "vramscope_up 1" in body.splitlines()
    process_series = [line for line in body.splitlines() if line.startswith("vramscope_process_gpu_memory_used_bytes{")]
    assert len(process_series) > 8
    assert len([line for line in body.splitlines() if line.startswith("vramscope_gpu_memory_total_bytes{")]) == 8


def test_agent_families_pass_promtool(fixture_server):
    _, body = scrape(fixture_server)
    assert {"vramscope_torch_allocated_bytes", "vramscope_torch_ooms_total", "vramscope_torch_step",
            "vramscope_category_bytes"} <= families(body)
    categories = [line for line in body.splitlines() if line.startswith("vramscope_category_bytes{")]
    assert len(categories) == 6, categories  # rank 0 tracks categories, rank 1 does not
    assert all('rank="0"' in line for line in categories)
    promtool_check(body)


def test_landing_page_and_unknown_paths(exporter):
    _, port = exporter()
    content_type, page = scrape(port, "/")
    assert content_type.startswith("text/html") and 'href="/metrics"' in page
    with pytest.raises(urllib.error.HTTPError) as error:
        scrape(port, "/nothing")
    assert error.value.code == 404


def test_no_per_process_drops_only_the_per_pid_family(exporter):
    _, port = exporter("--no-per-process")
    _, body = scrape(port)
    assert "vramscope_process_gpu_memory_used_bytes" not in body
    assert "vramscope_gpu_processes{" in body


def test_port_in_use_and_bad_listen_are_clear_errors(exporter, tmp_path):
    _, port = exporter()
    env = double_env("two_gpus.json", tmp_path)
    taken = subprocess.run([str(cli_binary()), "exporter", "--listen", f"127.0.0.1:{port}"], env=env,
                           capture_output=True, text=True, timeout=30)
    assert taken.returncode == 1
    assert "in use" in taken.stderr and f"127.0.0.1:{port}" in taken.stderr
    for bad in ("127.0.0.1:99999", "127.0.0.1:http", ":8726"):
        result = subprocess.run([str(cli_binary()), "exporter", "--listen", bad], env=env,
                                capture_output=True, text=True, timeout=30)
        assert result.returncode == 2, (bad, result.stderr)
        assert "--listen" in result.stderr
    result = subprocess.run([str(cli_binary()), "exporter", "--interval", "1ms"], env=env,
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 2 and "--interval" in result.stderr


def query(prometheus_port: int, promql: str):
    url = f"http://127.0.0.1:{prometheus_port}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
    with urllib.request.urlopen(url, timeout=10) as response:
        answer = json.load(response)
    assert answer["status"] == "success", answer
    return answer["data"]["result"]


@contextlib.contextmanager
def prometheus_scraping(target_port: int, tmp_path):
    """A real Prometheus scraping 127.0.0.1:target_port every second; yields its web port."""
    prometheus = which("prometheus")
    if prometheus is None:
        pytest.skip("prometheus not installed (Debian package prometheus; tools/install-deps.sh installs it)")
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
        "scrape_configs:\n  - job_name: vramscope\n"
        f"    static_configs:\n      - targets: ['127.0.0.1:{target_port}']\n")
    web_port = free_port()
    server = subprocess.Popen([prometheus, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                               f"--web.listen-address=127.0.0.1:{web_port}", "--log.level=warn"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        yield web_port
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def poll_query(web_port: int, promql: str, done) -> list:
    """Queries until done(result) or 60 s passed; returns the last result."""
    result: list = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            result = query(web_port, promql)
        except (OSError, urllib.error.URLError):
            pass  # Prometheus still starting
        if done(result):
            break
        time.sleep(0.25)  # poll interval of a bounded wait, not a synchronization guess
    return result


def test_a_real_prometheus_scrapes_the_exporter(exporter, tmp_path):
    _, port = exporter()
    _, body = scrape(port)
    expected_total = {}
    for line in body.splitlines():
        if line.startswith("vramscope_gpu_memory_total_bytes{"):
            gpu = line.split('gpu="')[1].split('"')[0]
            expected_total[gpu] = float(line.rsplit(" ", 1)[1])
    expected_processes = sum(1 for line in body.splitlines()
                             if line.startswith("vramscope_process_gpu_memory_used_bytes{"))

    with prometheus_scraping(port, tmp_path) as web_port:
        totals = poll_query(web_port, "vramscope_gpu_memory_total_bytes",
                            lambda result: len(result) == len(expected_total))
        processes = poll_query(web_port, "count(vramscope_process_gpu_memory_used_bytes)", bool)
        up = query(web_port, 'up{job="vramscope"}')
        assert up and up[0]["value"][1] == "1", "Prometheus marked the target down"
        assert {r["metric"]["gpu"]: float(r["value"][1]) for r in totals} == expected_total
        assert int(processes[0]["value"][1]) == expected_processes
        assert all(r["metric"]["job"] == "vramscope" for r in totals)


def test_a_real_prometheus_reads_the_category_breakdown(fixture_server, tmp_path):
    _, body = scrape(fixture_server)
    expected = {line.split('category="')[1].split('"')[0]: float(line.rsplit(" ", 1)[1])
                for line in body.splitlines() if line.startswith("vramscope_category_bytes{")}
    assert len(expected) == 6, body
    with prometheus_scraping(fixture_server, tmp_path) as web_port:
        result = poll_query(web_port, "vramscope_category_bytes", lambda r: len(r) == 6)
        assert {r["metric"]["category"]: float(r["value"][1]) for r in result} == expected
        assert {r["metric"]["rank"] for r in result} == {"0"}
        share = query(web_port, 'sum(vramscope_category_bytes{category="optimizer_state"}) '
                                '/ sum(vramscope_category_bytes)')
        assert float(share[0]["value"][1]) == pytest.approx(expected["optimizer_state"] / sum(expected.values()))
