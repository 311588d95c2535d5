# DeepSpeech2, large: 2 conv + 5 bidirectional GRU layers of 800, mixed precision, 8 devices
# (OpenSeq2Seq's ds2_large_8gpus_mp). "mixed" is float16 on GPUs and bfloat16 on CPUs.
import keras
import tensorflow as tf

from open_seq2seq.data.speech2text.speech2text import Speech2TextDataLayer
from open_seq2seq.decoders.fc_decoders import FullyConnectedCTCDecoder
from open_seq2seq.encoders.ds2_encoder import DeepSpeech2Encoder
from open_seq2seq.losses.ctc_loss import CTCLoss
from open_seq2seq.models.speech2text import Speech2Text
from open_seq2seq.optimizers.lr_policies import poly_decay

base_model = Speech2Text
data_root = "data"

base_params = {
    "random_seed": 0,
    "use_horovod": False,
    "num_gpus": 8,
    "batch_size_per_gpu": 16,
    "num_epochs": 50,

    "save_summaries_steps": 100,
    "print_loss_steps": 100,
    "print_samples_steps": 5000,
    "eval_steps": 5000,
    "save_checkpoint_steps": 10000,
    "logdir": "experiments/librispeech",

    "optimizer": "Momentum",
    "optimizer_params": {"momentum": 0.90},
    "lr_policy": poly_decay,
    "lr_policy_params": {"learning_rate": 0.001, "power": 0.5},
    "dtype": "mixed",
    "loss_scaling": "Backoff",
    # weight decay
    "regularizer": keras.regularizers.L2,
    "regularizer_params": {"scale": 0.0005},
    "initializer": keras.initializers.GlorotUniform,
    "summaries": ["learning_rate", "variables", "gradients", "larc_summaries",
                  "variable_norm", "gradient_norm", "global_gradient_norm"],

    "encoder": DeepSpeech2Encoder,
    "encoder_params": {
        "conv_layers": [
            {"kernel_size": [11, 41], "stride": [2, 2],
             "num_channels": 32, "padding": "SAME"},
            {"kernel_size": [11, 21], "stride": [1, 2],
             "num_channels": 32, "padding": "SAME"},
        ],
        "num_rnn_layers": 5,
        "rnn_cell_dim": 800,

        "use_cudnn_rnn": True,
        "rnn_type": "cudnn_gru",
        "rnn_unidirectional": False,

        "row_conv": False,

        "n_hidden": 1600,

        "dropout_keep_prob": 0.5,
        "activation_fn": tf.nn.relu,
    },

    "decoder": FullyConnectedCTCDecoder,
    "decoder_params": {
        "use_language_model": False,
        "beam_width": 512,
        "alpha": 2.0,
        "beta": 1.0,
        "decoder_library_path": "ctc_decoder_with_lm/libctc_decoder_with_kenlm.so",
        "lm_path": "language_model/4-gram.binary",
        "trie_path": "language_model/trie.binary",
        "alphabet_config_path": "open_seq2seq/test_utils/toy_speech_data/vocab.txt",
    },
    "loss": CTCLoss,
    "loss_params": {},

    "data_layer": Speech2TextDataLayer,
    "data_layer_params": {
        "num_audio_features": 160,
        "input_type": "spectrogram",
        "vocab_file": "open_seq2seq/test_utils/toy_speech_data/vocab.txt",
        "dataset_files": [data_root + "/librispeech/librivox-dev-clean.csv"],
        "shuffle": False,
    },
}

train_params = {
    "data_layer_params": {
        "augmentation": {"time_stretch_ratio": 0.05,
                         "noise_level_min": -90,
                         "noise_level_max": -60},
        "dataset_files": [
            data_root + "/librispeech/librivox-train-clean-100.csv",
            data_root + "/librispeech/librivox-train-clean-360.csv",
            data_root + "/librispeech/librivox-train-other-500.csv",
        ],
        "max_duration": 16.7,
        "shuffle": True,
    },
}

eval_params = {
    "data_layer_params": {
        "dataset_files": [data_root + "/librispeech/librivox-dev-clean.csv"],
        "shuffle": False,
    },
}

infer_params = {
    "data_layer_params": {
        "dataset_files": [data_root + "/librispeech/librivox-test-clean.csv"],
        "shuffle": False,
    },
}
