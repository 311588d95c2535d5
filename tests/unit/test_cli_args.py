"""run.py's arguments: overrides pass through, a mistyped flag is one error with the flag
it was probably meant to be (before TensorFlow is even imported)."""

import pytest

from open_seq2seq.cli import main, parse_args
from open_seq2seq.errors import ConfigError


def test_overrides_pass_through_and_known_flags_become_overrides():
  args, overrides = parse_args(["--config_file=c.py", "--mode=train", "--continue_learning",
                                "--encoder_params/num_layers=2", "--logdir=run"])
  assert args.continue_learning and args.mode == "train"
  assert overrides == ["--encoder_params/num_layers=2", "--logdir=run"]


@pytest.mark.parametrize("arg,hint", [
    ("--continue_learing", "; did you mean --continue_learning?"),
    ("--benchmrk", "; did you mean --benchmark?"),
    ("stray", ""),
])
def test_a_mistyped_flag_names_the_closest_one(arg, hint):
  with pytest.raises(ConfigError) as error:
    parse_args(["--config_file=c.py", "--mode=train", arg])
  assert str(error.value) == (f"{arg}: unknown argument{hint} (config overrides look like "
                              "--batch_size_per_gpu=32 or --encoder_params/<key>=<value>)")


def test_an_override_written_with_a_space_says_to_write_it_with_equals():
  with pytest.raises(ConfigError) as error:
    parse_args(["--config_file=c.py", "--max_steps", "30"])
  assert str(error.value) == "--max_steps 30: a config override needs '=': write --max_steps=30"
  # a typo of a flag that takes a value still names the flag
  with pytest.raises(ConfigError, match="did you mean --logdir"):
    parse_args(["--config_file=c.py", "--logidr", "/tmp/run"])


def test_main_prints_one_line_and_exits_2(capsys):
  assert main(["--config_file=c.py", "--mode=train", "--continue_learing"]) == 2
  err = capsys.readouterr().err.strip().splitlines()
  assert len(err) == 1 and err[0].startswith("error: --continue_learing: unknown argument")


def test_a_project_error_from_inside_the_input_pipeline_is_one_line(monkeypatch, capsys):
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  from open_seq2seq import cli  # pylint: disable=import-outside-toplevel

  def run(argv):  # what tf.numpy_function makes of a DataError raised while reading audio
    raise tf.errors.UnknownError(None, None, "Traceback (most recent call last):\n  File ..."
                                 "\nopen_seq2seq.errors.DataError: a.wav: cannot read audio "
                                 "(bad header)\n\n\t [[{{node PyFunc}}]]")

  monkeypatch.setattr(cli, "run", run)
  assert cli.main([]) == 2
  assert capsys.readouterr().err == "error: a.wav: cannot read audio (bad header)\n"


def test_other_errors_keep_their_traceback(monkeypatch):
  from open_seq2seq import cli  # pylint: disable=import-outside-toplevel

  def run(argv):
    raise RuntimeError("a bug")

  monkeypatch.setattr(cli, "run", run)
  with pytest.raises(RuntimeError, match="a bug"):
    cli.main([])


def test_out_of_memory_is_one_line_naming_the_shape_and_the_knobs(monkeypatch, capsys):
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  from open_seq2seq import cli  # pylint: disable=import-outside-toplevel

  def run(argv):
    tf.zeros([2 ** 40, 4])  # 16 TiB: TensorFlow's own ResourceExhaustedError

  monkeypatch.setattr(cli, "run", run)
  assert cli.main([]) == 2
  assert capsys.readouterr().err == (
      "error: out of memory: could not allocate a tensor of shape[1099511627776,4]; lower "
      "batch_size_per_gpu, bound the example length (data_layer_params/max_length), or use "
      "mixed precision (dtype 'mixed')\n")


@pytest.mark.parametrize("dtype,shown", [("mixed", "mixed"), ("fp16", "float16")])
def test_the_benchmark_table_names_dtypes_as_configs_write_them(dtype, shown):
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  from open_seq2seq.cli import benchmark_table  # pylint: disable=import-outside-toplevel
  result = {"steps_measured": 3, "median_step_time": 0.5, "unit": "tokens",
            "units_per_s": 100.0}
  for value, name in ((dtype, shown), (tf.float32, "float32")):
    table = benchmark_table(result, {"dtype": value, "batch_size_per_gpu": 8})
    assert f"| {name} |" in table.replace("dtype ", "dtype") or f"{name} |" in table
    assert "<dtype" not in table and "tf." not in table
