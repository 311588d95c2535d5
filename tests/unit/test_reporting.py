"""Throughput statistics and the chief-aware step reporter."""

import json
import os

import numpy as np
import pytest

from open_seq2seq.outputs import TextSample
from open_seq2seq.training import reporting
from open_seq2seq.training.reporting import Reporter, StepStats, Summaries


def params(**kw):
  base = {"save_summaries_steps": 2, "print_loss_steps": 2, "print_samples_steps": 4,
          "summaries": ["learning_rate", "loss_scale"]}
  base.update(kw)
  return base


VALUES = {"loss": 1.5, "learning_rate": 0.1, "loss_scale": 1.0, "units": 10, "skipped": 0}


def test_step_stats_scale_units_and_skip_warmup(monkeypatch):
  stats = StepStats("s of audio", unit_scale=0.01)  # 10 ms frames
  for seconds in (5.0, 1.0, 1.0, 2.0):
    stats.add(seconds, 400)  # 400 frames = 4 s of audio
  figures = stats.benchmark(warmup=1)
  assert figures["steps_measured"] == 3 and figures["unit"] == "s of audio"
  assert figures["median_step_time"] == pytest.approx(1.0)
  assert figures["units_per_s"] == pytest.approx(4.0)
  clock = iter([100.0, 104.0])
  monkeypatch.setattr(reporting.time, "time", lambda: next(clock))
  stats.reset_window()
  stats.add(1.0, 200)
  stats.add(1.0, 200)
  assert stats.window() == pytest.approx((2.0, 1.0))  # 4 s of audio in 4 s
  assert stats.summary_key == "s_of_audio_per_s"


def test_chief_reports_scalars_lines_and_samples(tmp_path, capsys, monkeypatch):
  clock = [100.0]  # each step below takes 0.5 s of this clock
  monkeypatch.setattr(reporting.time, "time", lambda: clock[0])
  stats = StepStats("tokens")
  reporter = Reporter(params(), Summaries(str(tmp_path)), stats, is_chief=True,
                      steps_per_epoch=8, has_loss_scale=False)
  calls = []

  def samples():
    calls.append(1)
    return ["Prediction[0]: x"], [TextSample("prediction", "x")]

  for step in (1, 2, 3, 4):
    clock[0] += 0.5
    stats.add(0.5, 10)
    reporter.step(step, VALUES, samples)
  out = capsys.readouterr().out
  assert out.count("| loss 1.5000 |") == 2 and "epoch   0.50" in out and "tokens/s" in out
  assert calls == [1] and "Prediction[0]: x" in out
  with open(os.path.join(tmp_path, "metrics.jsonl"), encoding="utf-8") as f:
    records = [json.loads(line) for line in f]
  # loss_scale is left out without a loss scaler; throughput is over the steps since the
  # last summaries (2 steps of 0.5 s and 10 tokens), with the wall-clock time of the record
  assert records == [{"step": step, "time": 100.0 + step / 2, "train/loss": 1.5,
                      "train/learning_rate": 0.1, "train/step_time": 0.5,
                      "train/tokens_per_s": 20.0} for step in (2, 4)]


def test_other_workers_stay_quiet(tmp_path, capsys):
  reporter = Reporter(params(), Summaries(None), StepStats(), is_chief=False,
                      steps_per_epoch=8, has_loss_scale=True)
  for step in range(1, 5):
    reporter.step(step, VALUES, lambda: (_ for _ in ()).throw(AssertionError("sampled")))
  reporter.log("hello")
  assert capsys.readouterr().out == ""



def test_counts_take_the_number_of_their_noun(capsys):
  """Issue 38: "for 1 steps", "1/1 batches" read wrong."""
  assert [reporting.counted(n, "step") for n in (0, 1, 2)] == ["0 steps", "1 step", "2 steps"]
  assert reporting.counted(1, "batch", "batches") == "1 batch"
  assert reporting.counted(3, "batch", "batches") == "3 batches"
  for total, drawn in ((1, "] 1/1 batch, "), (2, "] 2/2 batches, "), (None, "eval 1 batch, ")):
    bar = reporting.ProgressBar("eval", total=total)
    bar.update(total or 1)
    bar.close()
    assert drawn in capsys.readouterr().err


def test_count_metrics_print_as_integers():
  """Issue 38: eval printed "eval_tokens 4480.0000"; a count is an int, printed as one."""
  assert reporting.format_metric(4480) == "4480"
  assert reporting.format_metric(np.int64(7)) == "7"
  assert reporting.format_metric(1.0) == "1.0000"  # a float stays a float, even a whole one
  assert reporting.format_metric(0.123456) == "0.1235"


def test_the_other_update_groups_losses_and_rates_are_reported(tmp_path, capsys):
  """A model trained by several optimizers: the console line and the records hold each
  earlier group's loss (and rate, when the rate is summarised) beside the last group's."""
  values = {**VALUES, "loss/discriminator": 0.25, "learning_rate/discriminator": 0.2,
            "skipped/discriminator": 0}
  reporter = Reporter(params(), Summaries(str(tmp_path)), StepStats(), is_chief=True,
                      steps_per_epoch=8, has_loss_scale=False)
  reporter.step(2, values)
  assert "| loss 1.5000 (discriminator 0.2500) |" in capsys.readouterr().out
  with open(os.path.join(tmp_path, "metrics.jsonl"), encoding="utf-8") as f:
    record = json.loads(f.readline())
  assert record["train/loss/discriminator"] == 0.25
  assert record["train/learning_rate/discriminator"] == 0.2
  assert "train/skipped/discriminator" not in record
  quiet = Reporter(params(summaries=[]), Summaries(str(tmp_path / "b")), StepStats(),
                   is_chief=True, steps_per_epoch=8, has_loss_scale=False)
  quiet.step(2, values)
  with open(os.path.join(tmp_path, "b", "metrics.jsonl"), encoding="utf-8") as f:
    record = json.loads(f.readline())
  assert "train/loss/discriminator" in record
  assert "train/learning_rate/discriminator" not in record
