"""FullyConnectedCTCDecoder: a linear layer to CTC classes, with greedy or beam decoding;
FullyConnectedSCDecoder: a linear layer from a whole feature sequence to one class
(OpenSeq2Seq's speech commands decoder)."""

from __future__ import annotations

import os
from typing import Any, Mapping

import keras
import numpy as np
import tensorflow as tf

from open_seq2seq.decoders.ctc_beam_search import CTCBeamSearchDecoder
from open_seq2seq.decoders.decoder import Decoder
from open_seq2seq.decoders.fc_classifier import FullyConnectedDecoder
from open_seq2seq.errors import ConfigError
from open_seq2seq.utils.component import resolve_size
from open_seq2seq.utils.initializers import INITIALIZER_PARAMS
from open_seq2seq.utils.params import AnyType, Param, non_negative_int


def ctc_greedy_ids(logits: tf.Tensor, lengths: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
  """Best path per row (argmax, merge repeats, drop blanks = last class), padded with -1."""
  blank = tf.shape(logits)[-1] - 1
  best = tf.argmax(logits, axis=-1, output_type=tf.int32)
  previous = tf.pad(best[:, :-1], [[0, 0], [1, 0]], constant_values=-1)
  keep = (best != previous) & (best != blank) & tf.sequence_mask(lengths, tf.shape(best)[1])
  decoded = tf.ragged.boolean_mask(best, keep)
  return decoded.to_tensor(default_value=-1), tf.cast(decoded.row_lengths(), tf.int32)


def ctc_greedy_token_frames(logits: tf.Tensor, lengths: tf.Tensor
                            ) -> tuple[tf.Tensor, tf.Tensor]:
  """The frames of each greedy id (:func:`ctc_greedy_ids`' order and padding): the first
  frame of its run on the best path and the frame after its last, padded with -1."""
  blank = tf.shape(logits)[-1] - 1
  best = tf.argmax(logits, axis=-1, output_type=tf.int32)
  valid = tf.sequence_mask(lengths, tf.shape(best)[1])
  previous = tf.pad(best[:, :-1], [[0, 0], [1, 0]], constant_values=-1)
  following = tf.pad(best[:, 1:], [[0, 0], [0, 1]], constant_values=-1)
  following_valid = tf.pad(valid[:, 1:], [[0, 0], [0, 1]])
  token = valid & (best != blank)
  first = token & (best != previous)
  last = token & ((best != following) | ~following_valid)
  frames = tf.broadcast_to(tf.range(tf.shape(best)[1]), tf.shape(best))
  starts = tf.ragged.boolean_mask(frames, first).to_tensor(default_value=-1)
  ends = tf.ragged.boolean_mask(frames + 1, last).to_tensor(default_value=-1)
  return starts, ends


def ctc_beam_ids(logits: tf.Tensor, lengths: tf.Tensor, beam_width: int
                 ) -> tuple[tf.Tensor, tf.Tensor]:
  """TensorFlow's CTC beam search (no language model), padded with -1."""
  decoded, _ = tf.nn.ctc_beam_search_decoder(
      tf.transpose(tf.nn.log_softmax(logits), [1, 0, 2]), lengths, beam_width=beam_width,
      top_paths=1)
  dense = tf.sparse.to_dense(decoded[0], default_value=-1)
  dense = tf.cast(dense, tf.int32)
  return dense, tf.reduce_sum(tf.cast(dense >= 0, tf.int32), axis=1)


def _str_list(value: Any) -> bool:
  return isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value)


_str_list.type_name = "list of str"


class FullyConnectedCTCDecoder(Decoder):
  """Projects encoder outputs to ``tgt_vocab_size`` CTC classes (blank last).

  Returns ``logits`` [B, T, V] (float32, in every mode: the CTC loss and LM decoding need
  them), ``src_lengths`` (logit lengths), ``outputs`` (decoded ids padded with -1) and
  ``final_sequence_lengths``; built with ``token_frames`` (the Speech2Text model asks for them
  in infer modes with ``word_timestamps``), greedy decoding also returns
  ``token_start_frames`` and ``token_end_frames``, each id's run of frames on the best path
  ``[start, end)`` padded with -1 (for a beam search's or the LM's result the model aligns
  the logits itself: :func:`open_seq2seq.utils.word_timestamps.ctc_forced_path`). Greedy
  decoding by default; ``use_beam_search`` runs
  TensorFlow's CTC beam search; ``use_language_model`` decodes the logits with a CTC prefix
  beam search fused with a KenLM n-gram model, in worker processes on each process's own
  share of the data (:meth:`decode_with_lm`, called by the Speech2Text model's eval/infer
  hooks; see :mod:`open_seq2seq.decoders.ctc_beam_search`).

  The number of classes is ``tgt_vocab_size`` if set, else ``vocab_size``; the model passes
  it and the alphabet ``idx2char`` (needed by the LM decoder) from its data layer's
  description.
  """

  PARAMS = {
      "tgt_vocab_size": Param((int, None), None,
                              "CTC classes incl. blank (default: the data layer's)."),
      **INITIALIZER_PARAMS,
      "use_beam_search": Param(bool, False, "CTC beam search without LM (TF op)."),
      "use_language_model": Param(bool, False, "Beam search fused with the n-gram LM lm_path."),
      "lm_path": Param((str, None), None, "ARPA or KenLM binary language model."),
      "beam_width": Param(int, 16, "Beams kept by beam search."),
      "alpha": Param(float, 0.5, "Language model weight (on the natural-log LM probability)."),
      "beta": Param(float, 1.0, "Word insertion bonus."),
      "unk_score_offset": Param(float, -10.0, "LM decoding: score (natural log) of a word, or "
                                "partial word, outside the LM's vocabulary."),
      "beam_prune_logp": Param((float, None), None, "LM decoding: also drop beams this far "
                               "(natural log) below the best (None: keep beam_width)."),
      "token_min_logp": Param((float, None), None, "LM decoding: skip symbols below this "
                              "log-probability in a frame, but its best (None: skip none)."),
      "hotwords": Param((_str_list, None), None, "LM decoding: words to favour."),
      "hotword_weight": Param(float, 10.0, "LM decoding: score (natural log) per hotword."),
      "num_decoding_workers": Param((non_negative_int, None), None,
                                    "LM decoding processes per batch (None: one per core, at "
                                    "most the batch size; 0 or 1: none)."),
      "infer_logits_to_pickle": Param(bool, False,
                                      "In infer mode, also write every utterance's logits "
                                      "(an .npz of names, lengths and values)."),
      "infer_logits_file": Param((str, None), None,
                                 "Where the logits go (default: <logdir>/infer_logits.npz; a "
                                 ".pickle or .pkl name gets OpenSeq2Seq's pickle)."),
      "decoder_library_path": Param(AnyType, None, "Ignored: OpenSeq2Seq's TF 1 custom op; "
                                    "the built-in beam decoder needs none."),
      "trie_path": Param(AnyType, None, "Ignored: the LM decoder needs no trie."),
      "alphabet_config_path": Param(AnyType, None, "Ignored: the data layer's vocab is used."),
  }

  def __init__(self, params: dict[str, Any], *, vocab_size: int | None = None,
               idx2char: Mapping[int, str] | None = None, mode: str = "train",
               name: str = "decoder", dtype: Any = "float32", initializer: Any = None,
               token_frames: bool = False):
    super().__init__(params, mode=mode, name=name, dtype=dtype, initializer=initializer)
    p = self.params
    self.vocab_size = resolve_size(p, "tgt_vocab_size", vocab_size, "decoder_params")
    self.idx2char = idx2char
    self.token_frames = token_frames
    if p["use_language_model"] and not p["lm_path"]:
      raise ConfigError("decoder_params/lm_path: use_language_model needs an ARPA/KenLM file")
    if p["use_language_model"] and not os.path.isfile(p["lm_path"]):
      raise ConfigError(f"decoder_params/lm_path: {p['lm_path']} does not exist; build one "
                        f"with scripts/build_lm.py")
    self.fc = keras.layers.Dense(
        self.vocab_size,
        kernel_initializer=self.kernel_initializer(),
        dtype=self.dtype_policy, name="fully_connected")
    self._beam_decoder = None

  def call(self, input_dict: dict, training: bool | None = None) -> dict:
    encoder_output = input_dict["encoder_output"]
    lengths = tf.cast(encoder_output["src_lengths"], tf.int32)
    logits = tf.cast(self.fc(encoder_output["outputs"]), tf.float32)
    if self.params["use_beam_search"] and not training:
      ids, id_lengths = ctc_beam_ids(logits, lengths, self.params["beam_width"])
    else:
      ids, id_lengths = ctc_greedy_ids(logits, lengths)
      if self.token_frames and not training:
        starts, ends = ctc_greedy_token_frames(logits, lengths)
        return {"logits": logits, "src_lengths": lengths, "outputs": ids,
                "final_sequence_lengths": id_lengths, "token_start_frames": starts,
                "token_end_frames": ends}
    return {"logits": logits, "src_lengths": lengths, "outputs": ids,
            "final_sequence_lengths": id_lengths}

  # ------------------------------------------------------------------ LM decoding
  def decode_with_lm(self, logits: np.ndarray, lengths: np.ndarray) -> list[str]:
    """Transcripts of a batch of numpy logits [B, T, V], by beam search fused with the LM.

    The decoder (LM loaded, worker processes started) is built on first use, in the process
    that decodes: each process of a multi-process job decodes its own batches.
    """
    if self._beam_decoder is None:
      if self.idx2char is None:
        raise ConfigError("decoder_params/use_language_model: needs the target alphabet "
                          "(idx2char=, passed by the Speech2Text model)")
      p = self.params
      self._beam_decoder = CTCBeamSearchDecoder(
          self.idx2char, p["beam_width"], p["lm_path"], p["alpha"], p["beta"],
          unk_score_offset=p["unk_score_offset"], beam_prune_logp=p["beam_prune_logp"],
          token_min_logp=p["token_min_logp"], hotwords=p["hotwords"],
          hotword_weight=p["hotword_weight"], num_workers=p["num_decoding_workers"])
    return self._beam_decoder.decode_batch(logits, lengths)


class FullyConnectedSCDecoder(FullyConnectedDecoder):
  """Speech commands: one linear layer from the flattened encoder sequence to the classes.

  Input: ``encoder_output["outputs"]`` [batch, time, channels] from a convolutional encoder
  (TDNNEncoder) over fixed-size clips (SpeechCommandsDataLayer); the whole sequence is
  flattened per example (time must be static), as OpenSeq2Seq did, so the layer sees where
  in the clip each feature is. Returns ``logits`` [batch, output_dim] in float32 and
  ``outputs``, the predicted class ids. ``output_dim`` is OpenSeq2Seq's (required there;
  here it defaults to the data's number of classes).
  """

  def call(self, input_dict: dict, training: bool | None = None) -> dict:
    features = input_dict["encoder_output"]["outputs"]
    if len(features.shape) > 2 and any(d is None for d in features.shape[1:]):
      raise ConfigError(f"decoder: FullyConnectedSCDecoder needs encoder outputs of a fixed "
                        f"size, got shape {features.shape}; use fixed-length inputs "
                        f"(SpeechCommandsDataLayer's audio_length)")
    return super().call(input_dict, training=training)
