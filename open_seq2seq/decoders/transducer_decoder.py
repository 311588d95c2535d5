"""TransducerDecoder: the prediction and joint networks of an RNN transducer (Graves, 2012),
trained with :class:`~open_seq2seq.losses.RNNTLoss`, decoding greedily or by beam search.

**Networks** (:mod:`open_seq2seq.parts.transducer.networks`, as NeMo's ``RNNTDecoder`` and
``RNNTJoint``): the prediction network embeds the previous label (the blank, embedded as
zeros, is the start context) and runs ``pred_num_layers`` LSTM layers of ``pred_hidden``
units; the joint network projects encoder frames and prediction outputs to ``joint_hidden``,
adds them, applies ``joint_activation`` and a linear layer to the ``tgt_vocab_size``
classes, the blank last (the data layer's CTC layout, and :class:`RNNTLoss`'s default
``blank: -1``).

**With targets** (train, and eval's loss): teacher forcing over ``[start] + targets``, the
joint over every frame and label prefix. Returns ``"logits"`` [B, T, U+1, V] (in the joint's
compute dtype) and ``"src_lengths"`` [B], RNNTLoss's contract. Logits inside an utterance's
lattice (``t < T_b``, ``u <= U_b``) do not depend on the batch's padding.

**Without targets** (eval and infer predictions, export): greedy search (default) or, with
``use_beam_search``, alignment-length synchronous beam search of ``beam_width`` hypotheses
(equal label sequences merged), both at most ``max_symbols_per_step`` labels per frame and
both ``tf.while_loop`` s (:mod:`open_seq2seq.parts.transducer.search`), so an exported model
decodes either way. Returns ``"outputs"`` (label ids padded with -1),
``"final_sequence_lengths"``, ``"scores"`` (log-probability of the result: the greedy path's,
or the beam's merged alignments') and ``"src_lengths"``, as the CTC decoder does, so that
Speech2Text turns them into text the same way. Built with ``token_frames`` (the Speech2Text
model asks for them in infer modes with ``word_timestamps``), it also returns the frame each
label was emitted on (the beam's: of the result's most likely alignment) as
``"token_start_frames"`` and, one frame later, ``"token_end_frames"`` (padded with -1).

**With an n-gram LM** (``use_language_model``, ``lm_path``, ``alpha``, ``beta``,
``unk_score_offset``: the CTC decoder's keys, LM files and meaning): the graph decodes
greedily (what an export serves: the LM is not exported) and also returns ``"frames"``, the
encoder frames through the joint's encoder projection [B, T, joint_hidden]; Speech2Text's
eval and infer hooks hand them to :meth:`TransducerDecoder.decode_with_lm`, a time
synchronous beam search of ``beam_width`` hypotheses fused with the LM on the host, the
prediction and joint networks batched in TensorFlow
(:mod:`open_seq2seq.parts.transducer.lm_fusion`). ``use_beam_search`` (the in-graph beam)
and ``word_timestamps`` (the in-graph search's frames) are refused with it.

**Memory.** The joint's output is the cost of a transducer: the hidden sum and the logits are
``B x T x (U+1) x joint_hidden`` and ``B x T x (U+1) x V`` values (the loss then needs about
twice the logits again, its gradient included; see
:mod:`open_seq2seq.losses.transducer_loss`). For B=16, T=100 frames, U=40 characters, V=29
and joint_hidden=128 that is 16*100*41*(128+29) = 10.3 M values, 41 MB in float32 for the
forward pass. ``joint_dtype`` picks their precision: by default the model's compute dtype
(bfloat16 under ``dtype: "mixed"`` on a CPU: half the memory), ``"float32"`` keeps the joint
in float32 under a mixed policy. With BPE vocabularies (V in the thousands) the logits
dominate: keep batches small or subsample the encoder more (x8).
"""

from __future__ import annotations

import os
from typing import Any, Mapping

import numpy as np
import tensorflow as tf

from open_seq2seq.decoders.ctc_beam_search import load_kenlm, read_arpa_vocabulary
from open_seq2seq.decoders.decoder import MemoryDepthDecoder
from open_seq2seq.errors import ConfigError
from open_seq2seq.parts.transducer.lm_fusion import FusedSearch, HostNetworks
from open_seq2seq.parts.transducer.networks import ACTIVATIONS, JointNetwork, PredictionNetwork
from open_seq2seq.parts.transducer.search import (alignment_length_synchronous_search,
                                                  greedy_search)
from open_seq2seq.utils.component import resolve_size
from open_seq2seq.utils.initializers import INITIALIZER_PARAMS
from open_seq2seq.utils.params import Param

#: ``joint_dtype`` -> the joint network's Keras policy (variables stay float32 unless the
#: model's are float16).
_JOINT_POLICIES = {"float32": "float32", "bfloat16": "mixed_bfloat16",
                   "float16": "mixed_float16"}


class TransducerDecoder(MemoryDepthDecoder):
  """RNN-T prediction + joint networks with greedy or beam search (module doc)."""

  PARAMS = {
      "tgt_vocab_size": Param((int, None), None, "Joint outputs, the blank (last) included "
                              "(default: the data layer's, symbols + 1)."),
      **INITIALIZER_PARAMS,
      "pred_hidden": Param(int, 320, "Units of each prediction-network LSTM layer (NeMo's "
                           "prednet/pred_hidden)."),
      "pred_num_layers": Param(int, 1, "LSTM layers of the prediction network (NeMo's "
                               "pred_rnn_layers)."),
      "pred_embedding_size": Param((int, None), None, "Width of the label embedding (None: "
                                   "pred_hidden, as NeMo)."),
      "pred_dropout": Param(float, 0.2, "Dropout on each prediction-network layer's output "
                            "(training only)."),
      "joint_hidden": Param(int, 320, "Width of the joint network's encoder and prediction "
                            "projections."),
      "joint_activation": Param(str, "relu", "Activation of the joint's summed projections "
                                "(relu: NeMo's default; tanh: Graves').",
                                choices=tuple(ACTIVATIONS)),
      "joint_dropout": Param(float, 0.2, "Dropout after the joint's activation (training "
                             "only)."),
      "joint_dtype": Param((str, None), None, "Compute dtype of the joint network and of the "
                           "[B, T, U+1, V] logits: None (the model's), float32, bfloat16 or "
                           "float16.", choices=(None, *_JOINT_POLICIES)),
      "max_symbols_per_step": Param(int, 10, "Labels emitted on one frame at most, greedy or "
                                    "beam (NeMo's max_symbols)."),
      "use_beam_search": Param(bool, False, "Decode by alignment-length synchronous beam "
                               "search instead of greedy search."),
      "beam_width": Param(int, 4, "Hypotheses kept by beam search (in graph, or with the "
                          "LM on the host)."),
      "use_language_model": Param(bool, False, "Eval/infer: time synchronous beam search "
                                  "fused with the n-gram LM lm_path, on the host."),
      "lm_path": Param((str, None), None, "ARPA or KenLM binary word language model."),
      "alpha": Param(float, 0.5, "LM weight (on the natural-log LM probability)."),
      "beta": Param(float, 1.0, "LM decoding: bonus per word."),
      "unk_score_offset": Param(float, -10.0, "LM decoding: score (natural log) of a word, or "
                                "partial word, outside the LM's vocabulary."),
  }

  def __init__(self, params: dict[str, Any], *, vocab_size: int | None = None,
               end_symbol: int | None = None, mode: str = "train", name: str = "decoder",
               dtype: Any = "float32", initializer: Any = None, token_frames: bool = False,
               idx2char: Mapping[int, str] | None = None):
    super().__init__(params, mode=mode, name=name, dtype=dtype, initializer=initializer)
    p = self.params
    self.token_frames, self.idx2char = token_frames, idx2char
    where = self.PARAMS_KEY
    if end_symbol is not None:
      raise ConfigError(f"{where}: a transducer reads targets without <S>/</S>; set "
                        f"data_layer_params/autoregressive: False")
    for key in ("pred_hidden", "pred_num_layers", "joint_hidden", "max_symbols_per_step",
                "beam_width"):
      if p[key] < 1:
        raise ConfigError(f"{where}/{key}: must be at least 1, got {p[key]}")
    if p["pred_embedding_size"] is not None and p["pred_embedding_size"] < 1:
      raise ConfigError(f"{where}/pred_embedding_size: must be at least 1 (or None), got "
                        f"{p['pred_embedding_size']}")
    for key in ("pred_dropout", "joint_dropout"):
      if not 0.0 <= p[key] < 1.0:
        raise ConfigError(f"{where}/{key}: must be in [0, 1), got {p[key]}")
    self.vocab_size = resolve_size(p, "tgt_vocab_size", vocab_size, where)
    if self.vocab_size < 2:
      raise ConfigError(f"{where}/tgt_vocab_size: needs a label and the blank, got "
                        f"{self.vocab_size}")
    self.blank = self.vocab_size - 1
    if p["use_language_model"]:
      self._check_lm_settings()
    self._fused: FusedSearch | None = None  # made on first use (decode_with_lm)
    init = self.kernel_initializer()
    self.prediction = PredictionNetwork(
        self.vocab_size, self.blank, p["pred_embedding_size"] or p["pred_hidden"],
        p["pred_hidden"], p["pred_num_layers"], p["pred_dropout"], init,
        dtype=self.dtype_policy, name="prediction")
    joint_policy = self.dtype_policy
    if p["joint_dtype"] is not None:
      joint_policy = _JOINT_POLICIES[p["joint_dtype"]]
    self.joint = JointNetwork(p["joint_hidden"], self.vocab_size, p["joint_activation"],
                              p["joint_dropout"], init, dtype=joint_policy, name="joint")

  def _check_lm_settings(self) -> None:
    p, where = self.params, self.PARAMS_KEY
    if not p["lm_path"]:
      raise ConfigError(f"{where}/lm_path: use_language_model needs an ARPA/KenLM file; "
                        f"build one with scripts/build_lm.py")
    if not os.path.isfile(p["lm_path"]):
      raise ConfigError(f"{where}/lm_path: {p['lm_path']} does not exist; build one with "
                        f"scripts/build_lm.py")
    if p["use_beam_search"]:
      raise ConfigError(f"{where}/use_beam_search: use_language_model decodes by beam search "
                        f"on the host (beam_width); set use_beam_search: False")
    if self.token_frames:
      raise ConfigError(f"{where}/use_language_model: a transducer's word timestamps come from "
                        f"its in-graph search; set use_language_model: False or "
                        f"word_timestamps: False")
    if self.idx2char is None or len(self.idx2char) != self.vocab_size - 1:
      got = "none" if self.idx2char is None else f"{len(self.idx2char)} symbols"
      raise ConfigError(f"{where}/use_language_model: needs the alphabet of the "
                        f"{self.vocab_size - 1} labels (idx2char, passed by Speech2Text), got "
                        f"{got}")

  def build(self, input_shape: Any = None) -> None:
    self.built = True

  def build_for_memory(self, memory_depth: int) -> None:
    self.prediction.build()
    self.joint.build_for(memory_depth, self.params["pred_hidden"])

  # ----------------------------------------------------------------- modes
  def call(self, input_dict: dict, training: bool | None = None) -> dict:
    encoder_output = input_dict["encoder_output"]
    features = encoder_output["outputs"]
    lengths = tf.cast(encoder_output["src_lengths"], tf.int32)
    self._ensure_built(features.shape[-1])
    frames = self.joint.project_encoder(features)  # [B, T, H], once for every label prefix
    if input_dict.get("target_tensors") is not None:
      targets = input_dict["target_tensors"][0]
      return {"logits": self.lattice_logits(frames, targets, training), "src_lengths": lengths}
    if self.token_frames:
      ids, id_lengths, scores, emitted_on = self.decode(frames, lengths, return_frames=True)
      return {"outputs": ids, "final_sequence_lengths": id_lengths, "scores": scores,
              "src_lengths": lengths, "token_start_frames": emitted_on,
              "token_end_frames": tf.where(emitted_on >= 0, emitted_on + 1, -1)}
    ids, id_lengths, scores = self.decode(frames, lengths)
    out = {"outputs": ids, "final_sequence_lengths": id_lengths, "scores": scores,
           "src_lengths": lengths}
    if self.params["use_language_model"]:
      out["frames"] = frames  # decode_with_lm's input, on the host
    return out

  def lattice_logits(self, frames: tf.Tensor, targets: tf.Tensor,
                     training: bool | None = None) -> tf.Tensor:
    """Joint logits [B, T, U+1, V] of projected frames [B, T, H] and targets [B, U]."""
    predicted = self.joint.project_prediction(self.prediction.sequence(targets, training))
    return self.joint.logits(frames[:, :, None], predicted[:, None], training)

  def decode(self, frames: tf.Tensor, lengths: tf.Tensor, return_frames: bool = False
             ) -> tuple[tf.Tensor, ...]:
    """(ids [B, L] padded with -1, lengths [B], scores [B]) of projected frames [B, T, H],
    and with ``return_frames`` the frame of each id [B, L] (padded with -1)."""
    p = self.params
    if p["use_beam_search"]:
      rows = tf.shape(frames)[0] * p["beam_width"]
      return alignment_length_synchronous_search(
          frames, lengths, self.prediction.initial_state(rows), self._predict,
          self._joint_step, self.blank, p["beam_width"], p["max_symbols_per_step"],
          return_frames=return_frames)
    return greedy_search(frames, lengths, self.prediction.initial_state(tf.shape(frames)[0]),
                         self._predict, self._joint_step, self.blank,
                         p["max_symbols_per_step"], return_frames=return_frames)

  def decode_with_lm(self, frames: np.ndarray, lengths: np.ndarray) -> list[str]:
    """Transcripts of a batch of projected frames [B, T, H] (numpy: the ``"frames"`` output)
    by beam search fused with the LM (module doc)."""
    results = self.lm_search(frames, lengths)
    return [self._fused.transcript(labels) for labels, _, _ in results]

  def lm_search(self, frames: np.ndarray, lengths: np.ndarray
                ) -> list[tuple[tuple[int, ...], float, float]]:
    """:func:`~open_seq2seq.parts.transducer.lm_fusion.fused_beam_search` of a batch: per
    utterance (labels, ln P_rnnt, fused score). The LM is loaded on first use, in the process
    that decodes; alpha, beta and unk_score_offset are read from the params at every call."""
    p = self.params
    if not p["use_language_model"]:
      raise ConfigError(f"{self.PARAMS_KEY}/use_language_model: LM decoding needs it True and "
                        f"an lm_path")
    if self._fused is None:
      lm = load_kenlm(p["lm_path"])
      with open(p["lm_path"], "rb") as f:
        arpa = b"\\data\\" in f.read(4096)
      networks = HostNetworks(self._predict, self._joint_step, self.prediction.initial_state,
                              self.blank)
      self._fused = FusedSearch(networks, lm, read_arpa_vocabulary(p["lm_path"]) if arpa
                                else None, [self.idx2char[i] for i in range(self.blank)])
    return self._fused(frames, lengths, p["alpha"], p["beta"], p["unk_score_offset"],
                       p["beam_width"], p["max_symbols_per_step"])

  def _predict(self, ids: tf.Tensor, state: Any) -> tuple[tf.Tensor, Any]:
    output, state = self.prediction.step(ids, state)
    return self.joint.project_prediction(output), state

  def _joint_step(self, frame: tf.Tensor, predicted: tf.Tensor) -> tf.Tensor:
    return self.joint.logits(frame, predicted, training=False)


__all__ = ["TransducerDecoder"]
