# tests/gpu/test_exactness.py -- vramscope's numbers equal torch's at every step boundary
import pytest

from conftest import needs_two_gpus, run_scenario


def test_training_loop_is_exact_and_torch_peaks_untouched():
    assert run_scenario("exact") == "events"


def test_expandable_segments_are_exact():
    assert run_scenario("exact", PYTORCH_CUDA_ALLOC_CONF="expandable_segments:True") == "events"


def test_cuda_malloc_async_falls_back_to_polling():
    mode = run_scenario("mode", PYTORCH_CUDA_ALLOC_CONF="backend:cudaMallocAsync")
    assert mode.startswith("polling"), mode


def test_native_allocator_uses_events():
    assert run_scenario("mode") == "events"


def test_empty_cache_returns_the_reserved_bytes_released():
    assert int(run_scenario("empty_cache")) > 0


def test_record_stream_deferred_free_stays_exact():
    run_scenario("record_stream")


def test_monitor_auto_step_records():
    run_scenario("monitor")


@needs_two_gpus
@pytest.mark.parametrize("device", [0, 1])
def test_second_device_is_exact(device):
    assert run_scenario("exact", "--device", str(device)) == "events"


@needs_two_gpus
def test_devices_are_independent():
    run_scenario("independent")
