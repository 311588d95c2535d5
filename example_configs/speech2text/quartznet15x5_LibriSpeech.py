# QuartzNet 15x5 (OpenSeq2Seq's quartznet15x5_LibriSpeech): time-channel separable convolutions.
# NovoGrad with cosine decay, as OpenSeq2Seq trained it.
import keras
import tensorflow as tf

from open_seq2seq.data.speech2text.speech2text import Speech2TextDataLayer
from open_seq2seq.decoders.fc_decoders import FullyConnectedCTCDecoder
from open_seq2seq.encoders.tdnn_encoder import TDNNEncoder
from open_seq2seq.losses.ctc_loss import CTCLoss
from open_seq2seq.models.speech2text import Speech2Text
from open_seq2seq.optimizers.lr_policies import cosine_decay
from open_seq2seq.optimizers.novograd import NovoGrad

residual_dense = False  # Enable or disable Dense Residual


def block(repeat, kernel, channels, layer_type="sep_conv1d", stride=1, dilation=1,
          residual=True):
  return {"type": layer_type, "repeat": repeat, "kernel_size": [kernel], "stride": [stride],
          "num_channels": channels, "padding": "SAME", "dilation": [dilation],
          "residual": residual, "residual_dense": residual_dense and residual}


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
    "logdir": "jasper_log_folder",
    "num_checkpoints": 2,

    "optimizer": NovoGrad,
    "optimizer_params": {"beta1": 0.95, "beta2": 0.5, "epsilon": 1e-08, "weight_decay": 0.001,
                         "grad_averaging": False},
    "lr_policy": cosine_decay,
    "lr_policy_params": {"learning_rate": 0.01, "min_lr": 0.0, "warmup_steps": 1000},

    "dtype": "float32",

    "summaries": ["learning_rate", "variables", "gradients", "larc_summaries",
                  "variable_norm", "gradient_norm", "global_gradient_norm"],

    "encoder": TDNNEncoder,
    "encoder_params": {
        "convnet_layers": (
            [block(1, 33, 256, stride=2, residual=False)] +
            [block(5, 33, 256) for _ in range(3)] +
            [block(5, 39, 256) for _ in range(3)] +
            [block(5, 51, 512) for _ in range(3)] +
            [block(5, 63, 512) for _ in range(3)] +
            [block(5, 75, 512) for _ in range(3)] +
            [block(1, 87, 512, dilation=2),
             block(1, 1, 1024, layer_type="conv1d", residual=False)]),
        "dropout_keep_prob": 1.0,
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
        "augmentation": {
            "n_freq_mask": 2,
            "n_time_mask": 2,
            "width_freq_mask": 6,
            "width_time_mask": 6,
        },
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
