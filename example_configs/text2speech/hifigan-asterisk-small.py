# pylint: skip-file
"""A small HiFi-GAN vocoder on real speech: the Asterisk prompts (8 kHz, CPU-sized).

    python scripts/import_asterisk_sounds.py --output_dir=data/asterisk
    python run.py --config_file=example_configs/text2speech/hifigan-asterisk-small.py \
        --mode=train_eval
    python scripts/compare_vocoders.py \
        --config_file=example_configs/text2speech/hifigan-asterisk-small.py \
        --logdir=runs/hifigan-asterisk-small --csv=data/asterisk/test.csv

The audio keys are tacotron-asterisk-small.py's (8 kHz, 256-point STFT, 10 ms hop of 80
samples, 40 HTK mel channels of the magnitude up to 4 kHz, floor 1e-2), so the frames that
Tacotron predicts are what this vocoder reads (its silence trimming is the Tacotron data
layer's own business: a vocoder is trained on whole recordings). The generator is V3's
layout with three stages 5 x 4 x 4 = 80 (the hop) at 64 channels, the discriminators the
paper's at an eighth of their channels; segments of 50 frames (0.5 s). Beyond the paper,
for a generator this small trained this briefly (docs/speech-synthesis.md, "HiFi-GAN
vocoder": 7.80 dB MCD on the test prompts at step 2100 against 9.06 without them): each
output's mean removed (``remove_dc``), Parallel WaveGAN's multi-resolution STFT loss beside
the mel loss (``stft_weight``), and eval, infer and export on the weights' moving averages.
"""
import os

import tensorflow as tf

from open_seq2seq.data import VocoderDataLayer
from open_seq2seq.decoders import FakeDecoder
from open_seq2seq.encoders import HiFiGANEncoder
from open_seq2seq.losses import HiFiGANLoss
from open_seq2seq.models import HiFiGAN
from open_seq2seq.optimizers.lr_policies import fixed_lr

data_root = os.environ.get("ASTERISK_DATA", "data/asterisk")

base_model = HiFiGAN

base_params = {
    "random_seed": 0,
    "max_steps": 3000,
    "batch_size_per_gpu": 8,
    "eval_batch_size_per_gpu": 4,
    "save_summaries_steps": 50,
    "print_loss_steps": 25,
    "print_samples_steps": 500,
    "eval_steps": 500,
    "save_checkpoint_steps": 250,
    "moving_average_decay": 0.99,
    "logdir": "runs/hifigan-asterisk-small",
    "optimizer": "AdamW",
    "optimizer_params": {"beta1": 0.8, "beta2": 0.99, "weight_decay": 0.01, "epsilon": 1e-8},
    "lr_policy": fixed_lr,
    "lr_policy_params": {"learning_rate": 2e-4},
    "dtype": tf.float32,
    "encoder": HiFiGANEncoder,
    "encoder_params": {"preset": "v3", "upsample_rates": [5, 4, 4],
                       "upsample_kernel_sizes": [10, 8, 8], "upsample_initial_channel": 64,
                       "remove_dc": True},
    "decoder": FakeDecoder,
    "loss": HiFiGANLoss,
    "loss_params": {
        "period_channels": [4, 16, 64, 128, 128],
        "scale_channels": [16, 16, 32, 64, 128, 128, 128],
        "stft_weight": 20.0,
    },
    "data_layer": VocoderDataLayer,
    "data_layer_params": {
        "dataset_location": data_root,
        "num_audio_features": 40,
        "sampling_rate": 8000,
        "n_fft": 256,
        "hop_length": 80,
        "mel_type": "htk",
        "mag_power": 1,
        "fmax": 4000.0,
        "data_min": 1e-2,
        "segment_size": 4000,
    },
}

train_params = {"data_layer_params": {"dataset_files": [os.path.join(data_root, "train.csv")],
                                      "shuffle": True}}
eval_params = {"data_layer_params": {"dataset_files": [os.path.join(data_root, "val.csv")],
                                     "shuffle": False}}
infer_params = {"data_layer_params": {"dataset_files": [os.path.join(data_root, "test.csv")],
                                      "shuffle": False}}
interactive_infer_params = {"data_layer_params": {"dataset_files": [], "shuffle": False}}
