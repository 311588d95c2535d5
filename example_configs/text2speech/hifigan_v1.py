# pylint: skip-file
"""HiFi-GAN V1 on LJSpeech at the paper's size and settings (Kong et al., 2020).

Generator V1 (13.9 M parameters: upsampling 8, 8, 2, 2 from 512 channels, type-1 residual
blocks of kernels 3, 7, 11 and dilations 1, 3, 5); multi-period discriminator (periods 2, 3,
5, 7, 11; 41.1 M) and multi-scale discriminator (3 scales; 29.6 M). Input: 80 Slaney mel
channels of the magnitude up to 8 kHz from a 1024-point FFT, hop and window 256 / 1024 at
22.05 kHz, log with a floor of 1e-5; training segments of 8192 samples, 16 per batch. The
generator minimises adversarial + 2 x feature matching + 45 x mel L1 (the mel loss up to
Nyquist); both groups use AdamW (lr 2e-4, betas 0.8 / 0.99, PyTorch's weight decay 0.01 and
epsilon 1e-8) with the learning rate multiplied by 0.999 after every epoch. The paper trained
V1 for 2.5 M steps.

LJSpeech cannot be downloaded here: point dataset_location at a copy (the folder holding
wavs/) and dataset_files at metadata-format CSVs (name|raw|normalized).
"""
import tensorflow as tf

from open_seq2seq.data import VocoderDataLayer
from open_seq2seq.decoders import FakeDecoder
from open_seq2seq.encoders import HiFiGANEncoder
from open_seq2seq.losses import HiFiGANLoss
from open_seq2seq.models import HiFiGAN
from open_seq2seq.optimizers.lr_policies import exp_decay

base_model = HiFiGAN

#: Updates per epoch: ceil(12,950 / 16) for the reference implementation's training list of
#: LJSpeech (12,950 of its 13,100 clips); set it to ceil(<your training clips> / 16).
STEPS_PER_EPOCH = 810

base_params = {
    "random_seed": 0,
    "max_steps": 2500000,
    "num_gpus": 1,
    "batch_size_per_gpu": 16,
    "eval_batch_size_per_gpu": 1,
    "save_summaries_steps": 100,
    "print_loss_steps": 100,
    "print_samples_steps": 5000,
    "eval_steps": 1000,
    "save_checkpoint_steps": 5000,
    "logdir": "result/hifigan-v1-LJ",
    "optimizer": "AdamW",
    "optimizer_params": {"beta1": 0.8, "beta2": 0.99, "weight_decay": 0.01, "epsilon": 1e-8},
    "lr_policy": exp_decay,
    "lr_policy_params": {"learning_rate": 2e-4, "decay_steps": STEPS_PER_EPOCH,
                         "decay_rate": 0.999, "use_staircase_decay": True},
    "dtype": tf.float32,
    "encoder": HiFiGANEncoder,
    "encoder_params": {"preset": "v1"},
    "decoder": FakeDecoder,
    "loss": HiFiGANLoss,
    "loss_params": {},  # the paper's discriminators and weights
    "data_layer": VocoderDataLayer,
    "data_layer_params": {
        "dataset": "LJ",
        "dataset_location": "data/speech/LJSpeech",
        "num_audio_features": 80,
        "n_fft": 1024,
        "hop_length": 256,
        "win_length": 1024,
        "mel_type": "slaney",
        "fmin": 0.0,
        "fmax": 8000.0,
        "mag_power": 1,
        "data_min": 1e-5,
        "segment_size": 8192,
    },
}

train_params = {"data_layer_params": {"dataset_files": ["data/speech/LJSpeech/train.csv"],
                                      "shuffle": True}}
eval_params = {"data_layer_params": {"dataset_files": ["data/speech/LJSpeech/val.csv"],
                                     "shuffle": False}}
infer_params = {"data_layer_params": {"dataset_files": ["data/speech/LJSpeech/test.csv"],
                                      "shuffle": False}}
interactive_infer_params = {"data_layer_params": {"dataset_files": [], "shuffle": False}}
