"""LMEncoder and LSTMLM: language model, sampled softmax, generation, classifier, transfer."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from open_seq2seq.config import resolve_config
from open_seq2seq.data import IMDBDataLayer, WKTDataLayer
from open_seq2seq.decoders import FakeDecoder, FullyConnectedDecoder
from open_seq2seq.encoders import LMEncoder
from open_seq2seq.errors import ConfigError
from open_seq2seq.losses import BasicSampledSequenceLoss, BasicSequenceLoss, CrossEntropyLoss
from open_seq2seq.models import LSTMLM
from open_seq2seq.parts.rnns.weight_drop import WeightDropLayerNormBasicLSTMCell, WeightDropLSTM
from open_seq2seq.slots import ignored_settings
from open_seq2seq.training.checkpoints import named_variables
from tests.helpers import lm

VOCAB, EMB = 30, 8
CELL = {"core_cell": WeightDropLayerNormBasicLSTMCell, "core_cell_params": {"num_units": 12}}


def _encoder(num_classes=None, mode="train", **params):
  base = {"emb_size": EMB, "encoder_layers": 2, **CELL, "weight_tied": True}
  base.update(params)
  return LMEncoder(base, vocab_size=VOCAB, num_classes=num_classes, mode=mode, end_token=1)


def _ids(batch=3, time=5, seed=0):
  ids = np.random.default_rng(seed).integers(2, VOCAB, size=(batch, time))
  return tf.constant(ids, tf.int32), tf.constant([time] * batch, tf.int32)


def test_language_model_logits_tied_and_untied():
  tied = _encoder()
  out = tied({"source_tensors": _ids()}, training=False)
  assert out["logits"].shape == (3, 5, VOCAB)
  assert tied.output_layer is None and tied.output_bias is not None
  assert isinstance(tied.stack.rnn_layers[0], WeightDropLSTM)
  assert tied.stack.rnn_layers[-1].cell.state_size[0] == EMB  # last layer: emb_size units
  hidden, _ = tied.stack(tf.gather(tied.embedding, _ids()[0]), training=False)
  want = hidden.numpy() @ tied.embedding.numpy().T + tied.output_bias.numpy()
  np.testing.assert_allclose(out["logits"].numpy(), want, atol=1e-5)
  untied = _encoder(weight_tied=False)
  out = untied({"source_tensors": _ids()}, training=False)
  assert out["logits"].shape == (3, 5, VOCAB) and untied.output_layer is not None


@pytest.mark.parametrize("params", [
    {"use_cudnn_rnn": True, "cudnn_rnn_type": keras.layers.LSTM, "core_cell": None},
    {"use_cudnn_rnn": True, "cudnn_rnn_type": keras.layers.GRU, "core_cell": None},
    {"core_cell": keras.layers.LSTMCell, "core_cell_params": {"num_units": 12,
                                                              "forget_bias": 1.0}},
    {"core_cell": keras.layers.GRUCell, "core_cell_params": {"units": 12},
     "awd_initializer": True}])
def test_fused_and_keras_cells(params):
  encoder = _encoder(**params)
  out = encoder({"source_tensors": _ids()}, training=True)
  assert out["logits"].shape == (3, 5, VOCAB)
  if params.get("use_cudnn_rnn"):  # OpenSeq2Seq: every fused layer has emb_size units
    assert all(isinstance(l, params["cudnn_rnn_type"]) for l in encoder.stack.rnn_layers)


def test_sampled_softmax_in_training_full_logits_in_eval():
  encoder = _encoder(num_sampled=5)
  train = encoder({"source_tensors": _ids()}, training=True)
  assert set(train) == {"hidden", "softmax_weights", "softmax_bias", "num_sampled"}
  assert int(train["num_sampled"]) == 5 and train["softmax_weights"].shape == (VOCAB, EMB)
  assert "logits" in encoder({"source_tensors": _ids()}, training=False)
  assert not _encoder(num_sampled=VOCAB).sampled  # as many samples as words: full softmax


def test_generation_is_the_greedy_continuation_of_the_prompt():
  encoder = _encoder(mode="infer", num_tokens_gen=6)
  ids, _ = _ids(batch=2, time=4)
  lengths = tf.constant([4, 2], tf.int32)
  out = encoder({"source_tensors": (ids, lengths)}, training=False)
  words = out["outputs"].numpy()
  assert words.shape == (2, 6)
  lm_view = _encoder(mode="eval", num_tokens_gen=6)
  lm_view({"source_tensors": _ids()}, training=False)
  lm_view.set_weights(encoder.get_weights())
  for row, length in enumerate([4, 2]):
    n = int(out["final_sequence_lengths"][row])
    sequence = np.concatenate([ids.numpy()[row, :length], words[row, :n]])
    logits = lm_view({"source_tensors": (tf.constant(sequence[None]),
                                         tf.constant([len(sequence)]))}, training=False)["logits"]
    greedy = np.argmax(logits.numpy()[0], -1)
    np.testing.assert_array_equal(greedy[length - 1:length - 1 + n], words[row, :n])


def test_generation_stops_at_eos_and_samples_with_a_temperature():
  encoder = _encoder(mode="infer", num_tokens_gen=4)
  prompt = (tf.constant([[3, 4]], tf.int32), tf.constant([2], tf.int32))
  encoder({"source_tensors": prompt})  # builds the weights
  bias = np.full(VOCAB, -30.0, np.float32)
  bias[1] = 30.0  # <eos> (end_token=1) always wins
  encoder.output_bias.assign(bias)
  out = encoder({"source_tensors": prompt}, training=False)
  assert out["final_sequence_lengths"].numpy().tolist() == [0]
  assert out["outputs"].numpy().tolist() == [[1, 1, 1, 1]]
  hot = _encoder(mode="infer", num_tokens_gen=20, temperature=5.0)
  greedy = _encoder(mode="infer", num_tokens_gen=20)
  batch = {"source_tensors": (tf.constant([[3, 4]] * 4, tf.int32), tf.constant([2] * 4))}
  hot(batch)
  greedy(batch)
  greedy.set_weights(hot.get_weights())
  sampled = hot(batch)["outputs"].numpy()
  assert len({tuple(row) for row in greedy(batch)["outputs"].numpy()}) == 1
  assert len({tuple(row) for row in sampled}) > 1  # rows draw different words
  np.testing.assert_array_equal(sampled, hot(batch)["outputs"].numpy())  # seeded


def test_classifier_features_logits_and_padding():
  encoder = _encoder(num_classes=2, use_cell_state=True)
  ids, _ = _ids(batch=2, time=6)
  out = encoder({"source_tensors": (ids, tf.constant([6, 3]))}, training=False)
  assert out["logits"].shape == (2, 2) and out["logits"].dtype == tf.float32
  padded = ids.numpy().copy()
  padded[1, 3:] = 7  # whatever lies past the length changes nothing
  again = encoder({"source_tensors": (tf.constant(padded), tf.constant([6, 3]))},
                  training=False)
  np.testing.assert_allclose(out["logits"].numpy(), again["logits"].numpy(), atol=1e-6)
  assert encoder.classifier.kernel.shape == (2 * EMB, 2)  # h and c of the last layer
  plain = LMEncoder({"emb_size": EMB, "encoder_layers": 1, **CELL}, vocab_size=VOCAB,
                    num_classes=2, classify=False)
  assert plain({"source_tensors": _ids()})["outputs"].shape == (3, 12)
  assert plain.classifier is None


def test_a_classifier_takes_the_language_model_weights_by_name():
  language_model = _encoder()
  language_model({"source_tensors": _ids()})
  classifier = _encoder(num_classes=2)
  classifier({"source_tensors": _ids()})
  lm_names = {k: v.shape for k, v in named_variables({"encoder": language_model}).items()}
  clf_names = {k: v.shape for k, v in named_variables({"encoder": classifier}).items()}
  shared = {k for k in lm_names if k in clf_names and lm_names[k] == clf_names[k]}
  assert "encoder.embedding" in shared
  assert sum("stack.rnn_layers" in k for k in shared) >= 4  # both layers' weights
  assert not any("classifier" in k for k in shared) and not any("carried" in k
                                                                for k in lm_names)


def test_configuration_errors():
  with pytest.raises(ConfigError, match="schedule_learning"):
    _encoder(schedule_learning=True)
  with pytest.raises(ConfigError, match="cudnn_rnn_type"):
    _encoder(use_cudnn_rnn=True, cudnn_rnn_type=None)
  with pytest.raises(ConfigError, match="core_cell"):
    _encoder(core_cell=None)
  with pytest.raises(ConfigError, match="keep probability"):
    _encoder(encoder_emb_keep_prob=0.0)
  with pytest.raises(ConfigError, match="weight_variational"):
    _encoder(weight_variational=True)


# ---------------------------------------------------------------------- the model
@pytest.fixture
def wiki(tmp_path):
  return lm.write_wikitext(str(tmp_path / "wikitext"))


def _config(tmp_path, wiki_root, mode="train", **top):
  params = {
      "batch_size_per_gpu": 4, "max_steps": 2,
      "encoder": LMEncoder,
      "encoder_params": {"emb_size": EMB, "encoder_layers": 1, **CELL, "weight_tied": True},
      "decoder": FakeDecoder, "loss": BasicSequenceLoss,
      "loss_params": {"average_across_timestep": True},
      "data_layer": WKTDataLayer,
      "data_layer_params": {"data_root": wiki_root, "bptt": 6, "shuffle": False,
                            "processed_data_folder": str(tmp_path / "processed")},
  }
  params.update(top)
  return resolve_config(LSTMLM, params, mode)


def test_language_model_wiring_eval_perplexity_and_carried_state(tmp_path, wiki):
  model = LSTMLM(_config(tmp_path, wiki), "train")
  assert model.is_lm and model.best_metric == ("perplexity", False)
  assert model.encoder.stack.carry_state  # shuffle False: stream batches
  batch = next(iter(model.data_layer.build_dataset()))
  model.create_variables(batch)
  out = model.eval_outputs(batch)
  loss = float(out["loss_sum"] / out["weight"])
  results = model.evaluate(tf.nest.map_structure(lambda t: t.numpy(), batch),
                           tf.nest.map_structure(lambda t: t.numpy(), out["predictions"]))
  metrics = model.finalize_evaluation(results)
  assert metrics["perplexity"] == pytest.approx(np.exp(loss), rel=1e-4)
  assert type(metrics["eval_tokens"]) is int  # a count, printed as one (issue 38)
  lines = model.format_samples(tf.nest.map_structure(lambda t: t.numpy(), batch),
                               tf.nest.map_structure(lambda t: t.numpy(), out["predictions"]))
  assert lines[0].startswith("Sample source:") and lines[1].startswith("Sample target:")
  shuffled = _config(tmp_path, wiki)
  shuffled["data_layer_params"]["shuffle"] = True
  assert not LSTMLM(shuffled, "train").encoder.stack.carry_state


def test_sampled_softmax_needs_the_sampled_loss(tmp_path, wiki):
  config = _config(tmp_path, wiki)
  config["encoder_params"]["num_sampled"] = 3
  with pytest.raises(ConfigError, match="BasicSampledSequenceLoss"):
    LSTMLM(config, "train")
  config["loss"] = BasicSampledSequenceLoss
  LSTMLM(config, "train")


def test_classifier_takes_the_top_level_vocabulary_and_reports_per_class(tmp_path, wiki):
  LSTMLM(_config(tmp_path, wiki), "train")  # builds the LM's processed folder and vocab
  root = lm.write_aclimdb(str(tmp_path / "aclImdb"), lm.imdb_reviews(per_folder=4))
  config = _config(tmp_path, wiki, "eval", loss=CrossEntropyLoss, loss_params={},
                   data_layer=IMDBDataLayer,
                   lm_vocab_file=str(tmp_path / "processed" / "vocab.txt"),
                   processed_data_folder=str(tmp_path / "imdb"),
                   data_layer_params={"data_root": root, "max_length": 20, "valid_size": 2})
  model = LSTMLM(config, "eval")
  assert not model.is_lm and model.best_metric == ("accuracy", True)
  batch = next(iter(model.data_layer.build_dataset()))
  model.create_variables(batch)
  out = tf.nest.map_structure(lambda t: t.numpy(), model.eval_outputs(batch)["predictions"])
  results = model.evaluate(tf.nest.map_structure(lambda t: t.numpy(), batch), out)
  metrics = model.finalize_evaluation(results)
  assert {"accuracy", "precision_positive", "recall_negative", "macro_f1"} <= set(metrics)
  fc = dict(config, decoder=FullyConnectedDecoder)
  model = LSTMLM(fc, "eval")
  assert model.encoder.classifier is None and model.decoder.output_dim == 2


def test_fused_layers_name_the_dropouts_they_do_not_apply(tmp_path, wiki):
  config = _config(tmp_path, wiki)
  config["encoder_params"] = {"emb_size": EMB, "encoder_layers": 1, "use_cudnn_rnn": True,
                              "cudnn_rnn_type": keras.layers.LSTM, "recurrent_keep_prob": 0.7,
                              "core_cell_params": {"num_units": 12}}
  lines = ignored_settings(LSTMLM, config)
  assert "encoder_params/recurrent_keep_prob: ignored: fused layers (use_cudnn_rnn) have no " \
         "cell dropout" in lines
  assert any(line.startswith("encoder_params/core_cell_params: ignored") for line in lines)


def test_top_level_processed_folder_reaches_a_layer_that_sets_none(tmp_path, wiki):
  config = _config(tmp_path, wiki, processed_data_folder=str(tmp_path / "top"))
  del config["data_layer_params"]["processed_data_folder"]
  config = resolve_config(LSTMLM, config, "train")
  LSTMLM(config, "train")
  assert (tmp_path / "top" / "vocab.txt").is_file()
  # the layer's own setting wins
  LSTMLM(_config(tmp_path, wiki, processed_data_folder=str(tmp_path / "unused")), "train")
  assert not (tmp_path / "unused").exists()


def test_eval_runs_one_forward_pass_per_batch(tmp_path, wiki):
  model = LSTMLM(_config(tmp_path, wiki), "eval")
  batch = next(iter(model.data_layer.build_dataset()))
  model.create_variables(batch)
  calls = []
  forward = model.forward
  model.forward = lambda *a, **k: calls.append(1) or forward(*a, **k)
  out = model.eval_outputs(batch)
  assert len(calls) == 1 and {"loss_sum", "weight", "predictions"} <= set(out)
  model.predictions_from_loss_pass = False  # the base behaviour: predict, then the loss
  model.eval_outputs(batch)
  assert len(calls) == 3
