"""scripts/plot_run.py: reading metrics.jsonl as the trainer keeps it, picking the curves,
the user's mistakes, and one PNG for several runs."""

import json
import os
import struct
import sys

import pytest

from tests.helpers.speech import load_script


@pytest.fixture(scope="module")
def plot():
  return load_script("plot_run")


def train(step, loss, lr=1e-3, **extra):
  """A training record as Reporter writes it (save_summaries_steps)."""
  return {"step": step, "train/loss": loss, "train/learning_rate": lr,
          "train/global_gradient_norm": 1.5, **extra}


def evaluation(step, loss, bleu):
  """An eval record as the Evaluator writes it."""
  return {"step": step, "eval/loss": loss, "eval/BLEU": bleu}


def write_run(directory, records, tail=""):
  """``directory/metrics.jsonl`` with ``records``, then ``tail`` (a line cut short)."""
  os.makedirs(directory, exist_ok=True)
  with open(os.path.join(directory, "metrics.jsonl"), "w", encoding="utf-8") as f:
    f.write("".join(json.dumps(r) + "\n" for r in records) + tail)
  return str(directory)


RUN = [train(5, 3.0, 3e-4), train(10, 2.8, 6e-4), evaluation(10, 2.7, 1.0),
       train(15, 2.4, 9e-4), train(20, 2.2, 1.2e-3), evaluation(20, 2.1, 4.5)]


def steps_and_values(run, key):
  return [(s, v) for s, _, v in run.series[key]]


def test_reads_the_records_and_skips_a_line_a_kill_cut_short(plot, tmp_path):
  logdir = write_run(tmp_path / "run", RUN, tail='{"step": 25, "train/lo')
  run = plot.read_run(logdir, "run")
  assert steps_and_values(run, "train/loss") == [(5, 3.0), (10, 2.8), (15, 2.4), (20, 2.2)]
  assert steps_and_values(run, "eval/BLEU") == [(10, 1.0), (20, 4.5)]
  assert list(run.series) == ["train/loss", "train/learning_rate",
                              "train/global_gradient_norm", "eval/loss", "eval/BLEU"]
  assert not run.has_times()


def test_a_resumed_run_keeps_only_the_newest_attempt(plot, tmp_path):
  # First attempt logged up to step 30 (and an eval at 20 and 30), checkpointed at 10, was
  # killed; the resumed run logs 15 and 20 again. forget_after(10) would have cut the file
  # to steps <= 10 before the new records: reading either file gives the same curves.
  first = RUN[:3] + [train(15, 9.0), train(20, 9.0), evaluation(20, 9.0, 0.0),
                     train(25, 9.0), train(30, 9.0), evaluation(30, 9.0, 0.0)]
  resumed = [train(15, 2.4), train(20, 2.2), evaluation(20, 2.1, 4.5)]
  raw = plot.read_run(write_run(tmp_path / "raw", first + resumed, tail='{"st'), "raw")
  forgotten = plot.read_run(write_run(tmp_path / "cut", [r for r in first if r["step"] <= 10] +
                                      resumed), "cut")
  assert raw.series == forgotten.series
  assert steps_and_values(raw, "train/loss") == [(5, 3.0), (10, 2.8), (15, 2.4), (20, 2.2)]
  assert steps_and_values(raw, "eval/loss") == [(10, 2.7), (20, 2.1)]


def test_a_step_logged_twice_keeps_the_later_record(plot):
  records = plot.parse_records(json.dumps(r) for r in
                               [train(5, 3.0), train(10, 8.0), train(10, 2.8)])
  series = plot.to_series(plot.drop_superseded(records))
  assert [(s, v) for s, _, v in series["train/loss"]] == [(5, 3.0), (10, 2.8)]


def test_default_metrics_are_loss_eval_lr_and_throughput(plot):
  keys = ["train/loss", "train/learning_rate", "train/global_gradient_norm",
          "train/tokens_per_s", "eval/BLEU", "eval/loss"]
  assert plot.default_metrics(keys) == ["train/loss", "eval/loss", "eval/BLEU",
                                        "train/learning_rate", "train/tokens_per_s"]
  assert plot.default_metrics(["train/loss"]) == ["train/loss"]


def test_metric_names_and_short_names(plot):
  keys = ["train/loss", "train/learning_rate", "train/global_gradient_norm", "eval/loss",
          "eval/BLEU"]
  assert plot.resolve_metrics("loss,BLEU,lr", keys) == ["train/loss", "eval/BLEU",
                                                       "train/learning_rate"]
  assert plot.resolve_metrics("eval/loss, global_gradient_norm,eval/loss", keys) == [
      "eval/loss", "train/global_gradient_norm"]
  with pytest.raises(plot.PlotError, match="no metric 'WER'.*available: train/loss, "
                                           "train/learning_rate.*eval/BLEU"):
    plot.resolve_metrics("loss,WER", keys)


def test_labels(plot, tmp_path):
  assert plot.run_labels(["runs/fp32/", "runs/mixed"], None) == ["fp32", "mixed"]
  assert plot.run_labels(["a/logdir", "b/logdir"], None) == ["a/logdir", "b/logdir"]
  assert plot.run_labels(["x", "y"], "one, two") == ["one", "two"]
  with pytest.raises(plot.PlotError, match="--labels has 1 names for 2 logdirs"):
    plot.run_labels(["x", "y"], "one")


def error_line(capsys):
  err = capsys.readouterr().err
  assert err.count("\n") == 1 and err.startswith("error: ")
  return err


def test_a_logdir_without_metrics_is_a_one_line_error(plot, tmp_path, capsys):
  (tmp_path / "empty").mkdir()
  assert plot.main([str(tmp_path / "empty")]) == 2
  assert "has no metrics.jsonl: give the logdir of a training run" in error_line(capsys)
  assert plot.main([str(tmp_path / "absent")]) == 2
  assert "does not exist" in error_line(capsys)
  cut = write_run(tmp_path / "cut", [], tail='{"step": 5, "tr')
  assert plot.main([cut]) == 2
  assert "holds no complete record yet" in error_line(capsys)
  assert not os.path.exists(os.path.join(cut, "curves.png"))


def test_an_unknown_metric_lists_the_available_ones(plot, tmp_path, capsys):
  logdir = write_run(tmp_path / "run", RUN)
  assert plot.main([logdir, "--metrics", "loss,eval/WER"]) == 2
  err = error_line(capsys)
  assert "'eval/WER'" in err and "available: train/loss, train/learning_rate" in err
  assert not os.path.exists(os.path.join(logdir, "curves.png"))


def test_time_axis_needs_wall_clock_times(plot, tmp_path, capsys):
  logdir = write_run(tmp_path / "run", RUN)
  assert plot.main([logdir, "--x", "time"]) == 2
  assert "carry no wall-clock 'time'; plot against --x step" in error_line(capsys)
  timed_dir = write_run(tmp_path / "timed", [
      dict(train(5, 3.0), time=1000.0), dict(train(10, 2.8), time=1300.0),
      dict(evaluation(10, 2.7, 1.0), time=1360.0)])
  timed = plot.read_run(timed_dir, "timed")
  assert plot.points(timed, "train/loss", "time", 60.0) == ([0.0, 5.0], [3.0, 2.8])
  assert plot.points(timed, "eval/loss", "time", 60.0) == ([6.0], [2.7])
  assert plot.time_unit([timed]) == ("min", 60.0)
  fig = plot.draw([timed], ["train/loss", "eval/loss"], x="time")
  assert fig.axes[1].get_xlabel() == "time since start (min)"
  assert plot.main([timed_dir, logdir, "--x", "time", "--metrics", "loss"]) == 0  # one has times


def png_size(path):
  with open(path, "rb") as f:
    head = f.read(24)
  assert head[:8] == b"\x89PNG\r\n\x1a\n"
  return struct.unpack(">II", head[16:24])  # IHDR width, height


def test_two_runs_make_one_png_with_a_subplot_per_quantity(plot, tmp_path, capsys):
  a = write_run(tmp_path / "fp32", RUN)
  b = write_run(tmp_path / "mixed", [{k: v * 0.9 if k != "step" else v for k, v in r.items()}
                                     for r in RUN[:4]], tail='{"step": 20, "train/lo')
  out = tmp_path / "plots" / "cmp.png"
  assert plot.main([a, b, "--output", str(out), "--labels", "fp32,mixed"]) == 0
  assert capsys.readouterr().out.strip() == str(out)
  width, height = png_size(out)
  assert width > height > 300
  assert os.listdir(out.parent) == ["cmp.png"]  # no temporary left behind

  runs = [plot.read_run(a, "fp32"), plot.read_run(b, "mixed")]
  fig = plot.draw(runs, plot.resolve_metrics(None, plot.available_keys(runs)))
  axes = [ax for ax in fig.axes if ax.get_visible()]
  assert [ax.get_title() for ax in axes] == ["train/loss", "eval/loss", "eval/BLEU",
                                             "train/learning_rate"]
  assert all(len(ax.get_lines()) == 2 for ax in axes)  # both runs on every subplot
  eval_line = axes[1].get_lines()[0]
  assert eval_line.get_marker() == "o" and list(eval_line.get_xdata()) == [10, 20]
  assert axes[0].get_lines()[0].get_marker() in ("None", None, "")
  assert [t.get_text() for t in fig.legends[0].get_texts()] == ["fp32", "mixed"]

  three = plot.draw(runs, ["train/loss", "eval/BLEU", "train/learning_rate"])
  assert len([ax for ax in three.axes if ax.get_visible()]) == 3


def test_default_output_is_next_to_the_first_run(plot, tmp_path, capsys):
  logdir = write_run(tmp_path / "run", RUN)
  assert plot.main([logdir, "--metrics", "loss"]) == 0
  assert capsys.readouterr().out.strip() == os.path.join(logdir, "curves.png")
  png_size(os.path.join(logdir, "curves.png"))


def test_without_matplotlib_it_says_how_to_install_it(plot, tmp_path, capsys, monkeypatch):
  logdir = write_run(tmp_path / "run", RUN)
  for name in ["matplotlib"] + [m for m in sys.modules if m.startswith("matplotlib.")]:
    monkeypatch.setitem(sys.modules, name, None)  # any import of matplotlib fails
  assert plot.main([logdir]) == 2
  assert "pip install -e .[plots]" in error_line(capsys)
  assert not os.path.exists(os.path.join(logdir, "curves.png"))
