# ResNet-50 keyword spotting on Google Speech Commands (OpenSeq2Seq's resnet_commands_8gpu):
# 120x120 log mel images of the clips, one channel.
# Ported from TF 1: tf.variance_scaling_initializer -> keras.initializers.VarianceScaling,
# tf.contrib.layers.l2_regularizer -> keras.regularizers.L2 (same "scale" meaning).
# dataset_files are OpenSeq2Seq's preprocessed lists ("label,wav_filename" lines, paths
# relative to dataset_location); the data set's own validation_list.txt / testing_list.txt
# work too -- see docs/speech-recognition.md, "Speech commands".
# Horovod, one GPU per process: mpirun -np 8 python run.py --config_file=...
import keras
import tensorflow as tf

from open_seq2seq.data import SpeechCommandsDataLayer
from open_seq2seq.decoders import FullyConnectedDecoder
from open_seq2seq.encoders import ResNetEncoder
from open_seq2seq.losses import CrossEntropyLoss
from open_seq2seq.models import Image2Label
from open_seq2seq.optimizers.lr_policies import poly_decay


base_model = Image2Label

dataset_version = "v1-12"
dataset_location = "/data/speech-commands/v1"

if dataset_version == "v1-12":
  num_labels = 12
elif dataset_version == "v1-30":
  num_labels = 30
else:
  num_labels = 35
  dataset_location = "/data/speech-commands/v2"

base_params = {
  "random_seed": 0,
  "use_horovod": True,
  "num_gpus": 8,

  "num_epochs": 100,
  "batch_size_per_gpu": 32,
  "dtype": "mixed",
  "loss_scaling": 512.0,

  "save_summaries_steps": 10000,
  "print_loss_steps": 100,
  "print_samples_steps": 1000,
  "eval_steps": 1000,
  "save_checkpoint_steps": 10000,
  "logdir": "result/resnet_commands",

  "optimizer": "Momentum",
  "optimizer_params": {
    "momentum": 0.95,
  },
  "lr_policy": poly_decay,
  "lr_policy_params": {
    "learning_rate": 0.2,
    "power": 2,
  },

  "initializer": keras.initializers.VarianceScaling,

  "regularizer": keras.regularizers.L2,
  "regularizer_params": {
    'scale': 0.0001,
  },
  "summaries": ['learning_rate', 'variables', 'gradients', 'larc_summaries',
                'variable_norm', 'gradient_norm', 'global_gradient_norm'],
  "encoder": ResNetEncoder,
  "encoder_params": {
    'resnet_size': 50,
    "regularize_bn": False,
  },
  "decoder": FullyConnectedDecoder,
  "decoder_params": {
    "output_dim": num_labels,
  },
  "loss": CrossEntropyLoss,
  "data_layer": SpeechCommandsDataLayer,
  "data_layer_params": {
    "dataset_location": dataset_location,
    "num_audio_features": 120,
    "audio_length": 120,
    "num_labels": num_labels,
    "cache_data": True,
    "augment_data": True,
    "model_format": "resnet"
  },
}

train_params = {
  "data_layer_params": {
    "dataset_files": [
      dataset_version + "-train.txt"
    ],
    "shuffle": True,
    "repeat": True,
    "repeat_samples": 1
  },
}

eval_params = {
  "batch_size_per_gpu": 16,
  "data_layer_params": {
    "dataset_files": [
      dataset_version + "-val.txt"
    ],
    "shuffle": False,
    "repeat": False
  },
}
