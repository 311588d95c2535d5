"""Transformer (d_model 256, 4 heads, FFN 1024, 3+3 layers) on the English-Spanish Bible.

The model of the quality comparison with OpenNMT-tf and fairseq in docs/benchmarks.md
("Translation quality beside the peers"): the same size, schedule and batches as the peers'
runs of ``scripts/peer_quality.sh``, which trains all three the same number of steps and
scores beam-4 translations of the test verses with sacreBLEU. Pre-norm (the peers'
defaults), dropout 0.1, label smoothing 0.1, Adam (0.9, 0.998, 1e-8) with an inverse-sqrt
schedule that peaks at 5e-4 after 400 linear warm-up steps (fairseq's ``inverse_sqrt``,
OpenNMT-tf's ``InvSqrtDecay``: ``transformer_policy`` with ``learning_rate`` 0.16 =
5e-4 * 256 ** 0.5 * 400 ** 0.5), ~4,096 tokens per side per batch, separate embeddings and
output layer (as the peers' defaults). Data as ``transformer-2x2-bible.py`` (raw verses,
``spm.model``, per-side vocabularies ``spm.{en,es}.vocab``; ``BIBLE_DATA=DIR`` reads another
folder)::

    bash scripts/get_bible_en_es.sh            # writes data/bible_en_es
    python run.py --config_file=example_configs/text2text/en-es/transformer-3x3-bible-d256.py \
        --mode=train_eval
"""

import os

from open_seq2seq.data.text2text.text2text import ParallelTextDataLayer
from open_seq2seq.decoders import TransformerDecoder
from open_seq2seq.encoders import TransformerEncoder
from open_seq2seq.losses import PaddedCrossEntropyLossWithSmoothing
from open_seq2seq.models import Text2Text
from open_seq2seq.optimizers.lr_policies import transformer_policy

base_model = Text2Text
d_model = 256
warmup_steps = 400
# data/bible_en_es of this repository, wherever the command is run from
_repository = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                            os.pardir, os.pardir, os.pardir))
data_root = os.environ.get("BIBLE_DATA", os.path.join(_repository, "data", "bible_en_es"))

_transformer = {
    "hidden_size": d_model,
    "num_heads": 4,
    "filter_size": 1024,
    "attention_dropout": 0.1,
    "relu_dropout": 0.1,
    "layer_postprocess_dropout": 0.1,
    "norm_placement": "pre",
}

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
    "logdir": "Transformer-3x3-bible-d256",
    "random_seed": 0,
    "dtype": "float32",
    "optimizer": "Adam",
    "optimizer_params": {"beta1": 0.9, "beta2": 0.998, "epsilon": 1e-8},
    "lr_policy": transformer_policy,
    # peak 5e-4 at step 400, then 5e-4 * (400 / step) ** 0.5: the peers' inverse-sqrt
    "lr_policy_params": {"learning_rate": 5e-4 * d_model ** 0.5 * warmup_steps ** 0.5,
                         "warmup_steps": warmup_steps, "d_model": d_model},
    "encoder": TransformerEncoder,
    "encoder_params": dict(_transformer, encoder_layers=3),
    "decoder": TransformerDecoder,
    # beam_finish "top_k": an </S> ends a hypothesis only among the step's 4 best extensions,
    # as in OpenNMT-tf and CTranslate2; the exact "any" gave test BLEU 0.7 at step 1,000
    # against 18.4 (docs/benchmarks.md, "Translation quality beside the peers")
    "decoder_params": dict(_transformer, num_hidden_layers=3, beam_size=4, alpha=0.6,
                           extra_decode_length=50, tie_weights=False, beam_stop="current",
                           beam_finish="top_k"),
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
    "data_layer_params": _data("dev", shuffle=False, repeat=False, bucket_width=4),
}

infer_params = {
    "batch_size_per_gpu": 64,
    "data_layer": ParallelTextDataLayer,
    "data_layer_params": _data("test", shuffle=False, repeat=False, bucket_width=4),
}
