# pylint: skip-file
"""A small Tacotron 2 with guided attention on the synthetic espeak-ng corpus (CPU minutes).

    python scripts/make_synthetic_speech.py --tts --output_dir=data/synth_tts
    python run.py --config_file=example_configs/text2speech/tacotron-synthetic-small.py \
        --mode=train_eval

The corpus is one fixed voice at 22050 Hz, resampled here to 16 kHz; 40 mel channels, 3
frames per decoder step. Eval prints the attention's band mass / focus rate (teacher
forced), its free-running band mass and the share of sentences that stop within 20 % of
their true length.
"""
import os

import tensorflow as tf

from open_seq2seq.data import Text2SpeechDataLayer
from open_seq2seq.decoders import Tacotron2Decoder
from open_seq2seq.encoders import Tacotron2Encoder
from open_seq2seq.losses import Text2SpeechLoss
from open_seq2seq.models import Text2Speech
from open_seq2seq.optimizers.lr_policies import fixed_lr

data_root = os.environ.get("TTS_DATA", "data/synth_tts")

base_model = Text2Speech

base_params = {
    "random_seed": 0,
    "max_steps": 600,
    "batch_size_per_gpu": 16,
    "save_summaries_steps": 50,
    "print_loss_steps": 25,
    "print_samples_steps": 200,
    "eval_steps": 200,
    "save_checkpoint_steps": 200,
    "logdir": "runs/tacotron-synthetic-small",
    "save_to_tensorboard": True,
    "max_grad_norm": 1.0,
    "optimizer": "Adam",
    "lr_policy": fixed_lr,
    "lr_policy_params": {"learning_rate": 2e-3},
    "dtype": tf.float32,
    "encoder": Tacotron2Encoder,
    "encoder_params": {
        "src_emb_size": 64,
        "conv_layers": [{"kernel_size": [5], "stride": [1], "num_channels": 64,
                         "padding": "SAME"}],
        "cnn_dropout_prob": 0.1,
        "num_rnn_layers": 1,
        "rnn_cell_dim": 64,
    },
    "decoder": Tacotron2Decoder,
    "decoder_params": {
        "attention_type": "location",
        "attention_layer_size": 64,
        "attention_bias": True,
        "location_filters": 8,
        "location_kernel_size": 15,
        "decoder_cell_units": 192,
        "decoder_layers": 1,
        "dropout_prob": 0.0,
        "prenet_layers": 2,
        "prenet_units": 64,
        "reduction_factor": 3,
        "enable_postnet": True,
        "postnet_conv_layers": [
            {"kernel_size": [5], "stride": [1], "num_channels": 64, "padding": "SAME",
             "activation_fn": tf.nn.tanh},
            {"kernel_size": [5], "stride": [1], "num_channels": -1, "padding": "SAME",
             "activation_fn": None},
        ],
        "postnet_keep_dropout_prob": 0.9,
        "max_frames_per_symbol": 6.0,
    },
    "loss": Text2SpeechLoss,
    "loss_params": {"use_mask": True, "l1_norm": True, "guided_attention_weight": 10.0,
                    "guided_attention_sigma": 0.2},
    "data_layer": Text2SpeechDataLayer,
    "data_layer_params": {
        "vocab_file": "open_seq2seq/test_utils/vocab_tts.txt",
        "dataset_location": data_root,
        "num_audio_features": 40,
        "output_type": "mel",
        "sampling_rate": 16000,
        "n_fft": 512,
        "hop_length": 256,
        "mel_type": "htk",
        "mag_power": 1,
        "data_min": 1e-2,
        "trim": False,
        "pad_to": 3,
    },
}

train_params = {"data_layer_params": {"dataset_files": [os.path.join(data_root, "train.csv")],
                                      "shuffle": True}}
eval_params = {"data_layer_params": {"dataset_files": [os.path.join(data_root, "val.csv")],
                                     "duration_max": None, "shuffle": False}}
infer_params = {"data_layer_params": {"dataset_files": [os.path.join(data_root, "test.csv")],
                                      "duration_max": None, "shuffle": False}}
interactive_infer_params = {"data_layer_params": {"dataset_files": [], "duration_max": None,
                                                  "shuffle": False}}
