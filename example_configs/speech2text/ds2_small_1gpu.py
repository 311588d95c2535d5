# DeepSpeech2, small: 2 conv + 2 bidirectional GRU layers of 512 (OpenSeq2Seq's ds2_small_1gpu).
# Data: python scripts/import_librispeech.py --archives=... --output_dir=data/librispeech
import keras
import tensorflow as tf

from open_seq2seq.data.speech2text.speech2text import Speech2TextDataLayer
from open_seq2seq.decoders.fc_decoders import FullyConnectedCTCDecoder
from open_seq2seq.encoders.ds2_encoder import DeepSpeech2Encoder
from open_seq2seq.losses.ctc_loss import CTCLoss
from open_seq2seq.models.speech2text import Speech2Text
from open_seq2seq.optimizers.lr_policies import exp_decay

base_model = Speech2Text

base_params = {
    "random_seed": 0,
    "use_horovod": False,
    "num_epochs": 12,

    "num_gpus": 1,
    "batch_size_per_gpu": 32,

    "save_summaries_steps": 100,
    "print_loss_steps": 10,
    "print_samples_steps": 5000,
    "eval_steps": 5000,
    "save_checkpoint_steps": 1000,
    "logdir": "experiments/librispeech-quick",

    "optimizer": "Adam",
    "optimizer_params": {},
    "lr_policy": exp_decay,
    "lr_policy_params": {
        "learning_rate": 0.0001,
        "begin_decay_at": 0,
        "decay_steps": 5000,
        "decay_rate": 0.9,
        "use_staircase_decay": True,
        "min_lr": 0.0,
    },
    "dtype": "float32",
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
        "num_rnn_layers": 2,
        "rnn_cell_dim": 512,

        "use_cudnn_rnn": True,
        "rnn_type": "cudnn_gru",
        "rnn_unidirectional": False,

        "row_conv": False,

        "n_hidden": 1024,

        "dropout_keep_prob": 0.5,
        "activation_fn": tf.nn.relu,
        "data_format": "channels_first",
    },

    "decoder": FullyConnectedCTCDecoder,
    "decoder_params": {
        "use_language_model": False,
        # decoding with a language model (python scripts/..., see docs/speech-recognition.md)
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
        "num_audio_features": 96,
        "input_type": "spectrogram",
        "vocab_file": "open_seq2seq/test_utils/toy_speech_data/vocab.txt",
        "dataset_files": ["data/librispeech/librivox-dev-clean.csv"],
        "shuffle": False,
    },
}

train_params = {
    "data_layer_params": {
        "augmentation": {"time_stretch_ratio": 0.05,
                         "noise_level_min": -90,
                         "noise_level_max": -60},
        "dataset_files": [
            "data/librispeech/librivox-train-clean-100.csv",
            "data/librispeech/librivox-train-clean-360.csv",
        ],
        "max_duration": None,
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
