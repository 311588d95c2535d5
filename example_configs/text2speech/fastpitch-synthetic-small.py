# pylint: skip-file
"""A small FastPitch with a learned aligner on the synthetic espeak-ng corpus (CPU minutes).

    python scripts/make_synthetic_speech.py --tts --output_dir=data/synth_tts
    python run.py --config_file=example_configs/text2speech/fastpitch-synthetic-small.py \
        --mode=train_eval

The corpus is one fixed voice at 22050 Hz, resampled here to 16 kHz; 40 mel channels, a 16 ms
hop. Frame pitch comes from librosa's YIN (fast; espeak-ng's voicing is clear-cut), cached in
<data>/pitch_cache. Durations come from the aligner trained with the model (monotonic
alignment search), so there is nothing to train first. Eval prints the mel loss with the MAS
durations, the duration error (frames per symbol) and the free-running length ratio.
"""
import os

import tensorflow as tf

from open_seq2seq.data.text2speech.fastpitch import FastPitchDataLayer
from open_seq2seq.decoders import FastPitchDecoder
from open_seq2seq.encoders import FastPitchEncoder
from open_seq2seq.losses import FastPitchLoss
from open_seq2seq.models import FastPitch
from open_seq2seq.optimizers.lr_policies import fixed_lr

data_root = os.environ.get("TTS_DATA", "data/synth_tts")

base_model = FastPitch

_fft = {"d_model": 96, "num_layers": 2, "num_heads": 2, "head_size": 48, "filter_size": 256,
        "kernel_size": 3, "dropout": 0.1, "attention_dropout": 0.1}

base_params = {
    "random_seed": 0,
    "max_steps": 1000,
    "batch_size_per_gpu": 16,
    "save_summaries_steps": 50,
    "print_loss_steps": 25,
    "print_samples_steps": 250,
    "eval_steps": 250,
    "save_checkpoint_steps": 250,
    "logdir": "runs/fastpitch-synthetic-small",
    "save_to_tensorboard": True,
    "max_grad_norm": 1.0,
    "optimizer": "Adam",
    "lr_policy": fixed_lr,
    "lr_policy_params": {"learning_rate": 1e-3},
    "dtype": tf.float32,
    "encoder": FastPitchEncoder,
    "encoder_params": dict(_fft),
    "decoder": FastPitchDecoder,
    "decoder_params": dict(_fft, predictor_filter_size=96, predictor_kernel_size=3,
                           predictor_dropout=0.1, aligner_channels=40, max_duration=40),
    "loss": FastPitchLoss,
    "loss_params": {"binarization_start_step": 200},
    "data_layer": FastPitchDataLayer,
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
        "pad_to": 1,
        "pitch_method": "yin",
        # eval and infer normalise pitch with the training corpus's statistics
        "pitch_stats_files": [os.path.join(data_root, "train.csv")],
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
