"""run.py options OpenSeq2Seq users rely on: --enable_logs records the run, --overrides_file,
--no_dir_check, --use_xla_jit, config.yaml, and eval/infer of a config whose training-only
values (max_steps, the lr schedule's decay window) and infer_params are absent."""

import os
import textwrap

import pytest
import yaml

from tests.helpers import toy

pytestmark = pytest.mark.slow

# The toy config with max_steps only in train_params, a poly_decay schedule whose
# decay_steps is filled in from the run, and no infer_params (infer reads the eval data).
CONFIG = """
import runpy
_toy = runpy.run_path({toy_config!r})
from open_seq2seq.optimizers.lr_policies import poly_decay
base_model = _toy["base_model"]
base_params = dict(_toy["base_params"])
del base_params["max_steps"]
base_params["lr_policy"] = poly_decay
base_params["lr_policy_params"] = {{"learning_rate": 1e-3, "warmup_steps": 2}}
train_params = dict(_toy["train_params"], max_steps=6)
eval_params = _toy["eval_params"]
"""

OVERRIDES = """
batch_size_per_gpu: 8
print_loss_steps: 2
decoder_params:
  beam_size: 1
"""


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
  root = tmp_path_factory.mktemp("options")
  # named as the config expects, so a run from ``root`` finds the config's own paths
  data = toy.make_toy_data(str(root / "toy_text_data"), train=64, dev=8, test=8)
  config = root / "ported.py"
  config.write_text(textwrap.dedent(CONFIG.format(toy_config=toy.TOY_CONFIG)))
  overrides = root / "variant.yaml"
  overrides.write_text(OVERRIDES)
  logdir = str(root / "run")
  args = _args(config, data, logdir, "train_eval") + [
      f"--overrides_file={overrides}", "--batch_size_per_gpu=16", "--enable_logs"]
  result = toy.run_cli(args)
  assert result.returncode == 0, result.stderr[-3000:]
  return config, data, logdir, result


def _args(config, data, logdir, mode, split="train"):
  tiny = [a for a in toy.TINY_MODEL if not a.startswith(("--lr_policy_params", "--batch_size",
                                                          "--print_loss"))]
  return ([f"--config_file={config}", f"--mode={mode}", f"--logdir={logdir}"] + tiny +
          toy.data_overrides(data) + toy.split_overrides(data, split))


def test_config_yaml_holds_the_resolved_config_with_file_and_command_line_overrides(setup):
  _, _, logdir, result = setup
  resolved = yaml.safe_load(open(os.path.join(logdir, "config.yaml"), encoding="utf-8"))
  assert set(resolved) == {"train", "eval"}
  train = resolved["train"]
  assert train["batch_size_per_gpu"] == 16  # the command line wins over the file's 8
  assert train["print_loss_steps"] == 2  # from the file
  assert train["lr_policy"] == "open_seq2seq.optimizers.lr_policies.poly_decay"
  assert len([l for l in result.stdout.splitlines() if "| loss" in l]) == 3


def test_enable_logs_records_the_run(setup):
  config, _, logdir, _ = setup
  records = os.listdir(os.path.join(logdir, "logs"))
  assert len(records) == 1 and records[0].startswith("train_eval-")
  folder = os.path.join(logdir, "logs", records[0])
  files = set(os.listdir(folder))
  assert {"command.txt", "ported.py", "config.txt", "config.yaml", "versions.txt", "git.txt",
          "stdout.log", "stderr.log"} <= files
  assert "--enable_logs" in open(os.path.join(folder, "command.txt")).read()
  assert open(os.path.join(folder, "ported.py")).read() == config.read_text()
  versions = open(os.path.join(folder, "versions.txt")).read()
  assert "tensorflow" in versions and "keras: 3." in versions and "cpu: " in versions
  git = open(os.path.join(folder, "git.txt")).read()
  # The code runs from a git work tree here (a clone in CI): its commit is recorded.
  assert "commit: " in git and "work tree: " in git
  if "uncommitted changes: yes" in git:
    assert "git.diff" in files
  assert "Finished training at step 6" in open(os.path.join(folder, "stdout.log")).read()
  assert not [name for name in files if name.endswith(".tmp")]


def test_eval_and_infer_need_no_training_values_and_infer_falls_back_to_eval_data(setup, tmp_path):
  config, data, logdir, _ = setup
  evaluated = toy.run_cli(_args(config, data, logdir, "eval", "dev"))
  assert evaluated.returncode == 0, evaluated.stderr[-2000:]
  assert "BLEU" in evaluated.stdout
  output = tmp_path / "out.txt"
  # No data overrides, run from the data's parent: infer reads eval_params' own files (dev/).
  args = [a for a in _args(config, data, logdir, "infer") if "data_layer_params" not in a]
  inferred = toy.run_cli(args + [f"--infer_output_file={output}", "--enable_logs"],
                         cwd=os.path.dirname(data))
  assert inferred.returncode == 0, inferred.stderr[-2000:]
  assert "BLEU" in inferred.stdout  # the eval data has targets: the output is scored
  assert len(output.read_text().splitlines()) == 8
  assert any(name.startswith("infer-") for name in os.listdir(os.path.join(logdir, "logs")))


def test_no_dir_check_trains_from_scratch_in_a_used_logdir(setup, tmp_path):
  config, data, _, _ = setup
  logdir = str(tmp_path / "again")
  first = toy.run_cli(_args(config, data, logdir, "train") + ["--max_steps=2"])
  assert first.returncode == 0, first.stderr[-2000:]
  refused = toy.run_cli(_args(config, data, logdir, "train") + ["--max_steps=2"])
  assert refused.returncode != 0 and "already holds a run" in refused.stderr
  again = toy.run_cli(_args(config, data, logdir, "train") + ["--max_steps=2", "--no_dir_check",
                                                              "--use_xla_jit"])
  assert again.returncode == 0, again.stderr[-2000:]
  assert "warning: --no_dir_check: training from scratch" in again.stderr
  assert "Finished training at step 2" in again.stdout
  resolved = yaml.safe_load(open(os.path.join(logdir, "config.yaml"), encoding="utf-8"))
  assert resolved["train"]["use_xla_jit"] is True
