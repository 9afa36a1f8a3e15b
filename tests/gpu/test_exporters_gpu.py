# tests/gpu/test_exporters_gpu.py -- TensorBoard and Prometheus exports of a real training loop
#
# a. Monitor(every=1, tensorboard_dir=...) around a training loop: the event file read back with
#    TensorBoard's EventAccumulator holds exactly mon.history's numbers (as float32), and the
#    printed lines agree with them within their printed precision.
# b. `vramscope exporter` beside a trainer with the agent attached: /metrics, parsed by
#    prometheus_client, carries the trainer's allocated/reserved bytes as the trainer reports
#    them at a pause, and each GPU's total as nvidia-smi reports it.
#
# Run:  pytest tests/gpu/test_exporters_gpu.py   (b also needs VRAMSCOPE_CLI=/path/vramscope or
# vramscope on PATH, nvidia-smi and prometheus_client; it is skipped without them).
from __future__ import annotations

import json
import queue
import re
import shutil
import signal
import struct
import subprocess
import sys
import threading
import time
import urllib.request

import pytest

from conftest import NO_CLI, cli_path, gpu_env

MIB = 1024 * 1024
UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}


def float32(value: int) -> float:
    """What a TensorBoard simple_value holds for an integer byte count."""
    return struct.unpack("f", struct.pack("f", float(value)))[0]


def parse_size(text: str) -> tuple:
    """("1.5 GiB") -> (bytes as printed, half the last printed digit in bytes)."""
    number, unit = text.split()
    scale = UNITS[unit]
    if unit == "B":
        return int(number), 0
    return float(number) * scale, 0.05 * scale


# ----- a. TensorBoard

TRAINER_TB = r"""
import json, sys
import torch, torch.nn as nn
import vramscope

logdir = sys.argv[1]
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(1024, 4096), nn.GELU(), nn.Linear(4096, 4096), nn.GELU(),
                      nn.Linear(4096, 10)).cuda()
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
lines = []
# Batches vary (and are not monotonic) so that step peaks differ from step to step.
batches = [64, 1024, 256, 4096, 128, 2048, 512, 8192, 32, 3072]
with vramscope.Monitor(every=1, devices=[0], tensorboard_dir=logdir, print_fn=lines.append,
                       exit_table_rows=0) as mon:
    for batch in batches:
        x = torch.randn(batch, 1024, device="cuda")
        loss = nn.functional.cross_entropy(model(x), torch.randint(0, 10, (batch,), device="cuda"))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        del x, loss
        torch.cuda.synchronize()
        mon.step()
    writer = type(mon._sinks[0]._writer)
print(json.dumps({
    "writer": writer.__module__ + "." + writer.__name__,
    "lines": lines,
    "history": [{"step": r.step, "device": r.device, "allocated_bytes": r.allocated_bytes,
                 "reserved_bytes": r.reserved_bytes, "peak_allocated_bytes": r.peak_allocated_bytes,
                 "peak_reserved_bytes": r.peak_reserved_bytes,
                 "peak_requested_bytes": r.peak_requested_bytes,
                 "delta_allocated_bytes": r.delta_allocated_bytes} for r in mon.history],
}))
"""

TAG_FIELDS = {
    "allocated_bytes": "allocated_bytes",
    "reserved_bytes": "reserved_bytes",
    "step_peak_allocated_bytes": "peak_allocated_bytes",
    "step_peak_reserved_bytes": "peak_reserved_bytes",
    "step_peak_requested_bytes": "peak_requested_bytes",
}

LINE = re.compile(r"^step (\d+) \| cuda:(\d+) alloc ([\d.]+ \w+), reserved ([\d.]+ \w+), "
                  r"step peak ([\d.]+ \w+), Δ ([+-][\d.]+ \w+)$")


def test_tensorboard_run_reads_back_the_monitor_numbers(tmp_path):
    ea = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
    logdir = tmp_path / "runs" / "mem"
    script = tmp_path / "trainer.py"
    script.write_text(TRAINER_TB)
    out = subprocess.run([sys.executable, str(script), str(logdir)], env=gpu_env(),
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, f"trainer failed:\n{out.stdout}\n{out.stderr}"
    result = json.loads(out.stdout.strip().splitlines()[-1])
    history = [r for r in result["history"] if r["device"] == 0]
    assert [r["step"] for r in history] == list(range(1, 11)), history
    # The native writer of the agent extension, not torch's SummaryWriter.
    assert result["writer"] == "vramscope._agent.TensorBoardWriter", result["writer"]
    peaks = [r["peak_allocated_bytes"] for r in history]
    assert len(set(peaks)) >= 5, f"step peaks barely differ, the comparison proves little: {peaks}"

    files = [f for f in logdir.iterdir() if "tfevents" in f.name]
    assert len(files) == 1, list(logdir.iterdir())
    assert oct(files[0].stat().st_mode & 0o777) == "0o600"
    assert oct(logdir.stat().st_mode & 0o777) == "0o700"

    acc = ea.EventAccumulator(str(logdir))
    acc.Reload()
    for tag, field in TAG_FIELDS.items():
        events = acc.Scalars(f"memory/cuda0/{tag}")
        got = [(e.step, e.value) for e in events]
        want = [(r["step"], float32(r[field])) for r in history]
        assert got == want, f"{tag}: event file {got} != history {want}"

    # The printed lines: one per step, their human units agree with the history.
    lines = result["lines"]
    assert len(lines) == len(history), lines
    for line, record in zip(lines, history):
        match = LINE.match(line)
        assert match, f"unexpected line format: {line!r}"
        step, device, alloc, reserved, peak, delta = match.groups()
        assert (int(step), int(device)) == (record["step"], record["device"]), line
        for text, value in ((alloc, record["allocated_bytes"]),
                            (reserved, record["reserved_bytes"]),
                            (peak, record["peak_allocated_bytes"])):
            printed, tolerance = parse_size(text)
            assert abs(printed - value) <= tolerance + 1e-6 * value, \
                f"{line!r}: {text} vs {value} bytes"
        printed, tolerance = parse_size(delta.lstrip("+"))
        assert abs(printed - record["delta_allocated_bytes"]) <= tolerance + 1, \
            f"{line!r}: {delta} vs {record}"


# ----- b. Prometheus exporter beside a trainer

TRAINER_PAUSE = r"""
import json, os, sys
import torch, torch.nn as nn
import vramscope

state_path = sys.argv[1]
torch.cuda.init()
vramscope.attach()
model = nn.Sequential(nn.Linear(2048, 8192), nn.GELU(), nn.Linear(8192, 2048)).cuda()
opt = torch.optim.AdamW(model.parameters())
for batch in (256, 1024, 512):
    model(torch.randn(batch, 2048, device="cuda")).square().mean().backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
# An odd size on purpose.
keep = torch.empty(300 * 1024 * 1024 + 12345, dtype=torch.uint8, device="cuda")
torch.cuda.synchronize()
# The pause point: nothing allocates until stdin closes.
state = {"pid": os.getpid(), "allocated_bytes": vramscope.memory_allocated(0),
         "reserved_bytes": vramscope.memory_reserved(0),
         "torch_allocated_bytes": torch.cuda.memory_allocated(0),
         "torch_reserved_bytes": torch.cuda.memory_reserved(0)}
with open(state_path + ".tmp", "w") as f:
    json.dump(state, f)
os.rename(state_path + ".tmp", state_path)
sys.stdin.read()
"""


def _cli() -> str:
    path = cli_path()
    if not path:
        pytest.skip(NO_CLI)
    return path


def _nvidia_smi_totals_mib() -> dict:
    if shutil.which("nvidia-smi") is None:
        pytest.skip("nvidia-smi absent")
    out = subprocess.run(["nvidia-smi", "--query-gpu=index,memory.total",
                          "--format=csv,noheader,nounits"],
                         capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        pytest.skip(f"nvidia-smi failed: {out.stderr.strip()}")
    return {int(i): int(t)
            for i, t in (line.split(",") for line in out.stdout.strip().splitlines())}


def _wait_for(condition, deadline_s: float, what: str, alive=(), detail=lambda: ""):
    """Polls condition() until it returns a true value; fails with `what` and detail() at the
    deadline or when one of the `alive` processes exited."""
    deadline = time.monotonic() + deadline_s
    while True:
        value = condition()
        if value:
            return value
        for proc in alive:
            if proc.poll() is not None:
                pytest.fail(f"{what}: {proc.args[:2]} exited with {proc.returncode}; {detail()}")
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not within {deadline_s} s; {detail()}")
        time.sleep(0.05)  # polling interval of a condition with a deadline, not a synchronisation


def _read_port(exporter, deadline_s: float) -> int:
    """The port from the exporter's "... serving http://127.0.0.1:PORT/metrics ..." line on
    stderr (it binds port 0, so the OS picks a free one). A thread reads stderr so that the
    deadline holds even if the exporter prints nothing."""
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in exporter.stderr],
                     daemon=True).start()
    deadline = time.monotonic() + deadline_s
    seen = ""
    while True:
        try:
            line = lines.get(timeout=max(0.01, deadline - time.monotonic()))
        except queue.Empty:
            break
        seen += line
        match = re.search(r"serving http://127\.0\.0\.1:(\d+)/metrics", line)
        if match:
            return int(match.group(1))
        if time.monotonic() > deadline:
            break
    exporter.kill()
    exporter.wait(timeout=30)
    pytest.fail(f"exporter did not report its port within {deadline_s} s "
                f"(exit {exporter.returncode}):\n{seen}")


def _scrape(port: int) -> dict:
    """{(family, frozenset(labels)): value} of one /metrics scrape, parsed by prometheus_client."""
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        assert response.status == 200
        content_type = response.headers["Content-Type"]
        body = response.read().decode("utf-8")
    assert content_type == "text/plain; version=0.0.4; charset=utf-8", content_type
    samples = {}
    for family in text_string_to_metric_families(body):
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return samples


def _find(samples: dict, name: str, **labels) -> list:
    wanted = set(labels.items())
    return [(dict(key), value) for (n, key), value in samples.items()
            if n == name and wanted <= key]


def test_prometheus_exporter_matches_trainer_and_nvidia_smi(tmp_path):
    pytest.importorskip("prometheus_client")
    cli = _cli()
    totals_mib = _nvidia_smi_totals_mib()
    script = tmp_path / "trainer.py"
    script.write_text(TRAINER_PAUSE)
    state_path = tmp_path / "state.json"
    log_path = tmp_path / "trainer.log"
    trainer_log = open(log_path, "w")
    trainer = exporter = None
    try:
        # Output goes to a file: a full pipe nobody reads would block the trainer.
        trainer = subprocess.Popen([sys.executable, str(script), str(state_path)], env=gpu_env(),
                                   stdin=subprocess.PIPE, stdout=trainer_log,
                                   stderr=subprocess.STDOUT, text=True)
        _wait_for(state_path.exists, 240, "trainer pause point", alive=[trainer],
                  detail=lambda: "trainer output:\n" + log_path.read_text())
        state = json.loads(state_path.read_text())
        assert state["pid"] == trainer.pid
        # vramscope's own readers agree with torch's at the pause (the same numbers).
        assert state["allocated_bytes"] == state["torch_allocated_bytes"], state
        assert state["reserved_bytes"] == state["torch_reserved_bytes"], state

        exporter = subprocess.Popen([cli, "exporter", "--listen", "127.0.0.1:0",
                                     "--interval", "100ms"],
                                    env=gpu_env(), stdout=subprocess.DEVNULL,
                                    stderr=subprocess.PIPE, text=True)
        port = _read_port(exporter, 60)
        pid = str(trainer.pid)
        last = {}

        def trainer_matches():
            samples = _scrape(port)
            allocated = _find(samples, "vramscope_torch_allocated_bytes", pid=pid, cuda_device="0")
            reserved = _find(samples, "vramscope_torch_reserved_bytes", pid=pid, cuda_device="0")
            last.update(allocated=allocated, reserved=reserved, samples=samples)
            return (len(allocated) == 1 and len(reserved) == 1
                    and int(allocated[0][1]) == state["allocated_bytes"]
                    and int(reserved[0][1]) == state["reserved_bytes"])

        _wait_for(trainer_matches, 30, "exporter shows the trainer's numbers",
                  alive=[trainer, exporter],
                  detail=lambda: (f"trainer reported {state}; /metrics had allocated "
                                  f"{last.get('allocated')}, reserved {last.get('reserved')} "
                                  f"for pid {pid}; trainer output:\n" + log_path.read_text()))
        samples = last["samples"]

        totals = _find(samples, "vramscope_gpu_memory_total_bytes")
        by_gpu = {int(labels["gpu"]): int(value) for labels, value in totals}
        assert set(by_gpu) == set(totals_mib), (by_gpu, totals_mib)
        for gpu, total_bytes in by_gpu.items():
            assert -(-total_bytes // MIB) == totals_mib[gpu], \
                f"gpu {gpu}: {total_bytes} bytes = {total_bytes / MIB:.2f} MiB, " \
                f"nvidia-smi {totals_mib[gpu]} MiB"
    finally:
        for proc in (exporter, trainer):
            if proc is None or proc.poll() is not None:
                continue
            if proc is trainer:
                proc.stdin.close()
            else:
                proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=30)
        trainer_log.close()
    assert exporter.returncode == 0, f"exporter exit {exporter.returncode} after SIGTERM"
    assert trainer.returncode == 0, f"trainer exit {trainer.returncode}: {log_path.read_text()}"
