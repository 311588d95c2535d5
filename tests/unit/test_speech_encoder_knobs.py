"""OpenSeq2Seq's remaining speech-encoder knobs: DS2 ``layernorm_lstm``, TDNN
``instance_norm``, seeded ``drop_block`` decisions that resume exactly, blockout at eval."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from open_seq2seq.encoders.ds2_encoder import DeepSpeech2Encoder
from open_seq2seq.encoders.tdnn_encoder import TDNNEncoder
from open_seq2seq.errors import ConfigError
from open_seq2seq.parts.cnns.conv_blocks import MaskedInstanceNorm
from open_seq2seq.training.checkpoints import named_variables
from tests.helpers.speech import TINY_TDNN, padded_features, run_encoder

LENGTHS = [37, 16, 25]
NUM_FEATURES = 20
DS2_LN = {
    "conv_layers": [{"kernel_size": [5, 7], "stride": [2, 2], "num_channels": 4}],
    "num_rnn_layers": 1, "rnn_cell_dim": 8, "n_hidden": 12, "rnn_type": "layernorm_lstm",
    "rnn_unidirectional": True,
}


def batch(lengths, seed=0, garbage=False):
  return padded_features(lengths, NUM_FEATURES, garbage, seed)


run = run_encoder


# ---------------------------------------------------------------------- layernorm_lstm
def _layer_norm(x, gamma, beta, eps=1e-12):
  mean = x.mean(-1, keepdims=True)
  return (x - mean) / np.sqrt(x.var(-1, keepdims=True) + eps) * gamma + beta


def reference_ln_lstm(x, cell):
  """TF 1's LayerNormBasicLSTMCell in numpy (gate order i, j, f, o; forget bias 1)."""
  n = cell.num_units
  w, u = cell.kernel.numpy(), cell.recurrent_kernel.numpy()
  gg, gb = cell.gates_gamma.numpy(), cell.gates_beta.numpy()
  sg, sb = cell.state_gamma.numpy(), cell.state_beta.numpy()
  sigmoid = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
  h = np.zeros((x.shape[0], n)); c = np.zeros((x.shape[0], n))
  outputs = []
  for t in range(x.shape[1]):
    z = x[:, t] @ w + h @ u
    i, j, f, o = [_layer_norm(z[:, k * n:(k + 1) * n], gg[k * n:(k + 1) * n],
                              gb[k * n:(k + 1) * n]) for k in range(4)]
    c = _layer_norm(c * sigmoid(f + 1.0) + sigmoid(i) * np.tanh(j), sg, sb)
    h = np.tanh(c) * sigmoid(o)
    outputs.append(h)
  return np.stack(outputs, 1)


def test_layernorm_lstm_is_tf1_layer_norm_basic_lstm():
  encoder = DeepSpeech2Encoder(DS2_LN, mode="eval")
  x = batch([12])
  run(encoder, x, [12])  # builds
  rnn = encoder.rnns[0]
  cell = rnn.cell
  assert cell.layer_norm
  # non-trivial norm parameters, so that each of them matters
  rng = np.random.default_rng(1)
  for var in (cell.gates_gamma, cell.gates_beta, cell.state_gamma, cell.state_beta):
    var.assign(rng.uniform(0.5, 1.5, var.shape).astype(np.float32))
  inputs = rng.normal(size=(2, 9, cell.kernel.shape[0])).astype(np.float32)
  ours = rnn(tf.constant(inputs)).numpy()
  np.testing.assert_allclose(ours, reference_ln_lstm(inputs.astype(np.float64), cell),
                             atol=1e-4)


def test_layernorm_lstm_padding_and_dropout():
  params = {**DS2_LN, "rnn_unidirectional": False, "dropout_keep_prob": 0.5}
  encoder = DeepSpeech2Encoder(params, mode="train")
  noisy, lengths = run(encoder, batch(LENGTHS, garbage=True), LENGTHS)
  for i, n in enumerate(LENGTHS):
    alone, _ = run(encoder, batch(LENGTHS)[i:i + 1, :n], [n])
    np.testing.assert_allclose(noisy[i, :lengths[i]], alone[0, :lengths[i]], atol=1e-4)
  # dropout is the cell's candidate dropout: in training only
  a, _ = run(encoder, batch(LENGTHS), LENGTHS, training=True)
  b, _ = run(encoder, batch(LENGTHS), LENGTHS, training=False)
  assert not np.allclose(a, b)
  assert encoder.rnns[0].forward_layer.cell.recurrent_keep_prob == 0.5


# ---------------------------------------------------------------------- instance_norm
def test_instance_norm_normalises_each_utterance_over_its_frames():
  norm = MaskedInstanceNorm()
  x = batch(LENGTHS, garbage=True) * 3.0 + 2.0
  mask = tf.sequence_mask(LENGTHS, max(LENGTHS))
  out = norm(tf.constant(x), mask).numpy()
  for i, n in enumerate(LENGTHS):
    ref = (x[i, :n] - x[i, :n].mean(0)) / np.sqrt(x[i, :n].var(0) + 1e-6)
    np.testing.assert_allclose(out[i, :n], ref, atol=1e-4)


def test_tdnn_instance_norm_padding_never_changes_an_utterance():
  encoder = TDNNEncoder({**TINY_TDNN, "normalization": "instance_norm"}, mode="eval")
  out, out_len = run(encoder, batch(LENGTHS, garbage=True), LENGTHS, training=True)
  for i, n in enumerate(LENGTHS):
    alone, _ = run(encoder, batch(LENGTHS)[i:i + 1, :n], [n], training=True)
    np.testing.assert_allclose(out[i, :out_len[i]], alone[0, :out_len[i]], atol=1e-4)
  names = [w.path for w in encoder.weights]
  assert any("/in/gamma" in n for n in names) and not any("moving_mean" in n for n in names)


# ---------------------------------------------------------------------- drop_block
DROP = {**TINY_TDNN, "drop_block_prob": 0.5, "normalization": None}


def drop_decisions(encoder, steps):
  """Per step, which residual blocks keep their branch (draws of the encoder's generator)."""
  return [tuple(float(v) > 0 for v in encoder.branch_scales(True).values())
          for _ in range(steps)]


def test_drop_block_decisions_are_seeded_and_resume_exactly(tmp_path):
  def make():
    keras.utils.set_random_seed(7)
    return TDNNEncoder(DROP, mode="train")
  a, b = make(), make()
  draws_a = drop_decisions(a, 12)
  assert draws_a == drop_decisions(b, 12)  # same seed, same steps: same decisions
  assert len(set(draws_a)) > 1  # different steps differ
  # a run interrupted after 5 steps and resumed from its checkpoint draws what an
  # uninterrupted run draws at steps 6-12
  interrupted = make()
  first = drop_decisions(interrupted, 5)
  path = tf.train.Checkpoint(**_checkpointed(interrupted)).write(str(tmp_path / "ckpt"))
  resumed = make()
  drop_decisions(resumed, 2)  # whatever it drew before the restore does not matter
  tf.train.Checkpoint(**_checkpointed(resumed)).read(path).assert_consumed()
  assert first + drop_decisions(resumed, 7) == draws_a


def _checkpointed(encoder):
  """What the trainer's checkpoint holds of an encoder (checkpoints.named_variables)."""
  named = named_variables({"encoder": encoder})
  return {name.replace(".", "_"): var for name, var in named.items()}


def test_drop_block_state_is_in_the_checkpoint():
  names = named_variables({"encoder": TDNNEncoder(DROP, mode="train")})
  assert any(name.endswith("drop_block_seed.seed_state") for name in names), sorted(names)


def test_drop_block_in_training_drops_whole_branches():
  keras.utils.set_random_seed(0)
  encoder = TDNNEncoder(DROP, mode="train")
  x = batch([12])
  eval_out, _ = run(encoder, x, [12])
  outs = [run(encoder, x, [12], training=True)[0] for _ in range(8)]
  assert any(not np.allclose(o, eval_out) for o in outs)
  none = TDNNEncoder({**TINY_TDNN, "normalization": None}, mode="train")
  assert none.drop_block_seed is None and none.branch_scales(True) == {}


def test_blockout_at_eval_drops_only_the_chosen_block():
  keras.utils.set_random_seed(3)
  params = {**TINY_TDNN, "normalization": None}
  full = TDNNEncoder(params, mode="eval")
  x = batch([15])
  reference, _ = run(full, x, [15])
  blockout = TDNNEncoder({**params, "drop_block_index": 2}, mode="eval")
  run(blockout, x, [15])
  blockout.set_weights(full.get_weights())
  dropped, _ = run(blockout, x, [15])
  assert not np.allclose(dropped, reference)
  scales = blockout.branch_scales(False)
  assert list(scales) == [2] and float(scales[2]) == 0.0
  # training ignores drop_block_index (drop_block_prob 0: nothing dropped)
  np.testing.assert_allclose(run(blockout, x, [15], training=True)[0],
                             run(full, x, [15], training=True)[0], atol=1e-5)


@pytest.mark.parametrize("extra,match", [
    ({"drop_block_index": 0}, "drop_block_index: 0 is not -1 nor the index of a residual"),
    ({"drop_block_index": 7}, "residual blocks: \\[1, 2\\]"),
    ({"drop_block_prob": 1.0}, "drop_block_prob: 1.0 is not in"),
])
def test_drop_block_config_errors(extra, match):
  with pytest.raises(ConfigError, match=match):
    TDNNEncoder({**TINY_TDNN, **extra}, mode="train")


def test_conv2d_layers_over_time_only_are_conv1d_layers():
  """OpenSeq2Seq's speech-commands Jasper writes conv2d layers with [k, 1] kernels over
  [batch, time, 1, features]: the same 1-D convolutions, so they run as conv1d here."""
  as_1d = {**TINY_TDNN, "convnet_layers": [
      {"type": "conv1d", "repeat": 2, "kernel_size": [3], "stride": [2], "dilation": [1],
       "num_channels": 8, "padding": "SAME"}]}
  as_2d = {**TINY_TDNN, "convnet_layers": [
      {"type": "conv2d", "repeat": 2, "kernel_size": [3, 1], "stride": [2, 1],
       "dilation": [1, 1], "num_channels": 8, "padding": "SAME"}]}
  one, two = TDNNEncoder(as_1d, mode="eval"), TDNNEncoder(as_2d, mode="eval")
  assert two.params["convnet_layers"] == one.params["convnet_layers"]
  x = batch([9, 5])
  out_one, _ = run(one, x, [9, 5])
  run(two, x, [9, 5])
  two.set_weights(one.get_weights())  # same variables, same shapes
  out_two, _ = run(two, x, [9, 5])
  np.testing.assert_array_equal(out_one, out_two)


@pytest.mark.parametrize("layer,match", [
    ({"type": "conv2d", "kernel_size": [3, 3]}, r"kernel_size: conv2d layers here run over "
                                                r"time only"),
    ({"type": "conv1d", "kernel_size": [3, 1]}, r"kernel_size: a conv1d layer takes \[width\]"),
])
def test_conv_widths_that_are_not_over_time_are_config_errors(layer, match):
  spec = {"repeat": 1, "num_channels": 8, "padding": "SAME", **layer}
  with pytest.raises(ConfigError, match=match):
    TDNNEncoder({**TINY_TDNN, "convnet_layers": [spec]}, mode="eval")
