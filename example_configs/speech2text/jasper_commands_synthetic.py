# A small Jasper-style keyword spotter that learns the synthetic Speech Commands corpus on CPU
# in a minute or two. Make the data first (about 10 s):
#   python scripts/make_speech_commands.py --output_dir=data/speech_commands_synthetic
# then: python run.py --config_file=example_configs/speech2text/jasper_commands_synthetic.py \
#         --mode=train_eval --logdir=experiments/jasper_commands_synthetic
# and the test split: ... --mode=infer --infer_output_file=test_predictions.csv
# Classes are the word folders, sorted (10 by default: set num_labels to the number of words).
import tensorflow as tf

from open_seq2seq.data import SpeechCommandsDataLayer
from open_seq2seq.decoders import FullyConnectedSCDecoder
from open_seq2seq.encoders import TDNNEncoder
from open_seq2seq.losses import CrossEntropyLoss
from open_seq2seq.models import Image2Label
from open_seq2seq.optimizers.lr_policies import poly_decay

dataset_location = "data/speech_commands_synthetic"
num_labels = 10

base_model = Image2Label

base_params = {
    "random_seed": 0,
    "max_steps": 400,
    "batch_size_per_gpu": 32,

    "save_summaries_steps": 100,
    "print_loss_steps": 50,
    "print_samples_steps": 300,
    "eval_steps": 200,
    "save_checkpoint_steps": 200,
    "num_checkpoints": 2,
    "logdir": "experiments/jasper_commands_synthetic",

    "optimizer": "Adam",
    "lr_policy": poly_decay,
    "lr_policy_params": {
        "learning_rate": 2e-3,
        "min_lr": 1e-5,
        "power": 2.0,
    },

    "dtype": tf.float32,

    "encoder": TDNNEncoder,
    "encoder_params": {
        "convnet_layers": [
            {"type": "conv1d", "repeat": 1, "kernel_size": [11], "stride": [2],
             "num_channels": 64, "dropout_keep_prob": 0.9},
            {"type": "conv1d", "repeat": 2, "kernel_size": [11], "stride": [1],
             "num_channels": 64, "dropout_keep_prob": 0.9, "residual": True},
            {"type": "conv1d", "repeat": 1, "kernel_size": [13], "stride": [2],
             "num_channels": 96, "dropout_keep_prob": 0.9},
            {"type": "conv1d", "repeat": 2, "kernel_size": [13], "stride": [1],
             "num_channels": 96, "dropout_keep_prob": 0.9, "residual": True},
            {"type": "conv1d", "repeat": 1, "kernel_size": [1], "stride": [1],
             "num_channels": 32, "dropout_keep_prob": 0.8},
        ],
        "normalization": "batch_norm",
        "activation_fn": tf.nn.relu,
    },

    "decoder": FullyConnectedSCDecoder,
    "decoder_params": {
        "output_dim": num_labels,
    },

    "loss": CrossEntropyLoss,
    "data_layer": SpeechCommandsDataLayer,
    "data_layer_params": {
        "dataset_location": dataset_location,
        "num_audio_features": 40,
        "audio_length": 104,
        "num_labels": num_labels,
        "cache_data": True,
        "augment_data": True,
        "model_format": "jasper",
    },
}

train_params = {
    "data_layer_params": {
        "dataset_files": ["training_list.txt"],
        "shuffle": True,
        "repeat": True,
    },
}

eval_params = {
    "data_layer_params": {
        "dataset_files": ["validation_list.txt"],
        "shuffle": False,
        "repeat": False,
    },
}

infer_params = {
    "data_layer_params": {
        "dataset_files": ["testing_list.txt"],
        "shuffle": False,
        "repeat": False,
    },
}
