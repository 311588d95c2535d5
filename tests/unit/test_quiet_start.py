"""TensorFlow's start-up lines are dropped; anything else written to stderr meanwhile stays."""

import os

from open_seq2seq.utils.quiet_start import filtered_native_stderr, start_up_noise

PREAMBLE = ("WARNING: All log messages before absl::InitializeLog() is called are written to "
            "STDERR")
ONEDNN = ("I0000 00:00:1795720317.150396   14590 port.cc:153] oneDNN custom operations are "
          "on. You may see slightly different numerical results")
FEATURES = ("I0000 00:00:1795718930.754334   16310 cpu_feature_guard.cc:227] This TensorFlow "
            "binary is optimized to use available CPU instructions")
FEATURES_2 = ("To enable the following instructions: AVX2 AVX512F FMA, in other operations, "
              "rebuild TensorFlow with the appropriate compiler flags.")
WARNING = "W1126 18:51:22.032747   19310 util.cc:40] something to look at"
ERROR = ("E0000 00:00:1795719083.032747   19310 util.cc:131] oneDNN supports DT_INT32 only on "
         "platforms with AVX-512.")


def test_informational_start_up_lines_are_noise_at_the_default_level():
  noise = start_up_noise(2)
  assert all(noise(line) for line in (PREAMBLE, ONEDNN, FEATURES, FEATURES_2, WARNING))
  assert not noise(ERROR)
  assert not noise("Traceback (most recent call last):")
  assert not noise("error: something the user must see")


def test_the_users_log_level_decides():
  assert not any(start_up_noise(0)(line) for line in (PREAMBLE, ONEDNN, WARNING, ERROR))
  assert start_up_noise(1)(ONEDNN) and not start_up_noise(1)(WARNING)
  assert start_up_noise(3)(ERROR)


def test_captured_lines_other_than_noise_reach_stderr_in_order(capfd):
  with filtered_native_stderr(start_up_noise(2)):
    os.write(2, f"{PREAMBLE}\n{ONEDNN}\nreal problem 1\n{FEATURES}\n{FEATURES_2}\n".encode())
    os.write(2, f"{ERROR}\nreal problem 2\n".encode())
  assert capfd.readouterr().err.splitlines() == ["real problem 1", ERROR, "real problem 2"]


def test_lines_are_replayed_when_the_block_raises(capfd):
  try:
    with filtered_native_stderr(start_up_noise(2)):
      os.write(2, f"{ONEDNN}\nloading failed\n".encode())
      raise ImportError("boom")
  except ImportError:
    pass
  assert capfd.readouterr().err.splitlines() == ["loading failed"]
