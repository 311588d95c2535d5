"""Transformer (d_model 512, 8 heads, FFN 2048, 2+2 layers) on the English-Spanish Bible.

The data and model dimensions of the peer baselines in docs/benchmarks.md (OpenNMT-tf,
fairseq), for side-by-side throughput figures. Build the data once (a minute; public-domain
World English Bible and Reina-Valera 1909 from Debian's SWORD packages, verse-aligned, 1000
test and 1000 dev pairs, a joint SentencePiece BPE model of 8000 pieces)::

    bash scripts/get_bible_en_es.sh            # writes data/bible_en_es

The data layer reads the raw verses and encodes them with ``spm.model`` when it is built
(``src_sentencepiece_model`` / ``tgt_sentencepiece_model``); each side's vocabulary is the
pieces its language uses (``spm.en.vocab``: 4,725, ``spm.es.vocab``: 5,292 of the 8,000, as
the peers' per-side vocabularies), translations are detokenized, and BLEU (sacreBLEU)
compares them with the raw reference verses. ``BIBLE_DATA=DIR`` reads another folder holding
the same files (``{train,dev,test}.{en,es}``, ``spm.model``, ``spm.{en,es}.vocab``). Infer
and interactive_infer take raw English.

    python run.py --config_file=example_configs/text2text/en-es/transformer-2x2-bible.py \
        --mode=train_eval
    python run.py --config_file=example_configs/text2text/en-es/transformer-2x2-bible.py \
        --benchmark --bench_steps=60
"""

import os

from open_seq2seq.data.text2text.text2text import ParallelTextDataLayer
from open_seq2seq.decoders import TransformerDecoder
from open_seq2seq.encoders import TransformerEncoder
from open_seq2seq.losses import PaddedCrossEntropyLossWithSmoothing
from open_seq2seq.models import Text2Text
from open_seq2seq.optimizers.lr_policies import transformer_policy

base_model = Text2Text
d_model = 512
# data/bible_en_es of this repository, wherever the command is run from
_repository = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                            os.pardir, os.pardir, os.pardir))
data_root = os.environ.get("BIBLE_DATA", os.path.join(_repository, "data", "bible_en_es"))

_transformer = {
    "hidden_size": d_model,
    "num_heads": 8,
    "filter_size": 2048,
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
    "logdir": "Transformer-2x2-bible",
    "random_seed": 0,
    "dtype": "float32",
    "optimizer": "Adam",
    "optimizer_params": {"beta1": 0.9, "beta2": 0.998, "epsilon": 1e-8},
    "lr_policy": transformer_policy,
    "lr_policy_params": {"learning_rate": 2.0, "warmup_steps": 400, "d_model": d_model},
    "encoder": TransformerEncoder,
    "encoder_params": dict(_transformer, encoder_layers=2),
    "decoder": TransformerDecoder,
    # beam_stop "current": the search ends once its beam has finished, as fairseq's and
    # OpenNMT-tf's do (about 2x the sentences/s of the exact "bound", docs/benchmarks.md)
    "decoder_params": dict(_transformer, num_hidden_layers=2, beam_size=4, alpha=0.6,
                           extra_decode_length=50, tie_weights=False, beam_stop="current"),
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

# Eval and infer batch sentences of similar length (buckets 4 pieces wide; outputs come back
# in file order): less padding in the encoder and in every attention over its output;
# the beam search's sentences/s rose 1.06x by medians of alternated rounds (docs/benchmarks.md).
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
