# tests/python/integrations/test_integrations.py -- the Lightning and HF Trainer callbacks in real CPU runs
#
# A real Trainer.fit / Trainer.train on tiny models, with tests/python/_vram_double.py as the
# agent: the training code moves its counters by known amounts, so the logged keys and values
# are checked exactly. Skipped when the framework is not installed (tools/requirements-dev.txt
# installs both). tests/gpu/test_integrations_gpu.py compares the values with torch's on a GPU.
from __future__ import annotations

import warnings

import pytest

from vramscope._core.session import SESSION
from vramscope.integrations import KEYS
from vramscope.postmortem import oom

from _vram_double import FakeAgent, installed

MiB = 1 << 20


@pytest.fixture
def agent():
    with installed(FakeAgent()) as fake:
        yield fake


def test_no_gpu_means_the_callbacks_log_nothing_and_say_why():
    import torch
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    from vramscope.integrations.common import StepMetrics

    metrics = StepMetrics("test")
    metrics.start()
    assert metrics.step() == {}
    assert "no CUDA GPU is visible" in metrics.problem


# ----- Lightning

def _lightning_fit(agent, tmp_path, callback, steps=4):
    pl = pytest.importorskip("lightning.pytorch")
    import torch

    class Tiny(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Linear(4, 1)

        def training_step(self, batch, batch_idx):
            # Step k (from 1) peaks at k MiB above the baseline, then frees it.
            agent.alloc((batch_idx + 1) * MiB)
            agent.free((batch_idx + 1) * MiB)
            x, y = batch
            return torch.nn.functional.mse_loss(self.layer(x), y)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    class Recorder(pl.loggers.Logger):
        def __init__(self):
            super().__init__()
            self.rows = []

        @property
        def name(self):
            return "recorder"

        @property
        def version(self):
            return 0

        def log_hyperparams(self, params, *args, **kwargs):
            pass

        def log_metrics(self, metrics, step=None):
            self.rows.append((step, dict(metrics)))

    data = torch.utils.data.TensorDataset(torch.randn(steps * 3, 4), torch.randn(steps * 3, 1))
    loader = torch.utils.data.DataLoader(data, batch_size=3)
    recorder = Recorder()
    agent.alloc(5 * MiB)  # the model's memory, there before the fit
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", ".*does not have many workers.*")
        trainer = pl.Trainer(accelerator="cpu", max_epochs=1, logger=recorder,
                             callbacks=[callback], log_every_n_steps=1,
                             enable_checkpointing=False, enable_progress_bar=False,
                             enable_model_summary=False, default_root_dir=str(tmp_path))
        trainer.fit(Tiny(), loader)
    return recorder.rows


def test_lightning_fit_logs_each_steps_peaks(agent, tmp_path):
    pytest.importorskip("lightning.pytorch")
    from vramscope.integrations.lightning import VramscopeCallback

    callback = VramscopeCallback()
    rows = _lightning_fit(agent, tmp_path, callback)
    logged = [(step, m) for step, m in rows if "vram/peak_allocated_bytes" in m]
    assert [m["vram/peak_allocated_bytes"] for _, m in logged] == \
        [float((5 + k) * MiB) for k in (1, 2, 3, 4)]
    for _, m in logged:
        assert set(m) & set(KEYS) == {"vram/peak_allocated_bytes", "vram/peak_reserved_bytes",
                                      "vram/allocated_bytes", "vram/reserved_bytes"}
        assert m["vram/allocated_bytes"] == 5 * MiB
    # The cache grows in 2 MiB segments and keeps them: 6, 7, 8, 9 MiB peaks need 6, 8, 8, 10.
    assert [m["vram/reserved_bytes"] for _, m in logged] == [float(n * MiB) for n in (6, 8, 8, 10)]
    assert [m["vram/peak_reserved_bytes"] for _, m in logged] == \
        [m["vram/reserved_bytes"] for _, m in logged]
    assert [r.batch_size for r in callback.history] == [3, 3, 3, 3]
    # The fit is over: the callback no longer feeds the OOM report.
    assert callback._metrics.pipeline._oom_evidence not in SESSION.evidence


def test_lightning_batch_size_and_steps_reach_the_oom_report(agent, tmp_path):
    pytest.importorskip("lightning.pytorch")
    from vramscope.integrations.lightning import VramscopeCallback

    seen = {}

    class Peek(VramscopeCallback):
        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            super().on_train_batch_end(trainer, pl_module, outputs, batch, batch_idx)
            if batch_idx == 2:
                e = oom.OomEvidence(device=0, requested_bytes=1, device_total_bytes=2,
                                    device_free_bytes=0, allocated_bytes=0, reserved_bytes=0)
                SESSION.postmortem.fill(e, None, 0)
                seen.update(batch_size=e.batch_size, source=e.batch_source,
                            steps=[(s.step, s.batch_size, s.peak_allocated_bytes)
                                   for s in e.steps])

    _lightning_fit(agent, tmp_path, Peek())
    assert seen == {"batch_size": 3, "source": "lightning",
                    "steps": [(1, 3, 6 * MiB), (2, 3, 7 * MiB), (3, 3, 8 * MiB)]}


# ----- Hugging Face Trainer

def _hf_train(agent, tmp_path, callbacks, max_steps=4, logging_steps=2):
    transformers = pytest.importorskip("transformers")
    import torch

    config = transformers.GPT2Config(n_layer=1, n_embd=8, n_head=2, vocab_size=32, n_positions=8)
    model = transformers.GPT2LMHeadModel(config)
    ids = torch.randint(0, 32, (16, 8))
    data = [{"input_ids": row, "labels": row} for row in ids]

    class Allocates(transformers.TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs):
            # Step k (from 1) peaks at k MiB above the baseline, then frees it.
            agent.alloc((state.global_step + 1) * MiB)
            agent.free((state.global_step + 1) * MiB)

    args = transformers.TrainingArguments(
        output_dir=str(tmp_path), max_steps=max_steps, logging_steps=logging_steps,
        per_device_train_batch_size=2, report_to=[], use_cpu=True, save_strategy="no",
        disable_tqdm=True)
    trainer = transformers.Trainer(model=model, args=args, train_dataset=data,
                                   callbacks=[Allocates(), *callbacks])
    trainer.train()
    return trainer


def test_hf_trainer_keys_reach_reporting_callbacks_that_run_first(agent, tmp_path):
    transformers = pytest.importorskip("transformers")
    from vramscope.integrations.transformers import VramscopeCallback

    class Reporter(transformers.TrainerCallback):
        """Stands where report_to's callbacks stand: before the user's callbacks."""

        def __init__(self):
            self.logs = []

        def on_log(self, args, state, control, logs=None, **kwargs):
            self.logs.append(dict(logs))

    reporter = Reporter()
    callback = VramscopeCallback()
    trainer = _hf_train(agent, tmp_path, [reporter, callback])
    assert trainer.callback_handler.callbacks[0] is callback
    train_logs = [log for log in reporter.logs if "loss" in log]
    assert len(train_logs) == 2
    # Each log carries the highest peak of the steps since the previous log.
    assert [log["vram/peak_allocated_bytes"] for log in train_logs] == [2.0 * MiB, 4.0 * MiB]
    for log in train_logs:
        assert {"vram/peak_reserved_bytes", "vram/allocated_bytes",
                "vram/reserved_bytes"} <= set(log)
        assert "vram/non_pytorch_bytes" not in log  # the double has no NVML
    history = [h for h in trainer.state.log_history if "loss" in h]
    assert [h["vram/peak_allocated_bytes"] for h in history] == [2.0 * MiB, 4.0 * MiB]
    assert [r.batch_size for r in callback.history] == [2, 2, 2, 2]
