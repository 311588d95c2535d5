"""ConvS2S (Gehring et al. 2017), sized for a CPU, on the English-Spanish Bible.

The convolutional counterpart of ``transformer-2x2-bible.py`` (same data, batches of ~4,096
tokens per side, label smoothing, beam 4 with length penalty 0.6) for side-by-side figures in
docs/benchmarks.md; its twelve convolutions give it more parameters (31.1M against the
Transformer's 22.6M). Encoder and decoder: 6 gated (GLU) weight-normalized convolutions of 512
channels and width 3, sqrt(0.5) residual scaling, multi-step attention in every decoder
layer. Each side has its own embedding: the recipe's per-side vocabularies differ (4,729
English and 5,296 Spanish ids with the special symbols), and ``shared_embed`` needs one
vocabulary for both sides, so the decoder projects to its vocabulary with a layer of its own.
Build the data once::

    bash scripts/get_bible_en_es.sh            # writes data/bible_en_es

    python run.py --config_file=example_configs/text2text/en-es/convs2s-small-bible.py \
        --mode=train_eval

``BIBLE_DATA=DIR`` reads another folder holding the same files.
"""

import math
import os

from open_seq2seq.data.text2text.text2text import ParallelTextDataLayer
from open_seq2seq.decoders import ConvS2SDecoder
from open_seq2seq.encoders import ConvS2SEncoder
from open_seq2seq.losses import PaddedCrossEntropyLossWithSmoothing
from open_seq2seq.models import Text2Text
from open_seq2seq.optimizers.lr_policies import transformer_policy
from open_seq2seq.parts.convs2s.utils import gated_linear_units

base_model = Text2Text
d_model = 512
num_layers = 6
max_length = 128
# data/bible_en_es of this repository, wherever the command is run from
_repository = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                            os.pardir, os.pardir, os.pardir))
data_root = os.environ.get("BIBLE_DATA", os.path.join(_repository, "data", "bible_en_es"))

_convs = {
    "conv_nchannels_kwidth": [(d_model, 3)] * num_layers,
    "embedding_dropout_keep_prob": 0.9,
    "hidden_dropout_keep_prob": 0.9,
    "max_input_length": max_length,
    "conv_activation": gated_linear_units,
    "normalization_type": "weight_norm",
    "scaling_factor": math.sqrt(0.5),
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
    "logdir": "ConvS2S-small-bible",
    "random_seed": 0,
    "dtype": "float32",
    "optimizer": "Adam",
    "optimizer_params": {},
    "lr_policy": transformer_policy,
    "lr_policy_params": {"learning_rate": 9, "max_lr": 1e-3, "warmup_steps": 400,
                         "d_model": d_model},
    "max_grad_norm": 0.1,
    "encoder": ConvS2SEncoder,
    "encoder_params": dict(_convs, src_emb_size=d_model, att_layer_num=num_layers),
    "decoder": ConvS2SDecoder,
    "decoder_params": dict(_convs, tgt_emb_size=d_model, out_emb_size=d_model,
                           shared_embed=False, out_dropout_keep_prob=0.9,
                           beam_size=4, alpha=0.6, extra_decode_length=50),
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
    "data_layer_params": _data("train", shuffle=True, repeat=True, max_length=max_length,
                               batching="tokens"),
}

eval_params = {
    "batch_size_per_gpu": 64,
    "data_layer": ParallelTextDataLayer,
    "data_layer_params": _data("dev", shuffle=False, repeat=False),
}

infer_params = {
    "batch_size_per_gpu": 64,
    "data_layer": ParallelTextDataLayer,
    "data_layer_params": _data("test", shuffle=False, repeat=False),
}
