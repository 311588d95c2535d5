# A small Wave2Letter-style CTC model that learns the synthetic digit corpus in minutes on CPU.
# Make the data first (about 10 s):
#   python scripts/make_synthetic_speech.py --output_dir=data/synthetic_speech
# then: python run.py --config_file=example_configs/speech2text/w2l_toy_synthetic.py \
#         --mode=train_eval --logdir=experiments/w2l_toy
import tensorflow as tf

from open_seq2seq.data.speech2text.speech2text import Speech2TextDataLayer
from open_seq2seq.decoders.fc_decoders import FullyConnectedCTCDecoder
from open_seq2seq.encoders.tdnn_encoder import TDNNEncoder
from open_seq2seq.losses.ctc_loss import CTCLoss
from open_seq2seq.models.speech2text import Speech2Text
from open_seq2seq.optimizers.lr_policies import poly_decay

data_dir = "data/synthetic_speech"

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
    "logdir": "experiments/w2l_toy",

    "optimizer": "Adam",
    "optimizer_params": {},
    "lr_policy": poly_decay,
    "lr_policy_params": {"learning_rate": 3e-3, "power": 2.0, "warmup_steps": 50},
    "max_grad_norm": 10.0,
    "dtype": "float32",

    "encoder": TDNNEncoder,
    "encoder_params": {
        "convnet_layers": [
            {"type": "conv1d", "repeat": 1, "kernel_size": [11], "stride": [2],
             "num_channels": 96, "padding": "SAME", "dilation": [1]},
            {"type": "conv1d", "repeat": 2, "kernel_size": [11], "stride": [1],
             "num_channels": 96, "padding": "SAME", "dilation": [1], "residual": True},
            {"type": "conv1d", "repeat": 2, "kernel_size": [13], "stride": [1],
             "num_channels": 128, "padding": "SAME", "dilation": [1], "residual": True},
            {"type": "conv1d", "repeat": 1, "kernel_size": [1], "stride": [1],
             "num_channels": 160, "padding": "SAME", "dilation": [1]},
        ],
        "dropout_keep_prob": 0.9,
        "normalization": "batch_norm",
        "activation_fn": tf.nn.relu,
    },

    "decoder": FullyConnectedCTCDecoder,
    "decoder_params": {},
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
        "pad_to": 8,
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
