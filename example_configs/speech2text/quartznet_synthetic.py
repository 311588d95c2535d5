# A small QuartzNet (Kriman et al. 2020: time-channel separable convolutions, 5 blocks of 3
# sub-blocks, kernels 33-75) sized for a CPU like conformer_ctc_synthetic.py, on the synthetic
# digit corpus: the convolutional baseline the Conformer is measured against
# (scripts/bench_asr_models.py, docs/benchmarks.md). Make the data first (about 10 s):
#   python scripts/make_synthetic_speech.py --output_dir=data/synthetic_speech
# then: python run.py --config_file=example_configs/speech2text/quartznet_synthetic.py \
#         --mode=train_eval --logdir=experiments/quartznet
# quartznet15x5_LibriSpeech.py is the published size (15 x 5 sub-blocks, 256-512 channels).
import keras
import tensorflow as tf

from open_seq2seq.data.speech2text.speech2text import Speech2TextDataLayer
from open_seq2seq.decoders.fc_decoders import FullyConnectedCTCDecoder
from open_seq2seq.encoders.tdnn_encoder import TDNNEncoder
from open_seq2seq.losses.ctc_loss import CTCLoss
from open_seq2seq.models.speech2text import Speech2Text
from open_seq2seq.optimizers.lr_policies import poly_decay
from open_seq2seq.optimizers.novograd import NovoGrad

data_dir = "data/synthetic_speech"


def block(repeat, kernel, channels, layer_type="sep_conv1d", stride=1, dilation=1,
          residual=True):
  return {"type": layer_type, "repeat": repeat, "kernel_size": [kernel], "stride": [stride],
          "num_channels": channels, "padding": "SAME", "dilation": [dilation],
          "residual": residual}


base_model = Speech2Text

base_params = {
    "random_seed": 0,
    "max_steps": 600,
    "batch_size_per_gpu": 16,
    "save_summaries_steps": 50,
    "print_loss_steps": 50,
    "print_samples_steps": 200,
    "eval_steps": 200,
    "save_checkpoint_steps": 200,
    "num_checkpoints": 2,
    "logdir": "experiments/quartznet",

    "optimizer": NovoGrad,
    "optimizer_params": {"beta1": 0.95, "beta2": 0.5, "epsilon": 1e-08, "weight_decay": 0.001,
                         "grad_averaging": False},
    "lr_policy": poly_decay,
    "lr_policy_params": {"learning_rate": 0.02, "power": 2.0, "min_lr": 1e-5,
                         "warmup_steps": 100},
    "dtype": "float32",

    "encoder": TDNNEncoder,
    "encoder_params": {
        "convnet_layers": (
            [block(1, 33, 128, stride=2, residual=False)] +
            [block(3, 33, 128), block(3, 39, 128), block(3, 51, 192), block(3, 63, 192),
             block(3, 75, 192)] +
            [block(1, 87, 256, dilation=2, residual=False),
             block(1, 1, 256, layer_type="conv1d", residual=False)]),
        "dropout_keep_prob": 1.0,
        "initializer": keras.initializers.GlorotUniform,
        "initializer_params": {"uniform": False},
        "normalization": "batch_norm",
        "activation_fn": tf.nn.relu,
        "data_format": "channels_last",
        "use_conv_mask": True,
    },

    "decoder": FullyConnectedCTCDecoder,
    "decoder_params": {"initializer": keras.initializers.GlorotUniform},
    "loss": CTCLoss,
    "loss_params": {},

    "data_layer": Speech2TextDataLayer,
    "data_layer_params": {
        "num_audio_features": 40,
        "input_type": "logfbank",
        "vocab_file": "open_seq2seq/test_utils/toy_speech_data/vocab.txt",
        "norm_per_feature": True,
        "window": "hanning",
        "sample_freq": 16000,
        "pad_to": 16,
        "dataset_files": [data_dir + "/train.csv"],
    },
}

train_params = {
    "data_layer_params": {
        "augmentation": {"n_freq_mask": 1, "width_freq_mask": 4},
        "max_duration": 10.0,
    },
}

eval_params = {
    "data_layer_params": {"dataset_files": [data_dir + "/dev.csv"]},
}

infer_params = {
    "data_layer_params": {"dataset_files": [data_dir + "/test.csv"]},
}
