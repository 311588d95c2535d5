# Jasper 10x5 with dense residual connections (OpenSeq2Seq's jasper10x5_LibriSpeech_nvgrad):
# NovoGrad with LARC, as OpenSeq2Seq trained it.
import keras
import tensorflow as tf

from open_seq2seq.data.speech2text.speech2text import Speech2TextDataLayer
from open_seq2seq.decoders.fc_decoders import FullyConnectedCTCDecoder
from open_seq2seq.encoders.tdnn_encoder import TDNNEncoder
from open_seq2seq.losses.ctc_loss import CTCLoss
from open_seq2seq.models.speech2text import Speech2Text
from open_seq2seq.optimizers.novograd import NovoGrad
from open_seq2seq.optimizers.lr_policies import poly_decay

residual_dense = True  # Enable or disable Dense Residual


def block(repeat, kernel, channels, keep, stride=1, dilation=1, residual=True):
  layer = {"type": "conv1d", "repeat": repeat, "kernel_size": [kernel], "stride": [stride],
           "num_channels": channels, "padding": "SAME", "dilation": [dilation],
           "dropout_keep_prob": keep}
  if residual:
    layer.update(residual=True, residual_dense=residual_dense)
  return layer


base_model = Speech2Text

base_params = {
    "random_seed": 0,
    "use_horovod": True,
    "num_epochs": 400,

    "num_gpus": 8,
    "batch_size_per_gpu": 32,
    "iter_size": 1,

    "save_summaries_steps": 100,
    "print_loss_steps": 10,
    "print_samples_steps": 2200,
    "eval_steps": 2200,
    "save_checkpoint_steps": 1100,
    "logdir": "jasper10x5_logs",
    "num_checkpoints": 2,

    "optimizer": NovoGrad,
    "optimizer_params": {"beta1": 0.95, "beta2": 0.98, "epsilon": 1e-08, "weight_decay": 0.001,
                         "grad_averaging": False},
    "lr_policy": poly_decay,
    "lr_policy_params": {"learning_rate": 0.02, "min_lr": 1e-5, "power": 2.0},
    "larc_params": {"larc_eta": 0.001},

    "dtype": "mixed",
    "loss_scaling": "Backoff",

    "summaries": ["learning_rate", "variables", "gradients", "larc_summaries",
                  "variable_norm", "gradient_norm", "global_gradient_norm"],

    "encoder": TDNNEncoder,
    "encoder_params": {
        "convnet_layers": [
            block(1, 11, 256, 0.8, stride=2, residual=False),
            block(5, 11, 256, 0.8),
            block(5, 11, 256, 0.8),
            block(5, 13, 384, 0.8),
            block(5, 13, 384, 0.8),
            block(5, 17, 512, 0.8),
            block(5, 17, 512, 0.8),
            block(5, 21, 640, 0.7),
            block(5, 21, 640, 0.7),
            block(5, 25, 768, 0.7),
            block(5, 25, 768, 0.7),
            block(1, 29, 896, 0.6, dilation=2, residual=False),
            block(1, 1, 1024, 0.6, residual=False),
        ],
        "dropout_keep_prob": 0.7,
        "initializer": keras.initializers.GlorotUniform,
        "initializer_params": {"uniform": False},
        "normalization": "batch_norm",
        "activation_fn": tf.nn.relu,
        "data_format": "channels_last",
        "use_conv_mask": True,
    },

    "decoder": FullyConnectedCTCDecoder,
    "decoder_params": {
        "initializer": keras.initializers.GlorotUniform,
        "use_language_model": False,
        # decoding with a language model:
        # "use_language_model": True, "lm_path": "language_model/4-gram.arpa",
        # "beam_width": 128, "alpha": 2.0, "beta": 1.5,
        "infer_logits_to_pickle": False,
    },
    "loss": CTCLoss,
    "loss_params": {},

    "data_layer": Speech2TextDataLayer,
    "data_layer_params": {
        "num_audio_features": 64,
        "input_type": "logfbank",
        "vocab_file": "open_seq2seq/test_utils/toy_speech_data/vocab.txt",
        "norm_per_feature": True,
        "window": "hanning",
        "precompute_mel_basis": True,
        "sample_freq": 16000,
        "pad_to": 16,
        "dither": 1e-5,
        "backend": "librosa",
        "dataset_files": ["data/librispeech/librivox-dev-clean.csv"],
        "shuffle": False,
    },
}

train_params = {
    "data_layer_params": {
        "augmentation": {"speed_perturbation_ratio": 0.10},
        "dataset_files": [
            "data/librispeech/librivox-train-clean-100.csv",
            "data/librispeech/librivox-train-clean-360.csv",
            "data/librispeech/librivox-train-other-500.csv",
        ],
        "max_duration": 16.7,
        "shuffle": True,
    },
}

eval_params = {
    "data_layer_params": {
        "dataset_files": ["data/librispeech/librivox-dev-clean.csv"],
        "shuffle": False,
    },
}

infer_params = {
    "data_layer_params": {
        "dataset_files": ["data/librispeech/librivox-test-clean.csv"],
        "shuffle": False,
    },
}
