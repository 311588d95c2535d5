"""GNMT v2 (NVIDIA's recipe of Wu et al. 2016) at its published dimensions, WMT16 en-de.

Encoder: 1024-unit LSTMs, a bidirectional first layer then 3 left-to-right layers, residual
connections from the third layer. Decoder: 4 LSTM layers of 1024 with normalized Bahdanau
attention in the ``gnmt_v2`` wiring (the first layer's output queries the attention and the
context enters every upper layer at the same step), residuals from the third layer, dropout
0.2. Beam search: width 5, length penalty 0.6, coverage penalty 0.1. Shared 32k BPE vocabulary
(the layout of OpenSeq2Seq's WMT16 configs: ``data_root`` as below).

    python run.py --config_file=example_configs/text2text/en-de/gnmt-v2-4x1024.py \
        --mode=train_eval
"""

import keras

from open_seq2seq.data.text2text.text2text import ParallelTextDataLayer, SpecialTextTokens
from open_seq2seq.decoders import BeamSearchRNNDecoderWithAttention, RNNDecoderWithAttention
from open_seq2seq.encoders import GNMTLikeEncoderWithEmbedding
from open_seq2seq.losses import BasicSequenceLoss
from open_seq2seq.models import Text2Text
from open_seq2seq.optimizers.lr_policies import exp_decay

data_root = "wmt16_de_en/"
units = 1024

_lstm = {"core_cell": keras.layers.LSTMCell, "core_cell_params": {"units": units,
                                                                   "unit_forget_bias": True}}
_decoder = dict(_lstm, **{
    "decoder_layers": 4,
    "decoder_dp_input_keep_prob": 0.8,
    "decoder_dp_output_keep_prob": 1.0,
    "decoder_use_skip_connections": True,
    "tgt_emb_size": units,
    "attention_type": "gnmt_v2",
    "attention_layer_size": units,
    "GO_SYMBOL": SpecialTextTokens.S_ID.value,
    "END_SYMBOL": SpecialTextTokens.EOS_ID.value,
    "PAD_SYMBOL": SpecialTextTokens.PAD_ID.value,
})

base_model = Text2Text

base_params = {
    "num_gpus": 1,
    "batch_size_per_gpu": 128,
    "max_steps": 340000,
    "save_summaries_steps": 100,
    "print_loss_steps": 100,
    "print_samples_steps": 1000,
    "eval_steps": 4000,
    "save_checkpoint_steps": 4000,
    "logdir": "GNMT-v2-4x1024",
    "random_seed": 0,
    "dtype": "float32",
    "optimizer": "Adam",
    "optimizer_params": {},
    "lr_policy": exp_decay,
    "lr_policy_params": {"learning_rate": 2e-3, "begin_decay_at": 170000,
                         "decay_steps": 17000, "decay_rate": 0.5,
                         "use_staircase_decay": True, "min_lr": 1e-6},
    "max_grad_norm": 5.0,
    "initializer": keras.initializers.RandomUniform,
    "initializer_params": {"minval": -0.1, "maxval": 0.1},
    "encoder": GNMTLikeEncoderWithEmbedding,
    "encoder_params": dict(_lstm, **{
        "encoder_layers": 4,
        "encoder_dp_input_keep_prob": 0.8,
        "encoder_dp_output_keep_prob": 1.0,
        "encoder_use_skip_connections": True,
        "src_emb_size": units,
    }),
    "decoder": RNNDecoderWithAttention,
    "decoder_params": _decoder,
    "loss": BasicSequenceLoss,
    "loss_params": {"average_across_timestep": True, "do_mask": True},
}


def _data(source: str, target: str, **extra) -> dict:
  return dict({"src_vocab_file": data_root + "vocab.bpe.32000",
               "tgt_vocab_file": data_root + "vocab.bpe.32000",
               "source_file": data_root + source, "target_file": data_root + target,
               "delimiter": " "}, **extra)


train_params = {
    "data_layer": ParallelTextDataLayer,
    "data_layer_params": _data("train.tok.clean.bpe.32000.en", "train.tok.clean.bpe.32000.de",
                               shuffle=True, repeat=True, max_length=50),
}

eval_params = {
    "batch_size_per_gpu": 64,
    "data_layer": ParallelTextDataLayer,
    "data_layer_params": _data("newstest2013.tok.bpe.32000.en",
                               "newstest2013.tok.bpe.32000.de", shuffle=False, repeat=False),
}

infer_params = {
    "batch_size_per_gpu": 64,
    "decoder": BeamSearchRNNDecoderWithAttention,
    "decoder_params": dict(_decoder, beam_width=5, length_penalty=0.6, coverage_penalty=0.1,
                           decoder_dp_input_keep_prob=1.0),
    "data_layer": ParallelTextDataLayer,
    "data_layer_params": _data("newstest2014.tok.bpe.32000.en",
                               "newstest2014.tok.bpe.32000.de", shuffle=False, repeat=False),
}
