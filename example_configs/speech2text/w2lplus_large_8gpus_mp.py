# Wave2Letter+ (OpenSeq2Seq's w2lplus_large_8gpus_mp): 17 conv layers, 64 log-mel features,
# batch norm, clipped ReLU, mixed precision ("mixed": float16 on GPUs, bfloat16 on CPUs).
import keras
import tensorflow as tf

from open_seq2seq.data.speech2text.speech2text import Speech2TextDataLayer
from open_seq2seq.decoders.fc_decoders import FullyConnectedCTCDecoder
from open_seq2seq.encoders.tdnn_encoder import TDNNEncoder
from open_seq2seq.losses.ctc_loss import CTCLoss
from open_seq2seq.models.speech2text import Speech2Text
from open_seq2seq.optimizers.lr_policies import poly_decay


def block(repeat, kernel, channels, keep, stride=1, dilation=1):
  return {"type": "conv1d", "repeat": repeat, "kernel_size": [kernel], "stride": [stride],
          "num_channels": channels, "padding": "SAME", "dilation": [dilation],
          "dropout_keep_prob": keep}


def clipped_relu(x):
  return tf.minimum(tf.nn.relu(x), 20.0)


base_model = Speech2Text

base_params = {
    "random_seed": 0,
    "use_horovod": True,
    "num_epochs": 200,

    "num_gpus": 8,
    "batch_size_per_gpu": 64,
    "iter_size": 1,

    "save_summaries_steps": 100,
    "print_loss_steps": 10,
    "print_samples_steps": 2200,
    "eval_steps": 2200,
    "save_checkpoint_steps": 1100,
    "num_checkpoints": 5,
    "logdir": "w2l_log_folder",

    "optimizer": "Momentum",
    "optimizer_params": {"momentum": 0.90},
    "lr_policy": poly_decay,
    "lr_policy_params": {"learning_rate": 0.05, "power": 2.0},

    "regularizer": keras.regularizers.L2,
    "regularizer_params": {"scale": 0.001},

    "dtype": "mixed",
    "loss_scaling": "Backoff",

    "encoder": TDNNEncoder,
    "encoder_params": {
        "convnet_layers": [
            block(1, 11, 256, 0.8, stride=2),
            block(3, 11, 256, 0.8),
            block(3, 13, 384, 0.8),
            block(3, 17, 512, 0.8),
            block(3, 21, 640, 0.7),
            block(3, 25, 768, 0.7),
            block(1, 29, 896, 0.6, dilation=2),
            block(1, 1, 1024, 0.6),
        ],
        "dropout_keep_prob": 0.7,
        "initializer": keras.initializers.GlorotUniform,
        "initializer_params": {"uniform": False},
        "normalization": "batch_norm",
        "activation_fn": clipped_relu,
        "data_format": "channels_last",
    },

    "decoder": FullyConnectedCTCDecoder,
    "decoder_params": {
        "initializer": keras.initializers.GlorotUniform,
        "infer_logits_to_pickle": False,
    },
    "loss": CTCLoss,
    "loss_params": {},

    "data_layer": Speech2TextDataLayer,
    "data_layer_params": {
        "num_audio_features": 64,
        "input_type": "logfbank",
        "vocab_file": "open_seq2seq/test_utils/toy_speech_data/vocab.txt",
        "dataset_files": ["data/librispeech/librivox-dev-clean.csv"],
        "shuffle": False,
    },
}

train_params = {
    "data_layer_params": {
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
