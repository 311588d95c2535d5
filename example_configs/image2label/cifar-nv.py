# A plain CNN on CIFAR-10 (OpenSeq2Seq's cifar-nv): three conv blocks and a linear layer.
# data/cifar-10-batches-bin holds the CIFAR-10 binary files (data_batch_1.bin ...
# test_batch.bin); see docs/image-classification.md. Ported from TF 1: tf.layers.conv2d ->
# keras.layers.Conv2D, tf.layers.batch_normalization -> keras.layers.BatchNormalization,
# tf.layers.max_pooling2d -> keras.layers.MaxPooling2D (same keyword arguments),
# tf.variance_scaling_initializer -> keras.initializers.VarianceScaling,
# tf.contrib.layers.l2_regularizer -> keras.regularizers.L2.
import keras
import tensorflow as tf

from open_seq2seq.data.image2label.image2label import CifarDataLayer
from open_seq2seq.decoders import FullyConnectedDecoder
from open_seq2seq.encoders.cnn_encoder import CNNEncoder
from open_seq2seq.losses import CrossEntropyLoss
from open_seq2seq.models import Image2Label
from open_seq2seq.optimizers.lr_policies import poly_decay

base_model = Image2Label

base_params = {
    "random_seed": 0,
    "use_horovod": False,
    "num_epochs": 200,

    "num_gpus": 1,
    "batch_size_per_gpu": 32,
    "dtype": tf.float32,

    "save_summaries_steps": 2000,
    "print_loss_steps": 100,
    "print_samples_steps": 2000,
    "eval_steps": 5000,
    "save_checkpoint_steps": 5000,
    "logdir": "experiments/test-cifar",

    "optimizer": "Momentum",
    "optimizer_params": {
        "momentum": 0.90,
    },
    "lr_policy": poly_decay,
    "lr_policy_params": {
        "learning_rate": 0.001,
        "power": 1.0,
    },

    "initializer": keras.initializers.VarianceScaling,

    "regularizer": keras.regularizers.L2,
    "regularizer_params": {
        "scale": 0.0002,
    },
    "summaries": ["learning_rate", "variables", "gradients", "larc_summaries",
                  "variable_norm", "gradient_norm", "global_gradient_norm"],
    "encoder": CNNEncoder,
    "encoder_params": {
        "data_format": "channels_first",
        "cnn_layers": [
            # block 1
            (keras.layers.Conv2D, {
                "filters": 128, "kernel_size": (3, 3),
                "strides": (1, 1), "padding": "SAME",
                "activation": tf.nn.relu,
            }),
            (keras.layers.Conv2D, {
                "filters": 128, "kernel_size": (3, 3),
                "strides": (1, 1), "padding": "SAME",
                "activation": tf.nn.relu,
            }),
            (keras.layers.Conv2D, {
                "filters": 128, "kernel_size": (3, 3),
                "strides": (1, 1), "padding": "SAME",
                "activation": None, "use_bias": False,
            }),
            (keras.layers.BatchNormalization, {"momentum": 0.9, "epsilon": 0.0001}),
            (tf.nn.relu, {}),
            (keras.layers.MaxPooling2D, {
                "pool_size": 3, "strides": 2, "padding": "SAME",
            }),
            # block 2
            (keras.layers.Conv2D, {
                "filters": 256, "kernel_size": (3, 3),
                "strides": (1, 1), "padding": "SAME",
                "activation": tf.nn.relu,
            }),
            (keras.layers.Conv2D, {
                "filters": 256, "kernel_size": (3, 3),
                "strides": (1, 1), "padding": "SAME",
                "activation": tf.nn.relu,
            }),
            (keras.layers.Conv2D, {
                "filters": 256, "kernel_size": (3, 3),
                "strides": (1, 1), "padding": "SAME",
                "activation": None, "use_bias": False,
            }),
            (keras.layers.BatchNormalization, {"momentum": 0.9, "epsilon": 0.0001}),
            (tf.nn.relu, {}),
            (keras.layers.MaxPooling2D, {
                "pool_size": 3, "strides": 2, "padding": "SAME",
            }),
            # block 3
            (keras.layers.Conv2D, {
                "filters": 320, "kernel_size": (3, 3),
                "strides": (1, 1), "padding": "SAME",
                "activation": tf.nn.relu,
            }),
            (keras.layers.Conv2D, {
                "filters": 320, "kernel_size": (1, 1),
                "strides": (1, 1), "padding": "SAME",
                "activation": tf.nn.relu,
            }),
        ],
    },

    "decoder": FullyConnectedDecoder,
    "decoder_params": {
        "output_dim": 10,
    },
    "loss": CrossEntropyLoss,
    "data_layer": CifarDataLayer,
    "data_layer_params": {
        "data_dir": "data/cifar-10-batches-bin",
    },
}
