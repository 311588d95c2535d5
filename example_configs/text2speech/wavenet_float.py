# pylint: skip-file
# OpenSeq2Seq's wavenet_float.py (a WaveNet vocoder on LJSpeech, mel-conditioned), ported by
# renaming its TF 1 names only: tf.contrib.layers.l2_regularizer -> keras.regularizers.L2,
# tf.contrib.layers.xavier_initializer -> keras.initializers.GlorotUniform. LJSpeech cannot be
# downloaded here: point dataset_location at a copy (its wavs/ folder, as OpenSeq2Seq's config
# did, or the folder holding wavs/) and dataset_files at its metadata-format CSVs.
# Beyond OpenSeq2Seq: training and eval read random / centred windows of
# data_layer_params/window_size samples (default 16384) instead of whole utterances.
import keras
import tensorflow as tf

from open_seq2seq.data import WavenetDataLayer
from open_seq2seq.decoders import FakeDecoder
from open_seq2seq.encoders import WavenetEncoder
from open_seq2seq.losses import WavenetLoss
from open_seq2seq.models import Text2SpeechWavenet
from open_seq2seq.optimizers.lr_policies import exp_decay
from open_seq2seq.parts.convs2s.utils import gated_linear_units

base_model = Text2SpeechWavenet

base_params = {
    "random_seed": 0,
    "use_horovod": True,
    "max_steps": 1000000,

    "num_gpus": 1,
    "batch_size_per_gpu": 2,

    "save_summaries_steps": 50,
    "print_loss_steps": 50,
    "print_samples_steps": 500,
    "eval_steps": 500,
    "save_checkpoint_steps": 2500,
    "logdir": "result/wavenet-LJ-float",

    "optimizer": "Adam",
    "optimizer_params": {},
    "lr_policy": exp_decay,
    "lr_policy_params": {
        "learning_rate": 1e-3,
        "decay_steps": 20000,
        "decay_rate": 0.1,
        "use_staircase_decay": False,
        "begin_decay_at": 45000,
        "min_lr": 1e-5,
    },
    "dtype": tf.float32,
    "regularizer": keras.regularizers.L2,
    "regularizer_params": {
        "scale": 1e-6
    },
    "initializer": keras.initializers.GlorotUniform,

    "summaries": [],

    "encoder": WavenetEncoder,
    "encoder_params": {
        "layer_type": "conv1d",
        "kernel_size": 3,
        "strides": 1,
        "padding": "VALID",
        "blocks": 3,
        "layers_per_block": 10,
        "filters": 64,
        "quantization_channels": 256
    },

    "decoder": FakeDecoder,

    "loss": WavenetLoss,

    "data_layer": WavenetDataLayer,
    "data_layer_params": {
        "dataset": "LJ",
        "num_audio_features": 80,
        "dataset_location": "data/speech/LJSpeech/wavs/"
    }
}

train_params = {
    "data_layer_params": {
        "dataset_files": [
            "data/speech/LJSpeech/train.csv",
        ],
        "shuffle": True,
    },
}

eval_params = {
    "data_layer_params": {
        "dataset_files": [
            "data/speech/LJSpeech/val.csv",
        ],
        "shuffle": False,
    },
}

infer_params = {
    "data_layer_params": {
        "dataset_files": [
            "data/speech/LJSpeech/test.csv",
        ],
        "shuffle": False,
    },
}

interactive_infer_params = {
    "data_layer_params": {
        "dataset_files": [],
        "shuffle": False,
    },
}
