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
ONEDNN_DTYPE = ("E0000 00:00:1795719083.032747   19310 util.cc:131] oneDNN supports DT_INT32 "
                "only on platforms with AVX-512. Falling back to the default Eigen-based "
                "implementation if present.")
ERROR = "E0000 00:00:1795719083.032747   19310 util.cc:131] something went wrong"


def test_informational_start_up_lines_are_noise_at_the_default_level():
  noise = start_up_noise(2)
  assert all(noise(line) for line in (PREAMBLE, ONEDNN, FEATURES, FEATURES_2, WARNING))
  assert not noise(ERROR)
  assert not noise("Traceback (most recent call last):")
  assert not noise("error: something the user must see")


def test_the_onednn_dtype_notice_is_informational_despite_its_level():
  assert start_up_noise(2)(ONEDNN_DTYPE) and not start_up_noise(1)(ONEDNN_DTYPE)


def test_a_run_shows_no_onednn_dtype_notice_and_still_shows_real_errors():
  """In a fresh process (TensorFlow says the notice once per process): after the notice is
  consumed, float16 and int32 kernels run without it; a real error line still gets out."""
  import subprocess  # pylint: disable=import-outside-toplevel
  import sys  # pylint: disable=import-outside-toplevel
  program = (
      "import os; os.environ['TF_CPP_MIN_LOG_LEVEL'] = '2'\n"
      "from open_seq2seq.utils import quiet_start as q\n"
      "q.import_tensorflow_quietly(); q.consume_onednn_dtype_notice()\n"
      "import tensorflow as tf\n"
      "tf.matmul(tf.ones([2, 2], tf.float16), tf.ones([2, 2], tf.float16))\n"
      "tf.function(lambda x: tf.einsum('ij,jk->ik', x, x))(tf.ones([2, 2], tf.int32))\n"
      "os.write(2, b'a real problem\\n')\n")
  root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
  result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                          timeout=120, env=dict(os.environ, PYTHONPATH=root), check=True)
  assert result.stderr.splitlines() == ["a real problem"], result.stderr


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
