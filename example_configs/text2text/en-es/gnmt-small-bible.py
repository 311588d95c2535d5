"""GNMT-like RNN with attention, sized for a CPU, on the English-Spanish Bible.

The RNN counterpart of ``transformer-2x2-bible.py`` (same data, batches of ~4,096 tokens per
side, label smoothing, beam 4 with length penalty 0.6) with about as many parameters
(22.0M vs 22.6M), for side-by-side figures in docs/benchmarks.md. Encoder: 512-unit LSTMs, a
bidirectional first layer then one left-to-right layer. Decoder: two 512-unit LSTM layers in
the ``gnmt_v2`` wiring (the first layer's output queries normalized Bahdanau attention, the
context enters the upper layer at the same step). Build the data once::

    bash scripts/get_bible_en_es.sh            # writes data/bible_en_es

    python run.py --config_file=example_configs/text2text/en-es/gnmt-small-bible.py \
        --mode=train_eval
    echo "In the beginning, God created the heavens and the earth." | \
      python run.py --config_file=example_configs/text2text/en-es/gnmt-small-bible.py \
        --mode=interactive_infer

``BIBLE_DATA=DIR`` reads another folder holding the same files.
"""

import os

import keras

from open_seq2seq.data.text2text.text2text import ParallelTextDataLayer
from open_seq2seq.decoders import BeamSearchRNNDecoderWithAttention, RNNDecoderWithAttention
from open_seq2seq.encoders import GNMTLikeEncoderWithEmbedding
from open_seq2seq.losses import PaddedCrossEntropyLossWithSmoothing
from open_seq2seq.models import Text2Text
from open_seq2seq.optimizers.lr_policies import exp_decay

base_model = Text2Text
units = 512
# data/bible_en_es of this repository, wherever the command is run from
_repository = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                            os.pardir, os.pardir, os.pardir))
data_root = os.environ.get("BIBLE_DATA", os.path.join(_repository, "data", "bible_en_es"))

_lstm = {"core_cell": keras.layers.LSTMCell, "core_cell_params": {"units": units,
                                                                   "unit_forget_bias": True}}
_decoder = dict(_lstm, **{
    "decoder_layers": 2,
    "decoder_dp_input_keep_prob": 0.9,
    "decoder_dp_output_keep_prob": 1.0,
    "tgt_emb_size": units,
    "attention_type": "gnmt_v2",
    "attention_layer_size": units,
})

base_params = {
    "num_gpus": 1,
    # tokens per batch (batching="tokens" below): ~4096 source and ~4096 target tokens
    "batch_size_per_gpu": 4096,
    "max_steps": 20000,
    "save_summaries_steps": 100,
    "print_loss_steps": 100,
    "print_samples_steps": 1000,
    "eval_steps": 2000,
    "save_checkpoint_steps": 2000,
    "logdir": "GNMT-small-bible",
    "random_seed": 0,
    "dtype": "float32",
    "optimizer": "Adam",
    "optimizer_params": {},
    "lr_policy": exp_decay,
    "lr_policy_params": {"learning_rate": 1e-3, "begin_decay_at": 10000, "decay_steps": 2000,
                         "decay_rate": 0.5, "use_staircase_decay": True, "min_lr": 1e-5},
    "max_grad_norm": 5.0,
    "initializer": keras.initializers.RandomUniform,
    "initializer_params": {"minval": -0.1, "maxval": 0.1},
    "encoder": GNMTLikeEncoderWithEmbedding,
    "encoder_params": dict(_lstm, **{
        "encoder_layers": 2,
        "encoder_dp_input_keep_prob": 0.9,
        "encoder_dp_output_keep_prob": 1.0,
        "src_emb_size": units,
    }),
    "decoder": RNNDecoderWithAttention,
    "decoder_params": _decoder,
    "loss": PaddedCrossEntropyLossWithSmoothing,
    "loss_params": {"label_smoothing": 0.1},
}


def _data(split: str, **extra) -> dict:
  params = {
      "src_sentencepiece_model": os.path.join(data_root, "spm.model"),
      "tgt_sentencepiece_model": os.path.join(data_root, "spm.model"),
      # per-side vocabularies of the joint model: the pieces each language uses
      "src_vocab_file": os.path.join(data_root, "spm.en.vocab"),
      "tgt_vocab_file": os.path.join(data_root, "spm.es.vocab"),
      "source_file": os.path.join(data_root, f"{split}.en"),
      "target_file": os.path.join(data_root, f"{split}.es"),
  }
  params.update(extra)
  return params


train_params = {
    "data_layer": ParallelTextDataLayer,
    "data_layer_params": _data("train", shuffle=True, repeat=True, max_length=128,
                               batching="tokens"),
}

eval_params = {
    "batch_size_per_gpu": 64,
    "data_layer": ParallelTextDataLayer,
    "data_layer_params": _data("dev", shuffle=False, repeat=False),
}

infer_params = {
    "batch_size_per_gpu": 64,
    "decoder": BeamSearchRNNDecoderWithAttention,
    "decoder_params": dict(_decoder, beam_width=4, length_penalty=0.6,
                           decoder_dp_input_keep_prob=1.0),
    "data_layer": ParallelTextDataLayer,
    "data_layer_params": _data("test", shuffle=False, repeat=False),
}
