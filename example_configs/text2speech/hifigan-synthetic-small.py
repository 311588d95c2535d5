# pylint: skip-file
"""A small HiFi-GAN vocoder on the synthetic espeak-ng corpus (CPU minutes per hundred steps).

    python scripts/make_synthetic_speech.py --tts --output_dir=data/synth_tts
    python run.py --config_file=example_configs/text2speech/hifigan-synthetic-small.py \
        --mode=train_eval

The audio keys are tacotron-synthetic-small.py's (16 kHz, 512-point FFT, hop 256, 40 HTK mel
channels of the magnitude, floor 1e-2), so the mel frames that Tacotron predicts are what
this vocoder reads. The generator is V3's layout at a quarter of its channels (0.1 M
parameters), the discriminators the paper's at an eighth of their channels; both update
groups take the top-level optimizer settings (the paper's AdamW, betas 0.8 / 0.99).
"""
import os

import tensorflow as tf

from open_seq2seq.data import VocoderDataLayer
from open_seq2seq.decoders import FakeDecoder
from open_seq2seq.encoders import HiFiGANEncoder
from open_seq2seq.losses import HiFiGANLoss
from open_seq2seq.models import HiFiGAN
from open_seq2seq.optimizers.lr_policies import fixed_lr

data_root = os.environ.get("TTS_DATA", "data/synth_tts")

base_model = HiFiGAN

base_params = {
    "random_seed": 0,
    "max_steps": 2000,
    "batch_size_per_gpu": 8,
    "eval_batch_size_per_gpu": 4,
    "save_summaries_steps": 50,
    "print_loss_steps": 25,
    "print_samples_steps": 250,
    "eval_steps": 250,
    "save_checkpoint_steps": 250,
    "logdir": "runs/hifigan-synthetic-small",
    "optimizer": "AdamW",
    "optimizer_params": {"beta1": 0.8, "beta2": 0.99, "weight_decay": 0.01, "epsilon": 1e-8},
    "lr_policy": fixed_lr,
    "lr_policy_params": {"learning_rate": 2e-4},
    "dtype": tf.float32,
    "encoder": HiFiGANEncoder,
    "encoder_params": {"preset": "v3", "upsample_initial_channel": 64},
    "decoder": FakeDecoder,
    "loss": HiFiGANLoss,
    "loss_params": {
        "period_channels": [4, 16, 64, 128, 128],
        "scale_channels": [16, 16, 32, 64, 128, 128, 128],
    },
    "data_layer": VocoderDataLayer,
    "data_layer_params": {
        "dataset_location": data_root,
        "num_audio_features": 40,
        "sampling_rate": 16000,
        "n_fft": 512,
        "hop_length": 256,
        "mel_type": "htk",
        "mag_power": 1,
        "data_min": 1e-2,
        "segment_size": 4096,
    },
}

train_params = {"data_layer_params": {"dataset_files": [os.path.join(data_root, "train.csv")],
                                      "shuffle": True}}
eval_params = {"data_layer_params": {"dataset_files": [os.path.join(data_root, "val.csv")],
                                     "shuffle": False}}
infer_params = {"data_layer_params": {"dataset_files": [os.path.join(data_root, "test.csv")],
                                      "shuffle": False}}
interactive_infer_params = {"data_layer_params": {"dataset_files": [], "shuffle": False}}
