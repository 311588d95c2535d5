# ResNet-50 v1 on ImageNet in mixed precision with Horovod: 25.6 M parameters. OpenSeq2Seq
# shipped resnet-50-v2-mp and a float32 resnet-50-v1; this is resnet-50-v2-mp with the v1
# network (encoder "version": 1). data_root + "data" holds the TF-official ImageNet TFRecords
# (train-00000-of-01024 ..., validation-00000-of-00128 ...); see docs/image-classification.md.
# Ported from TF 1: tf.variance_scaling_initializer -> keras.initializers.VarianceScaling,
# tf.contrib.layers.l2_regularizer -> keras.regularizers.L2 (same "scale" meaning).
import keras

from open_seq2seq.data import ImagenetDataLayer
from open_seq2seq.decoders import FullyConnectedDecoder
from open_seq2seq.encoders import ResNetEncoder
from open_seq2seq.losses import CrossEntropyLoss
from open_seq2seq.models import Image2Label
from open_seq2seq.optimizers.lr_policies import piecewise_constant, poly_decay  # noqa: F401

data_root = ""
base_model = Image2Label

base_params = {
    "random_seed": 0,
    "use_horovod": True,
    "num_epochs": 100,

    "num_gpus": 1,
    "batch_size_per_gpu": 128,
    "dtype": "mixed",
    "loss_scaling": "Backoff",

    "save_summaries_steps": 2000,
    "print_loss_steps": 100,
    "print_samples_steps": 2000,
    "eval_steps": 5000,
    "save_checkpoint_steps": 5000,
    "logdir": "logs/rn50/sgd/lr0.02_wd0.0001",

    "optimizer": "Momentum",
    "optimizer_params": {
        "momentum": 0.90,
    },
    "lr_policy": poly_decay,
    "lr_policy_params": {
        "learning_rate": 0.4,  # 8 GPU-s ,
        "power": 2,
    },

    "initializer": keras.initializers.VarianceScaling,

    "regularizer": keras.regularizers.L2,
    "regularizer_params": {
        "scale": 0.0001,
    },
    "summaries": ["learning_rate", "variables", "gradients", "larc_summaries",
                  "variable_norm", "gradient_norm", "global_gradient_norm"],
    "encoder": ResNetEncoder,
    "encoder_params": {
        "resnet_size": 50,
        "version": 1,
        "regularize_bn": False,
    },
    "decoder": FullyConnectedDecoder,
    "decoder_params": {
        "output_dim": 1000,
    },
    "loss": CrossEntropyLoss,
    "data_layer": ImagenetDataLayer,
    "data_layer_params": {
        "data_dir": data_root + "data",  # "data",
        "image_size": 224,
        "num_classes": 1000,
    },
}
